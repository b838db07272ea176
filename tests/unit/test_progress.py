"""What the user sees while Ansible runs, from runner events (plain output, not a terminal)."""

import io

from meshctl import runner
from tests.hwfacts import NO_GPU


def event(kind, host, task="t", **data):
    return {"event": kind, "event_data": {"host": host, "task": task, **data}}


def test_plain_progress_counts_names_failures_and_recaps():
    out = io.StringIO()
    progress = runner.Progress(out=out, live=False)
    for e in (
        {"event": "playbook_on_play_start", "event_data": {"play": "Every node"}},
        {"event": "playbook_on_task_start", "event_data": {"task": "Install munge"}},
        event("runner_on_ok", "head", res={"changed": True}),
        event("runner_on_ok", "gpu1", res={"changed": False}),
        event("runner_on_failed", "gpu1", task="Install munge", res={"msg": "No package matching 'munge'"}),
        event("runner_on_failed", "head", task="ignored", ignore_errors=True, res={"msg": "x"}),
        event("runner_on_ok", "head", task_action="ansible.builtin.debug", res={"msg": "dry run: note"}),
        event("runner_on_ok", "head", res={"changed": True, "diff": {"before": "a\n", "after": "b\n"}}),
    ):
        progress.event(e)
    progress.close()
    progress.recap()
    text = out.getvalue()
    assert "PLAY Every node" in text and "TASK Install munge" in text
    assert "failed: gpu1: Install munge: No package matching 'munge'" in text
    assert "head: dry run: note" in text
    assert "-a" in text and "+b" in text  # the diff is shown
    assert [f.host for f in progress.failures] == ["gpu1"]  # ignored errors are not failures
    recap = text[text.index("Recap") :].splitlines()
    assert recap[1].split() == ["host", "ok", "changed", "failed", "unreachable", "skipped"]
    assert recap[2].split() == ["gpu1", "1", "0", "1", "0", "0"]
    assert recap[3].split() == ["head", "1", "2", "0", "0", "0"]


def test_reports_set_by_roles_are_collected_per_host():
    progress = runner.Progress(out=io.StringIO(), live=False)
    report = {"action": "join", "after": {"backend_state": "Running", "ipv4": "100.64.0.7"}}
    progress.event(event("runner_on_ok", "gpu1", res={"ansible_facts": {"tailscale_report": report, "other": 1}}))
    progress.event(event("runner_on_ok", "head", res={"ansible_facts": {"mesh_hw": NO_GPU}}))
    progress.event(event("runner_on_ok", "cpu1", res={"censored": "the output has been hidden"}))  # no_log
    assert progress.reports == {"gpu1": report}
