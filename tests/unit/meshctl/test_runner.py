"""How meshctl runs Ansible: which ansible-playbook (beside its interpreter, else PATH, else a clear
error), host key checking on, plain Ansible unless MESHCTL_MITOGEN=1, new nodes' host keys recorded first."""

import io
import os
import subprocess
import sys

import pytest
import yaml

from meshctl import resources, runner, ssh
from meshctl.errors import EnvironmentProblem


def executable(path):
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_one_beside_meshctls_interpreter_wins(tmp_path, monkeypatch):
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    beside = executable(venv / "ansible-playbook")
    other = tmp_path / "elsewhere"
    other.mkdir()
    executable(other / "ansible-playbook")
    monkeypatch.setattr(sys, "executable", str(venv / "python3"))
    monkeypatch.setenv("PATH", str(other))
    assert runner.ansible_playbook() == str(beside)


def test_path_is_used_when_the_venv_has_none(tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    other.mkdir()
    found = executable(other / "ansible-playbook")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))
    monkeypatch.setenv("PATH", str(other))
    assert runner.ansible_playbook() == str(found)


def test_missing_ansible_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match="ansible-playbook is not installed") as error:
        runner.ansible_playbook()
    assert error.value.exit_code == 6


def test_runs_check_host_keys_against_the_meshs_known_hosts(tmp_path, runner_call):
    # ansible-runner sets ANSIBLE_HOST_KEY_CHECKING=False unless told; meshctl tells it True, so no
    # ssh command Ansible builds carries StrictHostKeyChecking=no.
    seen = runner_call(known_hosts=tmp_path / "known hosts")
    env = seen["envvars"]
    assert env["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert "StrictHostKeyChecking=accept-new" in env["ANSIBLE_SSH_ARGS"]
    assert f'UserKnownHostsFile="{tmp_path / "known hosts"}"' in env["ANSIBLE_SSH_ARGS"]
    assert "StrictHostKeyChecking=no" not in repr(seen)


def test_a_run_knows_meshctl_as_the_parent_it_ends_with(runner_call):
    # The callback meshctl.mesh.stop_with_parent ends ansible-playbook and its workers with this
    # process (tests/unit/collection/test_stop_with_parent.py shows it on real processes).
    env = runner_call()["envvars"]
    assert env[runner.PARENT_PID_VARIABLE] == str(os.getpid())
    assert "meshctl.mesh.stop_with_parent" in env["ANSIBLE_CALLBACKS_ENABLED"].split(",")


def test_runs_are_plain_ansible_unless_mitogen_is_asked_for(tmp_path, runner_call, monkeypatch):
    monkeypatch.delenv("MESHCTL_MITOGEN", raising=False)
    seen = runner_call(extravars={"slurm_controller_drain_force": True})
    assert "ANSIBLE_STRATEGY" not in seen["envvars"] and seen["extravars"] == {"slurm_controller_drain_force": True}

    monkeypatch.setenv("MESHCTL_MITOGEN", "1")
    seen = runner_call(extravars={"slurm_controller_drain_force": True})
    env = seen["envvars"]
    assert env["ANSIBLE_STRATEGY"] == "mitogen_linear"
    plugins = runner.Path(env["ANSIBLE_STRATEGY_PLUGINS"])
    assert (plugins / "mitogen_linear.py").is_file() and (plugins / "mitogen_free.py").is_file()
    assert seen["extravars"] == {"slurm_controller_drain_force": True}  # the caller's, kept

    monkeypatch.setenv("MESHCTL_MITOGEN", "0")
    seen = runner_call(extravars={"slurm_controller_drain_force": True})
    assert "ANSIBLE_STRATEGY" not in seen["envvars"] and "ANSIBLE_STRATEGY_PLUGINS" not in seen["envvars"]
    assert seen["extravars"] == {"slurm_controller_drain_force": True}


def test_every_play_that_names_a_strategy_takes_mitogens_when_the_run_is_configured_for_mitogen():
    """A play's own `strategy:` wins over ANSIBLE_STRATEGY: one naming Ansible's free strategy outright
    sent Molecule's converges back to a new connection and interpreter per task and node (six
    `docker exec` each). Every play of the project's playbooks and scenarios that names one must
    take Mitogen's in a run configured with Mitogen's linear strategy (meshctl's opt-in, Molecule's
    runs), and Ansible's in any other. Evaluated by Ansible's templar with the configuration each sets."""
    import subprocess
    import sys

    import yaml

    root = runner.Path(runner.__file__).parents[1]
    expressions = {}
    for path in sorted([*(root / "playbooks").glob("*.yml"), *(root / "molecule").glob("*/*.yml")]):
        plays = yaml.safe_load(path.read_text())
        for play in plays if isinstance(plays, list) else []:
            if isinstance(play, dict) and "strategy" in play:
                expressions[f"{path.relative_to(root)}: {play.get('name')}"] = play["strategy"]
    assert "playbooks/site.yml: Every node mounts the share and knows the tracking server" in expressions
    program = (
        "import sys\nfrom ansible.parsing.dataloader import DataLoader\n"
        "from ansible.plugins.loader import init_plugin_loader\ninit_plugin_loader()\n"
        "from ansible.template import Templar, trust_as_template\n"
        "print(Templar(loader=DataLoader(), variables={}).template(trust_as_template(sys.argv[1])))\n"
    )
    for where, expression in expressions.items():
        said = {}
        for configured in ("mitogen_linear", "linear", ""):
            env = {k: v for k, v in runner.os.environ.items() if not k.startswith("ANSIBLE_")}
            env.update({"ANSIBLE_STRATEGY": configured} if configured else {})
            done = subprocess.run([sys.executable, "-c", program, str(expression)], capture_output=True, text=True,
                                  env=env, check=True, timeout=60)  # fmt: skip
            said[configured] = done.stdout.strip()
        assert said["mitogen_linear"].startswith("mitogen_"), (where, said)
        assert not said["linear"].startswith("mitogen_") and not said[""].startswith("mitogen_"), (where, said)


def test_the_run_log_says_which_way_the_run_went(tmp_path, runner_call, monkeypatch):
    # The e2e files that run under Mitogen read this line to show they did (docs/testing.md).
    for asked, said in (("1", "Mitogen (MESHCTL_MITOGEN=1)"), ("0", "plain Ansible")):
        monkeypatch.setenv("MESHCTL_MITOGEN", asked)
        mesh = tmp_path / asked
        mesh.mkdir()
        runner_call(mesh_dir=mesh)
        (log,) = (mesh / "logs").glob("*-site.log")
        assert log.read_text().splitlines()[0] == f"# meshctl: site.yml, {said}"


def test_a_caller_can_run_without_mitogen(runner_call, monkeypatch):
    monkeypatch.setenv("MESHCTL_MITOGEN", "1")
    seen = runner_call(mitogen=False)  # status's short run
    assert "ANSIBLE_STRATEGY" not in seen["envvars"] and not seen["extravars"]


def test_an_ansible_playbook_from_elsewhere_runs_without_mitogen(tmp_path, monkeypatch):
    # It could not import the Mitogen installed beside meshctl.
    monkeypatch.setenv("MESHCTL_MITOGEN", "1")
    assert runner.mitogen_strategies() is not None
    monkeypatch.setattr(runner, "ansible_playbook", lambda: str(tmp_path / "bin" / "ansible-playbook"))
    assert runner.mitogen_strategies() is None


@pytest.fixture
def one_known(tmp_path):
    """known_hosts holding a key for 10.9.9.1:22 only."""
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    path = tmp_path / "known_hosts"
    path.write_text("10.9.9.1 " + " ".join(key.with_suffix(".pub").read_text().split()[:2]) + "\n")
    return path


INVENTORY = {"all": {"hosts": {
    "head": {"ansible_host": "10.9.9.9", "ansible_connection": "local"},
    "known": {"ansible_host": "10.9.9.1", "ansible_user": "root", "ansible_port": 22},
    "new": {"ansible_host": "10.9.9.2", "ansible_user": "ubuntu", "ansible_port": 2222,
            "ansible_ssh_private_key_file": "/keys/id"},
}}}  # fmt: skip


def test_first_contacts_are_the_runs_ssh_nodes_with_no_recorded_key(one_known):
    new = [("10.9.9.2", "ubuntu", 2222, "/keys/id")]
    assert runner.first_contacts(INVENTORY, None, one_known) == new
    assert runner.first_contacts(INVENTORY, "localhost,new", one_known) == new
    assert runner.first_contacts(INVENTORY, "localhost,known,head", one_known) == []
    assert runner.first_contacts(INVENTORY, "compute", one_known) == new  # a group: any node may run


def test_a_mitogen_run_records_new_nodes_keys_first(tmp_path, one_known, monkeypatch):
    monkeypatch.setenv("MESHCTL_MITOGEN", "1")
    learned = []
    monkeypatch.setattr(ssh, "learn_host_keys", lambda targets, known_hosts: learned.append((targets, known_hosts)))

    def fake_runner_run(**kw):
        raise SystemExit(0)

    monkeypatch.setattr(runner.ansible_runner, "run", fake_runner_run)
    with pytest.raises(SystemExit):
        runner.run_playbook("site.yml", INVENTORY, known_hosts=one_known, limit="localhost,new")
    assert learned == [([("10.9.9.2", "ubuntu", 2222, "/keys/id")], one_known)]


def test_a_run_ctrl_c_stopped_is_exit_130_saying_what_had_run_and_how_to_go_on():
    from meshctl.errors import Interrupted

    result = runner.RunResult("canceled", 254, stats={"head": {"ok": 12, "changed": 1}, "gpu1": {"failed": 1}})
    with pytest.raises(Interrupted) as caught:
        runner.raise_for(result, "retry")
    assert (
        caught.value.exit_code == 130
        and "interrupted (Ctrl+C) during the Ansible run; tasks had run on head" in str(caught.value)
    )
    assert "run the command again" in caught.value.hint


def test_the_live_table_shows_the_task_dimmed_not_its_markup():
    import io

    from rich.console import Console

    progress = runner.Progress(out=io.StringIO(), live=False)
    progress.play, progress.task = "Converge [head]", "Install slurmd [/dim]"
    screen = io.StringIO()
    Console(file=screen, force_terminal=True, width=100).print(progress._render())
    shown = screen.getvalue()
    assert "[dim]" not in shown and "Install slurmd [/dim]" in shown and "Converge [head]" in shown
    assert "\x1b[2m" in shown  # dim, as a terminal shows it


def test_a_failure_is_told_by_the_tasks_own_words_not_ansibles_generic_ones():
    said = runner._message
    # A command: its stderr's last line, not "non-zero return code".
    command = {"msg": "non-zero return code", "rc": 1, "stderr": "scontrol: error:\nUnable to contact slurm controller"}
    assert said(command) == "Unable to contact slurm controller"
    # A loop whose items failed through failed_when: what they said, not "All items completed".
    item = {"item": "n1", "rc": 1, "failed": True, "msg": "non-zero return code",
            "stderr": "slurm_update error: Unable to contact slurm controller"}  # fmt: skip
    looped = {"msg": "All items completed", "results": [item, {"item": "n2", "rc": 0, "failed": False}]}
    assert said(looped) == "slurm_update error: Unable to contact slurm controller"
    # A task's own message, whole: SSH's words on a changed host key come after a line of @ signs.
    ssh = "@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n@@@@@@@@@@"
    assert said({"msg": ssh, "unreachable": True}) == ssh
    assert said({}) == "failed (no message)"


def test_a_traceback_in_a_failure_is_told_by_its_exception_not_its_frames():
    said = runner._message
    # Mitogen's error from a call: the exception first, then the frames (long enough to fill the 800
    # characters a message is cut to); Python's own traceback: the exception last.
    frame = ('  File "/venv/lib/python3.11/site-packages/mitogen/service.py", line 619, in _on_service_call\n'
             "    return invoker.invoke(method_name, kwargs, msg)\n"
             "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n")  # fmt: skip
    mitogen = "mitogen.core.CallError: builtins.FileNotFoundError: [Errno 2] No such file: '/x/y.py'\n" + frame * 8
    assert (
        said({"msg": mitogen})
        == "mitogen.core.CallError: builtins.FileNotFoundError: [Errno 2] No such file: '/x/y.py'"
    )
    python = "Traceback (most recent call last):\n" + frame * 8 + "KeyError: 'namelist'\n"
    assert said({"msg": "Unexpected failure during module execution: boom\n" + python}) == (
        "Unexpected failure during module execution: boom\nKeyError: 'namelist'"
    )
    assert said({"msg": "a message\n  indented on purpose\n  with no frame"}) == (
        "a message\n  indented on purpose\n  with no frame"
    )


def test_the_fix_of_a_failed_run_names_the_command_as_it_was_given(mesh, monkeypatch):
    from click.testing import CliRunner

    from meshctl.cli import cli

    failure = runner.Failure("head", "Start slurmctld", "slurmctld: fatal")
    failed = runner.RunResult("failed", 2, [failure], {"head": {"failed": 1}})
    monkeypatch.setattr(runner, "run_playbook", lambda *a, **k: failed)
    out = CliRunner().invoke(cli, ["apply", "--mesh", str(mesh.path), "--limit", "head"], terminal_width=300)
    assert out.exit_code == 5, out.output
    assert "Ansible failed at task 'Start slurmctld' on head: slurmctld: fatal" in out.output
    assert f"run `meshctl apply --mesh {mesh.path} --limit head` again" in " ".join(out.output.split())
    assert runner.again("meshctl apply") == "meshctl apply"  # outside a command


def test_long_runs_show_a_bar_per_node_from_what_its_last_run_took_and_the_step_it_is_on(tmp_path):
    mesh_dir = tmp_path
    assert runner.read_task_counts(mesh_dir, "site.yml", ["head", "n1"]) == {}  # the first run: no totals
    ran = {"head": {"ok": 30, "changed": 5, "skipped": 5}, "n1": {"ok": 10, "skipped": 10}, "localhost": {"ok": 1}}
    runner.record_task_counts(mesh_dir, "site.yml", ran)
    runner.record_task_counts(mesh_dir, "status.yml", {"head": {"ok": 3}})
    expected = runner.read_task_counts(mesh_dir, "site.yml", ["head", "n1", "n2"])
    assert expected == {"head": 40, "n1": 20, "n2": 40}  # a new node: the median of the others'
    progress = runner.Progress(out=io.StringIO(), live=False)
    progress.expected = expected
    events = runner.Events(progress)  # the run's counts, which the reporter's bars show
    for _ in range(10):
        events.event({"event": "runner_on_ok", "event_data": {"host": "n1", "task": "x", "res": {}}})
    events.event({"event": "runner_on_start", "event_data": {"host": "n1", "task": "Install the Slurm packages"}})
    events.event({"event": "runner_on_start", "event_data": {"host": "n2", "task": "Gathering Facts"}})
    rows = {row[0]: row for row in progress.live_rows()}
    assert rows["n1"][1] == "[######------] 10/20" and rows["n1"][-1] == "Install the Slurm packages"
    assert rows["n2"][1] == "[------------] 0/40" and rows["n2"][-1] == "Gathering Facts"
    progress.expected = {}
    assert progress.bar("n1") == "10/?"
    (mesh_dir / "logs" / runner.TASK_COUNTS).write_text("[not, a, mapping")  # a broken file: no bars, no error
    assert runner.read_task_counts(mesh_dir, "site.yml", ["head"]) == {}


def test_the_head_not_answering_is_exit_7_though_the_nodes_waiting_for_it_failed():
    from meshctl.errors import PartialError, PlaybookError

    waited = runner.Failure("n1", "Wait for the head, whose Slurm this node's is checked against",
                            "The head ctl dropped out of this run (it did not answer, or failed above)")  # fmt: skip
    lost = runner.Failure("ctl", "Gathering Facts", "Task failed: Connection timed out.")
    result = runner.RunResult("failed", 2, failures=[lost, waited],
                              stats={"ctl": {"unreachable": 1}, "n1": {"ok": 10, "failed": 1}})  # fmt: skip
    with pytest.raises(PartialError) as caught:
        runner.raise_for(result, "retry", head="ctl")
    said = str(caught.value)
    assert caught.value.exit_code == 7 and "could not be reached: ctl" in said and "the head, ctl, among them" in said
    assert caught.value.unreachable == {"ctl": "Task failed: Connection timed out."}
    assert "every node waits for it" in caught.value.todos["ctl"]
    # A node that did not answer beside a node that failed on its own, the head answering: failed (5).
    other = runner.RunResult("failed", 2, failures=[runner.Failure("n2", "Install munge", "no space left")],
                             stats={"ctl": {"ok": 3}, "n1": {"unreachable": 1}, "n2": {"failed": 1}})  # fmt: skip
    with pytest.raises(PlaybookError) as failed:
        runner.raise_for(other, "retry", head="ctl")
    assert failed.value.exit_code == 5 and "Install munge" in str(failed.value)
    # A command that names no head (usage) keeps the rule: any failure besides is a failure.
    with pytest.raises(PlaybookError):
        runner.raise_for(result, "retry")


def test_runs_keep_the_modules_payloads_in_the_users_cache_folder(tmp_path, runner_call, monkeypatch):
    """The callback meshctl.mesh.preload keeps them there between runs
    (tests/unit/collection/test_preload.py shows it on real runs); the variable set empty keeps none."""
    variable = runner.payload_cache_variable()
    monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    env = runner_call()["envvars"]
    assert env[variable] == str(tmp_path / "xdg" / "meshctl" / "ansiballz")
    assert runner.PRELOAD_CALLBACK in env["ANSIBLE_CALLBACKS_ENABLED"].split(",")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert runner_call()["envvars"][variable] == str(tmp_path / "home" / ".cache" / "meshctl" / "ansiballz")
    monkeypatch.setenv(variable, "")
    assert runner_call()["envvars"][variable] == ""


def test_what_a_role_tells_the_user_is_kept_once_each_as_plain_text():
    """A role's notes (role slurm_ready's nodes left drained as they were) come back with the
    run, each line once, escape sequences and control characters removed, anything else ignored."""
    events = runner.Events(runner.Progress(out=io.StringIO(), live=False))
    said = "gpu1 stays drained as before this run (bad fan): `scontrol update nodename=gpu1 state=resume`"
    for host, notes in (("head", [said, "\x1b[31mcpu1 stays fail\x1b[0m\n"]), ("head", [said]),
                        ("n1", "not a list"), ("n2", [{"a": 1}, ""])):  # fmt: skip
        result = {"ansible_facts": {"slurm_ready_notes": notes}}
        events.event({"event": "runner_on_ok", "event_data": {"host": host, "task": "Say", "res": result}})
    assert events.notes == [said, "cpu1 stays fail"]
    tasks = yaml.safe_load((resources.roles_dir() / "slurm_ready" / "tasks" / "main.yml").read_text())
    setters = [t["ansible.builtin.set_fact"] for t in tasks[0]["block"] if "ansible.builtin.set_fact" in t]
    assert [name for facts in setters for name in facts] == list(runner.NOTES_FACTS)  # the role's name, read here
