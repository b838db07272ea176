"""What the user sees while Ansible runs, from runner events (plain output, not a terminal)."""

import io

from meshctl import runner
from tests.hwfacts import NO_GPU


def event(kind, host, task="t", **data):
    return {"event": kind, "event_data": {"host": host, "task": task, **data}}


def test_plain_progress_counts_names_failures_and_recaps():
    out = io.StringIO()
    progress = runner.Progress(out=out, live=False)
    events = runner.Events(progress)  # the run's results; the reporter shows them
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
        events.event(e)
    progress.close()
    progress.recap()
    text = out.getvalue()
    assert "PLAY Every node" in text and "TASK Install munge" in text
    assert "failed: gpu1: Install munge: No package matching 'munge'" in text
    assert "head: dry run: note" in text
    assert "-a" in text and "+b" in text  # the diff is shown
    assert [f.host for f in events.failures] == ["gpu1"]  # ignored errors are not failures
    recap = text[text.index("Recap") :].splitlines()
    assert recap[1].split() == ["host", "ok", "changed", "failed", "unreachable", "skipped"]
    assert recap[2].split() == ["gpu1", "1", "0", "1", "0", "0"]
    assert recap[3].split() == ["head", "1", "2", "0", "0", "0"]


def test_reports_set_by_roles_are_collected_per_host():
    progress = runner.Events(runner.Progress(out=io.StringIO(), live=False))
    report = {"action": "join", "after": {"backend_state": "Running", "ipv4": "100.64.0.7"}}
    progress.event(event("runner_on_ok", "gpu1", res={"ansible_facts": {"tailscale_report": report, "other": 1}}))
    progress.event(event("runner_on_ok", "head", res={"ansible_facts": {"mesh_hw": NO_GPU}}))
    progress.event(event("runner_on_ok", "cpu1", res={"censored": "the output has been hidden"}))  # no_log
    assert progress.reports == {"gpu1": report}


def test_verbose_progress_prints_ansibles_own_output_and_every_run_is_logged(tmp_path):
    out = io.StringIO()
    progress = runner.Progress(out=out, live=False)
    progress.verbose = True
    log = runner.open_log(tmp_path, "site.yml")
    progress.log = log
    events = runner.Events(progress)
    events.event({"event": "playbook_on_task_start", "stdout": "TASK [Install munge] ****",
                    "event_data": {"task": "Install munge"}})  # fmt: skip
    events.event({"event": "runner_on_ok", "stdout": "ok: [gpu1] => {\"changed\": false}\x1b]52;c;eA==\x07",
                    "event_data": {"host": "gpu1", "task": "Install munge", "res": {"changed": False}}})  # fmt: skip
    log.close()
    text = out.getvalue()
    assert "TASK [Install munge] ****" in text and 'ok: [gpu1] => {"changed": false}' in text
    assert "  TASK Install munge" not in text  # Ansible's lines instead of meshctl's short ones
    (path,) = (tmp_path / "logs").iterdir()
    assert path.name.endswith("-site.log") and path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "logs").stat().st_mode & 0o777 == 0o700
    assert path.read_text() == 'TASK [Install munge] ****\nok: [gpu1] => {"changed": false}\n'  # sanitized too


def test_run_logs_are_rotated_and_named_in_errors(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    for i in range(runner.KEEP_LOGS + 5):
        (folder / f"20260101-0000{i:02d}-1-site.log").write_text("x")
    runner.open_log(tmp_path, "status.yml").close()
    kept = sorted(p.name for p in folder.iterdir())
    assert len(kept) == runner.KEEP_LOGS and kept[0] == "20260101-000006-1-site.log"
    result = runner.RunResult("failed", 2, [runner.Failure("gpu1", "Install munge", "no package")],
                              log=folder / "x.log")  # fmt: skip
    try:
        runner.raise_for(result, "run it again")
    except runner.PlaybookError as exc:
        assert f"the run's whole output: {folder / 'x.log'}" in str(exc)
    else:
        raise AssertionError("raise_for did not raise")


def test_a_failed_loop_is_named_by_what_its_failed_items_said():
    out = io.StringIO()
    progress = runner.Events(runner.Progress(out=out, live=False))
    res = {"msg": "One or more items failed", "results": [
        {"item": "ctl", "failed": False, "msg": "All assertions passed"},
        {"item": "n2", "failed": True, "msg": "n2 has no hardware facts or mesh address: run `meshctl apply`"},
    ]}  # fmt: skip
    progress.event(event("runner_on_failed", "ctl", task="Check every compute node has hardware facts", res=res))
    assert progress.failures[0].message == "n2 has no hardware facts or mesh address: run `meshctl apply`"


def test_a_run_returns_the_path_of_its_log(tmp_path, monkeypatch):
    """run_playbook with a mesh folder: the result names its log, which holds what the run printed."""

    class Done:
        status, rc = "successful", 0

    def fake_run(**kw):
        kw["event_handler"]({"event": "playbook_on_stats", "stdout": "PLAY RECAP ****", "event_data": {}})
        return Done()

    monkeypatch.setattr(runner.ansible_runner, "run", fake_run)
    result = runner.run_playbook("site.yml", {"all": {"hosts": {}}}, tmp_path, progress=runner.Progress(
        out=io.StringIO(), live=False))  # fmt: skip
    assert result.log is not None and result.log.parent == tmp_path / "logs"
    said = runner.strategy_said(runner.mitogen_strategies())  # its first line: which way the run went
    assert result.log.read_text() == f"# meshctl: site.yml, {said}\nPLAY RECAP ****\n"


def test_a_runs_log_ends_with_where_its_seconds_went_and_v_prints_it(tmp_path, monkeypatch):
    from tests.unit.meshctl.test_timing import RUN

    class Done:
        status, rc = "successful", 0

    def fake_run(**kw):
        for kind, data, created in RUN:
            kw["event_handler"]({"event": kind, "event_data": data, "created": created, "stdout": ""})
        return Done()

    monkeypatch.setattr(runner.ansible_runner, "run", fake_run)
    for verbosity in (0, 1):
        out = io.StringIO()
        (tmp_path / str(verbosity)).mkdir()
        result = runner.run_playbook("site.yml", {"all": {"hosts": {}}}, tmp_path / str(verbosity),
                                     progress=runner.Progress(out=out, live=False), verbosity=verbosity)  # fmt: skip
        logged = result.log.read_text().splitlines()
        assert logged[-8].startswith("# profile: the run took 14.0 s") and logged[-1].startswith("# (the play's")
        assert result.profile == [line.removeprefix("# ") for line in logged[-8:]]
        assert ("profile: the run took 14.0 s" in out.getvalue()) == bool(verbosity)
