"""CLI argument handling with CliRunner; SSH preflight and ansible-runner mocked."""

import json
import re
import subprocess

import pytest
from click.testing import CliRunner

from meshctl import core, preflight, runner
from meshctl.cli import cli
from meshctl.mesh import Mesh
from meshctl.model import Node
from meshctl.ops import joining
from tests.hwfacts import NO_GPU

PROBE = {"sudo": "root", "os_id": "debian", "os_name": "Debian 12", "arch": "x86_64", "disk_free_mb": "9000",
         "pid1": "systemd", "tun": "yes", "python3": "/usr/bin/python3", "hostname": "Box-7.example"}  # fmt: skip


@pytest.fixture
def fake_preflight(monkeypatch):
    def run(_argv, user, host, port, _known_hosts=None, **_kw):
        return preflight.Preflight(True, preflight.evaluate(PROBE, user), dict(PROBE))

    monkeypatch.setattr(preflight, "run", run)


HW = NO_GPU


class FakeRunner(list):
    """Records each playbook run; its status, failures and unreachable hosts are set by the test.

    Every host the run is limited to (all hosts without a limit) reports hardware facts, as the
    mesh_facts module does, unless it failed or was unreachable.
    """

    def __init__(self) -> None:
        super().__init__()
        self.status = "successful"
        self.failures: list = []
        self.unreachable: list[str] = []
        self.changed: dict[str, list[str]] = {}  # host -> the tasks that changed (or would, in check mode)

    def run_playbook(self, playbook, inventory, mesh_dir=None, **kw):
        self.append({"playbook": playbook, "inventory": inventory, "mesh_dir": mesh_dir, **kw})
        limit = kw.get("limit")
        hosts = limit.split(",") if limit else list(inventory["all"]["hosts"])
        hosts = [h for h in hosts if h != "localhost"]
        failures = list(self.failures) + [
            runner.Failure(h, "Gathering Facts", "ssh: timed out") for h in self.unreachable
        ]
        stats = {h: {"ok": 1} for h in hosts}
        for f in failures:
            stats.setdefault(f.host, {})["unreachable" if f.host in self.unreachable else "failed"] = 1
        hw = {h: dict(HW) for h in hosts if h not in self.unreachable and not any(f.host == h for f in failures)}
        ok = self.status == "successful" and not failures
        return runner.RunResult("successful" if ok else "failed", 0 if ok else 2, failures, stats, dict(self.changed),
                                hw=hw)  # fmt: skip


@pytest.fixture
def fake_runner(monkeypatch):
    fake = FakeRunner()
    monkeypatch.setattr(runner, "run_playbook", fake.run_playbook)
    return fake


def invoke(mesh, *args):
    return CliRunner().invoke(cli, [*args[:1], "--mesh", str(mesh.path), *args[1:]])


def test_add_node_marks_active_after_success(mesh, fake_preflight, fake_runner):
    result = invoke(mesh, "add-node", "root@100.64.0.9")
    assert result.exit_code == 0, result.output
    assert "box-7" in result.output  # name from the hostname, sanitized
    inventory = fake_runner[0]["inventory"]
    assert inventory["all"]["hosts"]["box-7"]["meshctl_state"] == "pending"  # pending while Ansible ran
    assert set(inventory["all"]["children"]["compute"]["hosts"]) == {"head", "box-7"}
    assert inventory["all"]["vars"]["mesh_secrets_dir"] == str(mesh.secrets)  # named, not guessed
    assert fake_runner[0]["limit"] == "localhost,head,box-7"  # the new node and the head, nothing else
    nodes, _ = mesh.load()
    assert {n.name: n.state for n in nodes} == {"head": "active", "box-7": "active"}
    assert mesh.load_facts() == {"head": HW, "box-7": HW}  # recorded for the next runs
    # The head was set up before (active): the run gives it the membership's steps only.
    assert inventory["all"]["children"]["settled"] == {"hosts": {"head": {}}}
    assert "settled" not in mesh.inventory.read_text()  # a run's group, never mesh.yml's
    # A head never converged (init records it pending) gets its whole setup in the first add-node.
    nodes, mesh_vars = mesh.load()
    nodes[0].state = "pending"
    mesh.save(nodes, mesh_vars)
    assert invoke(mesh, "add-node", "root@100.64.0.10", "--name", "box-8").exit_code == 0
    assert fake_runner[1]["inventory"]["all"]["children"]["settled"] == {"hosts": {}}
    assert fake_runner[1]["limit"] == "localhost,head,box-8"


def test_failed_run_leaves_the_node_pending_and_says_how_to_retry(mesh, fake_preflight, fake_runner):
    fake_runner.status = "failed"
    fake_runner.failures = [runner.Failure("gpu", "Install the Slurm packages", "No package matching 'slurmd'")]
    result = invoke(mesh, "add-node", "root@100.64.0.9", "--name", "gpu")
    assert result.exit_code == 5
    assert "task 'Install the Slurm packages' on gpu: No package matching 'slurmd'" in result.output
    assert "meshctl add-node root@100.64.0.9:22 --name gpu" in result.output
    nodes, _ = mesh.load()
    assert {n.name: n.state for n in nodes}["gpu"] == "pending"
    fake_runner.status = "successful"
    fake_runner.failures = []
    assert invoke(mesh, "add-node", "root@100.64.0.9", "--name", "gpu").exit_code == 0  # resumes
    assert {n.name: n.state for n in mesh.load()[0]}["gpu"] == "active"


def test_dry_run_writes_nothing_and_uses_check_mode(mesh, fake_preflight, fake_runner):
    before = mesh.inventory.read_bytes()
    result = invoke(mesh, "add-node", "root@100.64.0.9", "--name", "gpu", "--dry-run")
    assert result.exit_code == 0, result.output
    assert fake_runner[0]["check"] is True and fake_runner[0]["diff"] is True
    assert fake_runner[0]["inventory"]["all"]["hosts"]["gpu"]["ansible_host"] == "100.64.0.9"
    assert fake_runner[0]["limit"] == "localhost,head,gpu"
    assert mesh.inventory.read_bytes() == before
    assert mesh.load_facts() == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["root@100.64.0.9", "--name", "head"], "already in the mesh"),
        (["root@100.64.0.1"], "already in the mesh as head"),
        (["root@100.64.0.9", "--name", "-x"], "not valid"),
        (["root@100.64.0.9:70000"], "not a TCP port"),
        (["root@100.64.0.9", "--ssh-key", "/nonexistent"], "no such file"),
    ],
)
def test_bad_arguments_change_nothing(mesh, fake_preflight, fake_runner, args, message):
    before = mesh.inventory.read_bytes()
    result = invoke(mesh, "add-node", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert fake_runner == []
    assert mesh.inventory.read_bytes() == before


@pytest.fixture
def hostnames(monkeypatch):
    """Preflight where each machine reports a hostname of its own (host -> hostname), all passing but BAD."""
    named = {"100.64.0.9": "gpu-a", "100.64.0.10": "gpu-b", "100.64.0.11": "gpu-a"}
    bad: set[str] = set()

    def run(_argv, user, host, port, _known_hosts=None, **_kw):
        probe = dict(PROBE, hostname=named[host], **({"pid1": "dumb-init"} if host in bad else {}))
        return preflight.Preflight(True, preflight.evaluate(probe, user), probe)

    monkeypatch.setattr(preflight, "run", run)
    return bad


def test_add_node_of_several_machines_sets_them_up_in_one_run(mesh, hostnames, fake_runner):
    result = invoke(mesh, "add-node", "root@100.64.0.9", "root@100.64.0.10")
    assert result.exit_code == 0, result.output
    assert "gpu-a, gpu-b are active" in result.output
    assert len(fake_runner) == 1 and fake_runner[0]["limit"] == "localhost,head,gpu-a,gpu-b"
    hosts = fake_runner[0]["inventory"]["all"]["hosts"]
    assert (hosts["gpu-a"]["meshctl_state"], hosts["gpu-b"]["meshctl_state"]) == ("pending", "pending")
    assert {n.name: n.state for n in mesh.load()[0]} == {"head": "active", "gpu-a": "active", "gpu-b": "active"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["root@100.64.0.9", "root@100.64.0.10", "--name", "gpu"], "--name names one machine, and 2 were given"),
        (["root@100.64.0.9", "root@100.64.0.10", "--mesh-address", "100.100.0.9"], "--mesh-address names one"),
        (["root@100.64.0.9", "root@100.64.0.9:22"], "100.64.0.9:22 is given twice"),
        (["root@100.64.0.9", "root@100.64.0.11"], "100.64.0.9 and 100.64.0.11 both report the hostname gpu-a"),
        (["root@100.64.0.9", "root@100.64.0.1"], "already in the mesh as head"),
    ],
)
def test_add_node_of_several_machines_refuses_them_all_on_any_problem(mesh, hostnames, fake_runner, args, message):
    before = mesh.inventory.read_bytes()
    result = invoke(mesh, "add-node", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert fake_runner == [] and mesh.inventory.read_bytes() == before


def test_add_node_of_several_machines_adds_none_when_one_fails_its_preflight(mesh, hostnames, fake_runner):
    hostnames.add("100.64.0.10")
    before = mesh.inventory.read_bytes()
    result = invoke(mesh, "add-node", "root@100.64.0.9", "root@100.64.0.10")
    assert result.exit_code == 4, result.output
    assert "systemd as PID 1" in result.output
    assert fake_runner == [] and mesh.inventory.read_bytes() == before


def test_add_node_of_several_machines_that_fails_leaves_them_pending_and_the_same_command_resumes(
    mesh, hostnames, fake_runner
):
    fake_runner.failures = [runner.Failure("gpu-b", "Install the Slurm packages", "No package matching 'slurmd'")]
    result = invoke(mesh, "add-node", "root@100.64.0.9", "root@100.64.0.10")
    assert result.exit_code == 5
    assert "meshctl add-node root@100.64.0.9:22 root@100.64.0.10:22` again" in " ".join(result.output.split())
    assert {n.name: n.state for n in mesh.load()[0]} == {"head": "active", "gpu-a": "pending", "gpu-b": "pending"}
    fake_runner.failures = []
    again = invoke(mesh, "add-node", "root@100.64.0.9", "root@100.64.0.10")
    assert again.exit_code == 0, again.output
    assert "resuming gpu-a" in again.output and "resuming gpu-b" in again.output
    assert {n.name: n.state for n in mesh.load()[0]} == {"head": "active", "gpu-a": "active", "gpu-b": "active"}


def test_preflight_failure_exits_4(mesh, monkeypatch, fake_runner):
    def run(_argv, user, host, port, _known_hosts=None, **_kw):
        return preflight.Preflight(True, preflight.evaluate(dict(PROBE, pid1="dumb-init"), user), dict(PROBE))

    monkeypatch.setattr(preflight, "run", run)
    result = invoke(mesh, "add-node", "root@100.64.0.9")
    assert result.exit_code == 4
    assert "systemd as PID 1" in result.output
    assert fake_runner == []


def test_no_mesh_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["apply"])
    assert result.exit_code == 3
    assert "meshctl init" in result.output


def test_init_refuses_an_existing_mesh(mesh):
    result = CliRunner().invoke(cli, ["init", str(mesh.path), "--head", "root@100.64.0.1"])
    assert result.exit_code == 3
    assert "already holds a mesh" in result.output


def test_init_local_head_needs_a_mesh_address(tmp_path):
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "m"), "--head", "local"])
    assert result.exit_code == 2 and "--mesh-address" in result.output
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "m"), "--head", "local", "--mesh-address", "100.64.0.1",
                                      "--name", "desk"])  # fmt: skip
    assert result.exit_code == 0, result.output
    nodes, _ = Mesh(tmp_path / "m").load()
    assert (nodes[0].name, nodes[0].connection, nodes[0].roles) == ("desk", "local", ["head", "compute"])


def test_apply_passes_options(mesh, fake_runner):
    result = invoke(mesh, "apply", "--check", "--diff", "--limit", "head", "-vv")
    assert result.exit_code == 0, result.output
    call = fake_runner[0]
    assert (call["check"], call["diff"], call["limit"], call["verbosity"]) == (True, True, "localhost,head", 2)


def add_active(mesh, *names):
    nodes, mesh_vars = mesh.load()
    for i, name in enumerate(names):
        nodes.append(Node(name, f"100.64.0.{20 + i}", state="active", mesh_address=f"100.64.0.{20 + i}"))
    mesh.save(nodes, mesh_vars)
    for node in nodes:
        mesh.record_facts(node.name, dict(HW, cpus=8))


def test_apply_limit_adds_the_head_and_refuses_unknown_names(mesh, fake_runner):
    add_active(mesh, "gpu1", "cpu1")
    assert invoke(mesh, "apply", "--limit", "gpu1").exit_code == 0
    assert fake_runner[0]["limit"] == "localhost,head,gpu1"
    # The others' recorded facts travel in the inventory; only the nodes of the run get new ones.
    assert fake_runner[0]["inventory"]["all"]["hosts"]["cpu1"]["mesh_hw"]["cpus"] == 8
    assert mesh.load_facts()["gpu1"]["cpus"] == 4 and mesh.load_facts()["cpu1"]["cpus"] == 8
    # The head gets what gpu1 changes on it (settled), unless the limit names it, or there is none.
    assert fake_runner[0]["inventory"]["all"]["children"]["settled"] == {"hosts": {"head": {}}}
    assert invoke(mesh, "apply", "--limit", "gpu1,head").exit_code == 0
    assert fake_runner[1]["inventory"]["all"]["children"]["settled"] == {"hosts": {}}
    assert invoke(mesh, "apply").exit_code == 0
    assert fake_runner[2]["inventory"]["all"]["children"]["settled"] == {"hosts": {}}
    result = invoke(mesh, "apply", "--limit", "gpu9")
    assert result.exit_code == 2 and "gpu9" in result.output


def test_apply_with_a_node_down_converges_the_rest_and_exits_partial(mesh, fake_runner):
    add_active(mesh, "gpu1", "cpu1")
    before = mesh.inventory.read_bytes()
    fake_runner.unreachable = ["cpu1"]
    result = invoke(mesh, "apply")
    assert result.exit_code == 7, result.output
    assert "Not reached" in result.output and "cpu1" in result.output and "remove-node cpu1 --force" in result.output
    assert "converged 2 node(s)" in result.output
    assert mesh.load_facts()["gpu1"]["cpus"] == 4 and mesh.load_facts()["cpu1"]["cpus"] == 8  # kept as recorded
    assert mesh.inventory.read_bytes() == before


def test_apply_with_the_head_down_is_the_unreachable_outcome(mesh, fake_runner):
    add_active(mesh, "gpu1")
    fake_runner.unreachable = ["head"]
    result = invoke(mesh, "apply")
    assert result.exit_code == 7 and "1 node(s) could not be reached: head" in result.output
    assert "fix: start them" in result.output and "meshctl apply" in result.output


def test_remove_node_runs_on_the_node_and_the_head_only(mesh, fake_runner):
    add_active(mesh, "gpu1", "cpu1")
    result = invoke(mesh, "remove-node", "gpu1", "--force", "--timeout", "30")
    assert result.exit_code == 0, result.output
    call = fake_runner[0]
    assert call["playbook"] == "remove_node.yml" and call["limit"] == "localhost,head,gpu1"
    groups = call["inventory"]["all"]["children"]
    assert set(groups["leaving"]["hosts"]) == {"gpu1"} and "gpu1" not in groups["compute"]["hosts"]
    assert call["extravars"] == {"slurm_controller_drain_force": True, "slurm_controller_drain_timeout": 30}
    assert [n.name for n in mesh.load()[0]] == ["head", "cpu1"]
    assert "gpu1" not in mesh.load_facts()


def test_remove_node_of_a_stopped_node_still_removes_it(mesh, fake_runner):
    add_active(mesh, "gpu1")
    fake_runner.unreachable = ["gpu1"]
    result = invoke(mesh, "remove-node", "gpu1")
    assert result.exit_code == 0, result.output
    assert "could not be reached" in result.output and "delete the machine" in result.output
    assert "run `meshctl rotate-munge-key`" in result.output  # it still holds the mesh's munge key
    assert [n.name for n in mesh.load()[0]] == ["head"]


def test_rotate_munge_key_stores_a_new_key_and_runs_on_every_active_node(mesh, fake_runner):
    add_active(mesh, "gpu1", "cpu1")
    nodes, mesh_vars = mesh.load()
    nodes.append(Node("new1", "100.64.0.40", mesh_address="100.64.0.40"))  # pending: not yet a member
    mesh.save(nodes, mesh_vars)
    key = mesh.secrets / "munge.key"
    mesh.secrets.mkdir(mode=0o700, exist_ok=True)
    key.write_bytes(b"old" * 100)
    accounts = mesh.secrets / "mlflow_accounts.key"  # the MLflow account holders' passwords come from it
    accounts.write_bytes(b"a" * 64)
    accounts.chmod(0o600)
    result = invoke(mesh, "rotate-munge-key")
    assert result.exit_code == 0, result.output
    new = key.read_bytes()
    assert len(new) == 1024 and new != b"old" * 100 and key.stat().st_mode & 0o777 == 0o600
    renewed = accounts.read_bytes()  # renewed with it: a node that left keeps no working MLflow account
    assert len(renewed) == 64 and renewed != b"a" * 64 and accounts.stat().st_mode & 0o777 == 0o600
    (call,) = fake_runner
    assert call["playbook"] == "rotate_munge_key.yml" and call["limit"] == "localhost,head,gpu1,cpu1"
    assert new.hex()[:32] not in result.output and "installed on cpu1, gpu1, head" in result.output


def test_rotate_munge_key_with_a_node_down_exits_partial_naming_it(mesh, fake_runner):
    add_active(mesh, "gpu1", "cpu1")
    fake_runner.unreachable = ["gpu1"]
    result = invoke(mesh, "rotate-munge-key")
    assert result.exit_code == 7, result.output
    assert "Not reached" in result.output and "apply --limit gpu1" in result.output
    fake_runner.unreachable = ["head"]
    key = mesh.secrets / "munge.key"
    before = key.read_bytes()
    refused = invoke(mesh, "rotate-munge-key")
    assert refused.exit_code == 7 and "the new munge key is pending" in refused.output  # the head: one outcome
    assert key.read_bytes() != before and (mesh.secrets / ".munge-key-rotation").is_file()
    pending = key.read_bytes()
    again = invoke(mesh, "apply", "--limit", "gpu1")  # a part of the mesh on the new key, the rest on the old
    assert again.exit_code == 3 and "rotate-munge-key` first" in again.output
    fake_runner.unreachable = []
    done = invoke(mesh, "rotate-munge-key")  # the retry finishes that key: no other is made
    assert done.exit_code == 0 and "finished the rotation begun before" in done.output, done.output
    assert key.read_bytes() == pending and not (mesh.secrets / ".munge-key-rotation").exists()


def test_remove_node_that_fails_on_the_head_keeps_it(mesh, fake_runner):
    add_active(mesh, "gpu1")
    fake_runner.failures = [runner.Failure("head", "Fail when jobs still run there", "gpu1 still runs jobs 7")]
    result = invoke(mesh, "remove-node", "gpu1")
    assert result.exit_code == 5 and "still runs jobs 7" in result.output
    assert [n.name for n in mesh.load()[0]] == ["head", "gpu1"]


def test_remove_node_refuses_the_head(mesh):
    result = invoke(mesh, "remove-node", "head")
    assert result.exit_code == 2 and "is the head" in result.output


def test_sanitize_name():
    assert joining.sanitize_name("Box_7.example.com") == "box-7"
    assert joining.sanitize_name("desk") == "desk"


def test_ctrl_c_during_the_run_leaves_a_consistent_inventory(mesh, fake_preflight, monkeypatch, capsys):
    def interrupted(*_a, **_kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_playbook", interrupted)
    monkeypatch.setattr(
        "sys.argv", ["meshctl", "add-node", "root@100.64.0.9", "--name", "gpu", "--mesh", str(mesh.path)]
    )
    from meshctl.cli import main

    with pytest.raises(SystemExit) as code:
        main()
    assert code.value.code == 130
    assert "interrupted" in capsys.readouterr().err
    nodes, _ = mesh.load()  # loads cleanly
    assert {n.name: n.state for n in nodes} == {"head": "active", "gpu": "pending"}
    with mesh.lock("apply"):  # the lock was released
        pass


def test_a_failed_pending_node_does_not_block_adding_another(mesh, fake_preflight, fake_runner):
    nodes, mesh_vars = mesh.load()
    nodes.append(Node("broken", "100.64.0.30", state="pending", mesh_address="100.64.0.30"))
    mesh.save(nodes, mesh_vars)
    assert invoke(mesh, "add-node", "root@100.64.0.9", "--name", "gpu").exit_code == 0
    groups = fake_runner[0]["inventory"]["all"]["children"]
    assert set(groups["compute"]["hosts"]) == {"head", "gpu"}  # the broken one is not converged nor waited for
    assert set(groups["pending"]["hosts"]) == {"broken", "gpu"}
    assert {n.name: n.state for n in mesh.load()[0]} == {"head": "active", "broken": "pending", "gpu": "active"}


def test_init_makes_a_mesh_directory_for_git(tmp_path, monkeypatch):
    """git add -A in a fresh mesh takes the inventory and settings, never keys or runtime files."""
    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "m"), "--head", "local", "--mesh-address", "100.64.0.1",
                                      "--name", "desk"])  # fmt: skip
    assert result.exit_code == 0, result.output
    m = Mesh(tmp_path / "m")
    # init made the mesh's secrets itself, 0600, before any run (a first `apply --check` copies them).
    assert len((m.secrets / "munge.key").read_bytes()) == 1024
    assert re.fullmatch(rb"[0-9a-f]{48}", (m.secrets / "mlflow_password").read_bytes())
    assert {p.stat().st_mode & 0o777 for p in m.secrets.iterdir()} == {0o600}
    (m.secrets / "munge.key").write_bytes(b"\x00key")
    (m.path / "mesh.lock").write_text("123 apply\n")
    (m.path / "packages" / "slurm" / "22.05-bookworm" / "trixie-x86_64").mkdir(parents=True)
    (m.path / "packages" / "slurm" / "22.05-bookworm" / "trixie-x86_64" / "slurmd_22.05.8_amd64.deb").write_bytes(b"!")
    nodes, mesh_vars = m.load()
    m.save(nodes, mesh_vars)  # leaves mesh.yml.bak
    assert (m.path / "mesh.yml.bak").exists()
    git = ["git", "-C", str(m.path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    staged = subprocess.run([*git, "diff", "--cached", "--name-only"], capture_output=True, text=True, check=True)
    assert sorted(staged.stdout.split()) == [".gitignore", "group_vars/all.yml", "mesh.yml"]


def test_init_in_a_folder_that_holds_files_says_so_before_writing(tmp_path, monkeypatch):
    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "train.py").write_text("print(1)\n")
    (project / ".gitignore").write_text("*.pyc\n")
    result = CliRunner().invoke(cli, ["init", str(project), "--head", "local", "--mesh-address", "100.64.0.1",
                                      "--name", "desk"])  # fmt: skip
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"note: {project} already holds src, train.py" in said and "`meshctl init NEW_FOLDER`" in said
    fresh = CliRunner().invoke(cli, ["init", str(tmp_path / "new"), "--head", "local", "--mesh-address",
                                     "100.64.0.1", "--name", "desk"])  # fmt: skip
    assert fresh.exit_code == 0 and "note:" not in fresh.output


def test_init_adds_its_entries_to_a_gitignore_the_user_already_has(tmp_path, monkeypatch):
    """A project folder's own .gitignore got nothing, and `git add .` took the munge key."""
    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / ".gitignore").write_text("mine\nlogs/\n__pycache__/")
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "m"), "--head", "local", "--mesh-address", "100.64.0.1",
                                      "--name", "desk"])  # fmt: skip
    assert result.exit_code == 0, result.output
    text = (tmp_path / "m" / ".gitignore").read_text()
    assert text.startswith("mine\nlogs/\n__pycache__/\n# Added by meshctl init") and text.count("logs/") == 1
    git = ["git", "-C", str(tmp_path / "m"), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    staged = subprocess.run([*git, "diff", "--cached", "--name-only"], capture_output=True, text=True, check=True)
    assert sorted(staged.stdout.split()) == [".gitignore", "group_vars/all.yml", "mesh.yml"]
    from meshctl.ops.init import GITIGNORE, gitignore_text

    assert gitignore_text(text, GITIGNORE) == text  # a second time adds nothing


def test_init_takes_the_mesh_folder_from_mesh_before_the_command(tmp_path, monkeypatch):
    """`meshctl --mesh DIR init ...` wrote into the current folder."""
    monkeypatch.setenv("MESHCTL_MESH", "")  # the group's --mesh sets it: put back as it was after
    monkeypatch.delenv("MESHCTL_MESH")
    monkeypatch.chdir(tmp_path)
    args = ["--head", "local", "--mesh-address", "100.64.0.1", "--name", "desk"]
    result = CliRunner().invoke(cli, ["--mesh", "m_x", "init", *args])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "m_x" / "mesh.yml").is_file() and not (tmp_path / "mesh.yml").exists()
    clash = CliRunner().invoke(cli, ["--mesh", "m_y", "init", "m_z", *args])
    assert clash.exit_code == 2 and "name two folders" in clash.output and not (tmp_path / "m_z").exists()


def test_init_records_the_heads_slurm_major_for_a_mixed_mesh(tmp_path, monkeypatch):
    """The head's distribution ships 22.05: group_vars/all.yml says so (slurm_mesh_major)."""
    import yaml

    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    probe = dict(PROBE, slurm_policy=" Installed: (none) Candidate: 22.05.8-4+deb12u3 ")
    monkeypatch.setattr(preflight, "run", lambda *_a, **_k: preflight.Preflight(True, preflight.evaluate(probe, "root"),
                                                                                probe))  # fmt: skip
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "m"), "--head", "root@100.64.0.1"])
    assert result.exit_code == 0, result.output
    settings = yaml.safe_load((tmp_path / "m" / "group_vars" / "all.yml").read_text())
    assert settings["slurm_mesh_major"] == "22.05"


def test_mesh_is_taken_before_the_command_as_after_it(mesh, tmp_path, monkeypatch):
    monkeypatch.setenv("MESHCTL_MESH", str(tmp_path / "elsewhere"))  # restored after the test
    before = CliRunner().invoke(cli, ["--mesh", str(mesh.path), "machines", "--json"])
    assert before.exit_code == 0, before.output
    assert json.loads(before.output)["machines"] == []
    after = CliRunner().invoke(cli, ["--mesh", str(tmp_path / "nowhere"), "machines", "--json", "--mesh",
                                     str(mesh.path)])  # fmt: skip
    assert after.exit_code == 0, after.output


def test_apply_check_says_what_would_change_under_a_recap_that_shows_changes(mesh, fake_runner):
    fake_runner.changed = {"head": ["Write slurm.conf", "Restart slurmctld"]}
    result = invoke(mesh, "apply", "--check")
    assert result.exit_code == 0, result.output
    assert "check done: nothing was changed; 2 tasks would change it (head: 2): `meshctl apply` makes them" in (
        result.output)  # fmt: skip
    assert fake_runner[-1]["check"] is True
    fake_runner.changed = {}
    assert "check done: nothing was changed; nothing would change" in invoke(mesh, "apply", "--check").output


def test_a_public_key_given_as_ssh_key_is_refused_naming_the_private_one(mesh, tmp_path, fake_runner):
    public = tmp_path / "id_ed25519.pub"
    public.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHeadKey me@laptop\n")
    result = invoke(mesh, "add-node", "root@100.64.0.9", "--ssh-key", str(public))
    assert result.exit_code == 2 and f"is a public key; --ssh-key takes the private one ({tmp_path}/id_ed25519)" in (
        " ".join(result.output.split()))  # fmt: skip
    assert fake_runner == []


def test_the_readmes_claims_about_shared_options_are_true_for_every_command():
    import importlib
    from pathlib import Path

    from meshctl.cli import COMMANDS, HIDDEN

    readme = " ".join((Path(__file__).resolve().parents[3] / "README.md").read_text().split())

    def claimed(sentence):
        listed = re.search(re.escape(sentence) + r"[^:]*: ([a-z, -]+)\.", readme).group(1)
        return set(listed.replace(" ", "").split(","))

    def options(name):
        command = importlib.import_module(f"meshctl.commands.{COMMANDS[name]}").command
        found, todo = set(), [command]
        while todo:
            current = todo.pop()
            found |= {o for p in current.params for o in getattr(p, "opts", [])}
            todo += list(getattr(current, "commands", {}).values())
        return found

    def passes_verbosity(name):
        command = importlib.import_module(f"meshctl.commands.{COMMANDS[name]}").command
        return any(p.name == "verbosity" and p.expose_value for p in command.params)

    public = set(COMMANDS) - HIDDEN
    assert {n for n in public if "-v" not in options(n)} == set()  # -v is never refused
    assert {n for n in public if passes_verbosity(n)} == claimed("The commands that run Ansible pass `-v` on")
    assert {n for n in public if "--wait" in options(n)} == claimed("The commands that change the mesh take `--wait")
    assert {n for n in public if "--mesh" not in options(n)} == {"render-node"}


def test_v_and_mesh_are_taken_before_the_command_as_after_it(mesh, fake_runner):
    before = CliRunner().invoke(cli, ["-vv", "--mesh", str(mesh.path), "apply"])
    assert before.exit_code == 0, before.output
    after = CliRunner().invoke(cli, ["apply", "-v", "--mesh", str(mesh.path)])
    assert after.exit_code == 0, after.output
    assert [call["verbosity"] for call in fake_runner] == [2, 1]
    for args in (["provider", "--mesh", str(mesh.path), "list"], ["provider", "list", "-v", "--mesh", str(mesh.path)],
                 ["-v", "check", "--mesh", str(mesh.path)], ["offers", "-v", "--mesh", str(mesh.path)]):  # fmt: skip
        done = CliRunner().invoke(cli, args)
        assert done.exit_code == 0, (args, done.output)


def test_autostop_sets_and_cancels_a_nodes_idle_stop_on_the_head_only(mesh, fake_runner):
    import yaml

    nodes, mesh_vars = mesh.load()
    nodes.append(Node("gpu1", "203.0.113.5", state="active", provider="paperspace", instance="paperspace:ps0001",
                      mesh_address="100.64.0.2"))  # fmt: skip
    nodes.append(Node("desk", "10.0.0.9", state="active", provider="local", mesh_address="100.64.0.3"))
    mesh.save(nodes, mesh_vars)
    done = invoke(mesh, "autostop", "gpu1", "1h30m")
    assert done.exit_code == 0, done.output
    assert "gpu1: stopped after 1h30m idle (5400 s)" in done.output
    assert yaml.safe_load(mesh.inventory.read_text())["all"]["hosts"]["gpu1"]["idle_stop"] == "1h30m"
    assert [run["limit"] for run in fake_runner] == ["localhost,head"]  # the head only
    shown = invoke(mesh, "status", "--json")
    listed = json.loads(shown.output[: shown.output.rindex("}") + 1])["nodes"]
    assert {n["name"]: (n["role"], n["autostop"]) for n in listed} == {
        "head": ("head", "-"), "gpu1": ("compute", "1h30m"), "desk": ("compute", "-")}  # fmt: skip
    off = invoke(mesh, "autostop", "gpu1", "off")
    assert (
        off.exit_code == 0 and yaml.safe_load(mesh.inventory.read_text())["all"]["hosts"]["gpu1"]["idle_stop"] is False
    )
    before = mesh.inventory.read_text()
    refused = invoke(mesh, "autostop", "desk", "30m")
    assert refused.exit_code == 2 and "desk cannot be stopped when idle" in refused.output
    head = invoke(mesh, "autostop", "head", "30m")  # the head: the fix is another node, not where it runs
    assert head.exit_code == 2 and "the head is never stopped" in head.output
    assert "give a rented compute node its autostop instead" in head.output and "machines" not in head.output
    assert invoke(mesh, "autostop", "gpu1", "30 minutess").exit_code == 2
    assert mesh.inventory.read_text() == before and len(fake_runner) == 2 + 1  # status read once, nothing else


def test_a_duration_refused_names_the_words_its_command_takes(mesh, fake_runner):
    """The command line says never as ``off`` (autostop) or not at all (a pool's --idle); mesh.yml
    says ``false``: each refusal offers what its own place takes."""
    before = mesh.inventory.read_text()
    for value, said in (("5x", "'5x' is not a duration (30m, 1h30m, 90s, 30 minutes) or off"),
                        ("400d", "'400d' is over a year (365d): use off to never stop it")):  # fmt: skip
        refused = invoke(mesh, "autostop", "gpu1", value)
        assert refused.exit_code == 2 and said in refused.output and "false" not in refused.output, refused.output
    pool = ("burst", "add", "a10", "--gpu", "H100:1", "--max-nodes", "1", "--max-price", "5", "--idle", "5x")
    idle = invoke(mesh, *pool)
    assert idle.exit_code == 2 and "--idle '5x' is not a duration (30m, 1h30m, 90s, 30 minutes)\n" in idle.output
    assert "false" not in idle.output and " off" not in idle.output, idle.output
    assert mesh.inventory.read_text() == before and not fake_runner
    power = core.power_save
    with pytest.raises(power.PowerSaveError, match=r"idle_stop '400d' is over a year \(365d\): use false to never"):
        power.duration_seconds("400d")


def test_autostop_runs_nothing_it_was_not_asked_to(mesh, fake_runner):
    """`autostop NODE off` on the head, on a pending node or on a node with no autostop ran
    a full converge (on a local head: an install on the user's desktop)."""
    import yaml

    nodes, mesh_vars = mesh.load()
    nodes.append(Node("desk", "10.0.0.9", state="active", provider="local", mesh_address="100.64.0.3"))
    nodes.append(Node("gpu9", "203.0.113.9", state="pending", provider="paperspace", instance="paperspace:ps0009"))
    mesh.save(nodes, mesh_vars)
    before = mesh.inventory.read_text()
    for name in ("head", "gpu9"):
        for value in ("off", "30m"):
            refused = invoke(mesh, "autostop", name, value)
            assert refused.exit_code == 2, refused.output
    assert "not set up yet (pending)" in invoke(mesh, "autostop", "gpu9", "off").output
    assert mesh.inventory.read_text() == before and fake_runner == []
    off = invoke(mesh, "autostop", "desk", "off")  # it had none: the head's power plan is the same
    assert off.exit_code == 0 and "nothing run" in off.output and fake_runner == []
    assert yaml.safe_load(mesh.inventory.read_text())["all"]["hosts"]["desk"]["idle_stop"] is False


def test_a_mistyped_command_is_named_with_the_closest_one():
    """`meshctl statsu` suggested nothing."""
    typo = CliRunner().invoke(cli, ["statsu"])
    assert typo.exit_code == 2 and "Did you mean `meshctl status`?" in typo.output
    other = CliRunner().invoke(cli, ["frobnicate"])
    assert other.exit_code == 2 and "`meshctl --help` lists the commands" in other.output
    assert "relaunch-node" not in CliRunner().invoke(cli, ["relaunch-nod"]).output  # hidden: never suggested
    assert "offer-again" not in CliRunner().invoke(cli, ["offer-agai"]).output


def test_status_takes_a_timeout_of_part_seconds(mesh, monkeypatch):
    """`status --timeout 2.5` was refused (integers only); SSH counts whole seconds."""
    from meshctl.ops import status as status_op

    seen = []
    monkeypatch.setattr(status_op, "status", lambda *a, **kw: (seen.append(kw["timeout"]), ([], None, True))[1])
    done = invoke(mesh, "status", "--timeout", "2.5")
    assert seen == [2.5], done.output  # the TCP connection's wait; SSH's is in whole seconds (3)
    assert invoke(mesh, "status", "--timeout", "0").exit_code == 2


def test_answering_no_is_a_choice_not_an_error(monkeypatch):
    """Answering "n" printed `error:` and exited 2."""
    import sys

    import click

    from meshctl.options import confirm

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(click, "confirm", lambda *a, **kw: False)
    with pytest.raises(click.exceptions.Exit) as caught:
        confirm("rent a gpu_1x_a10 at Lambda as n1?", False)
    assert caught.value.exit_code == 0
    monkeypatch.setattr(click, "confirm", lambda *a, **kw: True)
    assert confirm("rent?", False) is None


def test_burst_remove_with_the_head_down_keeps_the_pool_and_its_retry_finishes(mesh, fake_runner):
    """The fix a failed `burst remove` names (the same command again) works: the pool stays in
    mesh.yml until the head's Slurm has let go of it."""
    import yaml

    add_active(mesh, "gpu1")
    data = yaml.safe_load(mesh.inventory.read_text())
    data["all"].setdefault("vars", {})["burst_pools"] = [
        {"name": "h100", "gpu": "H100", "gpus": 1, "max_nodes": 1, "max_price": 3.0, "providers": ["any"],
         "idle": "10m", "cpus": 1, "memory_mb": 1024}]  # fmt: skip
    mesh.inventory.write_text(yaml.safe_dump(data))
    fake_runner.unreachable = ["head"]
    refused = invoke(mesh, "burst", "remove", "h100")
    assert refused.exit_code == 7 and "it stays in mesh.yml" in refused.output, refused.output
    assert "remove h100` again" in refused.output  # the fix: the same command again
    assert [p["name"] for p in mesh.load()[1]["burst_pools"]] == ["h100"]
    fake_runner.unreachable = []
    done = invoke(mesh, "burst", "remove", "h100")
    assert done.exit_code == 0 and "pool h100: removed" in done.output, done.output
    assert "burst_pools" not in mesh.load()[1]


def test_debug_shows_the_traceback_and_keeps_the_outcomes_exit_code(mesh, capsys, monkeypatch):
    from meshctl.cli import main

    mesh.inventory.write_text("all: [\n")
    monkeypatch.setattr("sys.argv", ["meshctl", "--debug", "status", "--mesh", str(mesh.path)])
    with pytest.raises(SystemExit) as code:
        main()
    err = capsys.readouterr().err
    assert code.value.code == 3 and "Traceback" in err and "error: " in err


def test_the_words_a_new_user_met(mesh):
    """A quoted port, a provider list, (1 node): said as a person would."""
    import yaml

    data = yaml.safe_load(mesh.inventory.read_text())
    data["all"]["hosts"]["head"]["ansible_port"] = "22"
    mesh.inventory.write_text(yaml.safe_dump(data))
    quoted = invoke(mesh, "check")
    assert quoted.exit_code == 3 and "write the number without quotes: ansible_port: 22" in quoted.output
    data["all"]["hosts"]["head"]["ansible_port"] = 22
    data["all"]["hosts"]["head"]["mesh_provider"] = "aws"
    mesh.inventory.write_text(yaml.safe_dump(data))
    provider = invoke(mesh, "check")
    assert provider.exit_code == 3 and "use one of " in provider.output and "('" not in provider.output
    data["all"]["hosts"]["head"].pop("mesh_provider")
    mesh.inventory.write_text(yaml.safe_dump(data))
    assert "sound (1 node)" in invoke(mesh, "check").output
