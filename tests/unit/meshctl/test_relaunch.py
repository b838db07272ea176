"""A Lambda node terminated while idle and launched again by the head (meshctl/ops/machine.py, filter
head_copy, cloud.moved): against the Lambda stand-in over real HTTP, with plain files."""

import gzip
import io
import json
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from meshctl import cloud, headcopy, hostkeys, resources
from meshctl.errors import MeshctlError, ProviderError, UsageError
from meshctl.model import Node
from meshctl.ops import apply, machine, relaunch
from meshctl.ops.work import Work
from tests.cloud_standin import KEY, Standin


@pytest.fixture
def lam(monkeypatch):
    with Standin("lambda") as api:
        monkeypatch.setenv("MESHCTL_LAMBDA_API_URL", api.url)
        yield api


class Notes:
    def __init__(self):
        self.lines = []

    def note(self, line):
        self.lines.append(line)


def lambda_node(mesh, lam, name, tailnet=True):
    cloud.add_account(mesh, {}, "lambda", KEY)
    machine = lam.add(name, "gpu_1x_a10", 1, 1.29)
    nodes, mesh_vars = mesh.load()
    address = "100.64.0.3" if tailnet else machine.ip
    nodes.append(Node(name, machine.ip, user="ubuntu", provider="lambda", state="active",
                      instance=f"lambda:{machine.id}", mesh_address=address))  # fmt: skip
    mesh.save(nodes, mesh_vars)
    return machine


HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ3l2mFqUeP0Zq5m8s1k7bV0lq0cQ6b2hS9yU4nT1xWe"


def records(**launched):
    """The head's relaunch records, as read_record gives them: node name -> instance launched."""
    return lambda name: {"instance": launched[name], "host_keys": [HOST_KEY]} if name in launched else None


def test_a_node_the_head_launched_again_is_followed_to_its_new_instance(mesh, lam):
    old = lambda_node(mesh, lam, "gpu2")
    nodes, mesh_vars = mesh.load()
    notes = Notes()
    assert apply.follow_moves(Work(mesh, nodes, mesh_vars), notes, head_record=records()) == []
    lam.backend.terminate(old)  # Slurm terminated it while idle
    assert apply.follow_moves(Work(mesh, nodes, mesh_vars), notes, head_record=records()) == []  # none yet
    stranger = lam.add("someone-else", "gpu_1x_a10", 1, 1.29)  # another name: never taken for the node
    assert apply.follow_moves(Work(mesh, mesh.load()[0], mesh_vars), notes, head_record=records()) == []
    new = lam.add("gpu2", "gpu_1x_a10", 1, 1.29)  # the head's new instance bears the node's name
    assert new.ip != old.ip and stranger.id != new.id
    rows = {r.id: r.node for r in cloud.machines(mesh, mesh.load()[0], mesh_vars)[0]}
    assert rows == {new.id: "gpu2", stranger.id: None}  # `meshctl machines`: gpu2's, not forgotten
    launched = records(gpu2=f"lambda:{new.id}")
    assert apply.follow_moves(Work(mesh, mesh.load()[0], mesh_vars), notes, check=True, head_record=launched) == []
    assert apply.follow_moves(Work(mesh, mesh.load()[0], mesh_vars), notes, head_record=launched) == ["gpu2"]
    node = {n.name: n for n in mesh.load()[0]}["gpu2"]
    assert (node.host, node.instance, node.user) == (new.ip, f"lambda:{new.id}", "ubuntu")
    assert f"gpu2: launched again by the head as lambda:{new.id} at {new.ip}:22" in notes.lines[-1]
    # The only key trusted there is the one the head met: no first-contact trust.
    assert hostkeys.keys_of(mesh.known_hosts, new.ip, 22) == [HOST_KEY]
    assert apply.follow_moves(Work(mesh, mesh.load()[0], mesh_vars), notes, head_record=launched) == []  # once
    assert node.mesh_address == "100.64.0.3"  # its tailnet address: the run's tailscale role says the new one


@pytest.mark.parametrize("launched", [{}, {"gpu2": "lambda:someone-elses"}])
def test_an_instance_bearing_a_nodes_name_that_the_head_did_not_launch_is_not_taken_for_it(mesh, lam, launched):
    """Anyone who can launch in the account (the head's slurm user holds lambda.key) can name an
    instance after a node whose instance is gone: without the head's record of launching that very
    instance, the node stays where it was, its host keys kept, and the note says what to do."""
    old = lambda_node(mesh, lam, "gpu2")
    mesh.known_hosts.write_text(f"{old.ip} {HOST_KEY}\n")
    lam.backend.terminate(old)
    planted = lam.add("gpu2", "gpu_1x_a10", 1, 1.29)
    nodes, mesh_vars = mesh.load()
    notes = Notes()
    assert apply.follow_moves(Work(mesh, nodes, mesh_vars), notes, head_record=records(**launched)) == []
    node = {n.name: n for n in mesh.load()[0]}["gpu2"]
    assert (node.host, node.instance) == (old.ip, f"lambda:{old.id}")
    assert hostkeys.keys_of(mesh.known_hosts, old.ip, 22) == [HOST_KEY]
    assert hostkeys.keys_of(mesh.known_hosts, planted.ip, 22) == []
    assert f"lambda:{planted.id}" in notes.lines[-1] and "head recorded no launch of it" in notes.lines[-1]
    assert "meshctl remove-node gpu2" in notes.lines[-1]


def test_the_heads_record_is_written_with_the_keys_it_met_and_read_as_data(mesh):
    mesh.known_hosts.write_text(f"[192.0.2.7]:2222 {HOST_KEY}\n")
    headcopy.write_record(mesh, "gpu2", "lambda:i-9", "192.0.2.7", 2222)
    path = mesh.path / headcopy.RECORDS / "gpu2.json"
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    text = path.read_text()
    assert headcopy.parse_record(text, "gpu2") == {"instance": "lambda:i-9", "host_keys": [HOST_KEY]}
    assert headcopy.parse_record(text, "gpu3") is None  # another node's
    for bad in (
        "not json",
        "[]",
        json.dumps({"node": "gpu2", "instance": "lambda:i-9", "host_keys": []}),
        json.dumps({"node": "gpu2", "instance": "lambda:i-9", "host_keys": [HOST_KEY + "\n@cert-authority * x"]}),
    ):
        assert headcopy.parse_record(bad, "gpu2") is None


def test_without_a_tailnet_the_mesh_address_follows_the_ssh_address(mesh, lam):
    old = lambda_node(mesh, lam, "gpu2", tailnet=False)
    lam.backend.terminate(old)
    new = lam.add("gpu2", "gpu_1x_a10", 1, 1.29)
    nodes, mesh_vars = mesh.load()
    notes = Notes()
    assert apply.follow_moves(Work(mesh, nodes, mesh_vars), notes, head_record=records(gpu2=f"lambda:{new.id}")) == [
        "gpu2"
    ]
    node = {n.name: n for n in mesh.load()[0]}["gpu2"]
    assert node.host == node.mesh_address == new.ip != old.ip
    assert f"gpu2: mesh address {old.ip} -> {new.ip}" in notes.lines[-1]


def test_two_instances_bearing_the_name_are_not_guessed_between(mesh, lam):
    old = lambda_node(mesh, lam, "gpu2")
    lam.backend.terminate(old)
    lam.add("gpu2", "gpu_1x_a10", 1, 1.29)
    lam.add("gpu2", "gpu_1x_a10", 1, 1.29)
    nodes, mesh_vars = mesh.load()
    assert apply.follow_moves(Work(mesh, nodes, mesh_vars), Notes(), head_record=records(gpu2="lambda:any")) == []


def test_the_code_archive_is_the_same_bytes_while_the_code_is_and_runs_from_where_it_is_unpacked(tmp_path):
    first, second = headcopy.archive_bytes(), headcopy.archive_bytes()
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(first))) as tar:
        names = tar.getnames()
        assert all(m.mtime == 0 and m.uid == 0 for m in tar.getmembers())
        tar.extractall(tmp_path, filter="data")
    assert "meshctl/ops/machine.py" in names and "roles/relaunch/tasks/install.yml" in names
    assert "plugins/module_utils/mesh_power_save.py" in names and "playbooks/site.yml" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or "/_data/" in n]
    # Unpacked, it is a checkout: meshctl runs from it and finds its playbooks and roles there.
    found = subprocess.run(["python3", "-c", "from meshctl import resources; print(resources.data_dir())"],
                           cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert found.stdout.strip() == str(tmp_path), found.stderr


def test_control_vars_only_with_a_lambda_node_and_never_on_the_heads_copy(mesh, lam, tmp_path):
    nodes, mesh_vars = mesh.load()
    assert headcopy.control_vars(nodes, mesh_vars) == {}
    lambda_node(mesh, lam, "gpu2")
    nodes, mesh_vars = mesh.load()
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    nodes[-1].ssh_key = str(key)
    wanted = headcopy.control_vars(nodes, mesh_vars)
    assert wanted["relaunch_keys"] == {"gpu2": key.with_suffix(".pub").read_text().strip()}
    assert KEY not in json.dumps(wanted) and "PRIVATE" not in json.dumps(wanted)
    assert any(r.startswith("ansible") for r in wanted["relaunch_requirements"])
    assert not any(r.startswith(("mitogen", "pytest", "molecule")) for r in wanted["relaunch_requirements"])
    # Mitogen apart, as meshctl's own metadata pins it: the role adds it where relaunch_mitogen is on.
    pinned = [r for r in metadata.requires("meshctl") if r.startswith("mitogen")]
    assert wanted["relaunch_mitogen_requirements"] == pinned and len(pinned) == 1
    assert headcopy.control_vars(nodes, {"meshctl_head_copy": True}) == {}


def test_the_heads_copy_of_mesh_yml(mesh, lam):
    lambda_node(mesh, lam, "gpu2")
    nodes, mesh_vars = mesh.load()
    nodes.append(Node("desk", "192.0.2.7", provider="local", state="active", ssh_key="/home/me/.ssh/id"))
    nodes[-2].ssh_key = "/home/me/.ssh/id"
    mesh.save(nodes, {"meshctl_vault_id": "mesh@prompt"})
    data = yaml.safe_load(mesh.inventory.read_text())
    power = resources.plugin("module_utils.mesh_power_save")
    copy = power.head_copy(data, "head", "/var/lib/meshctl/control/head_ed25519", ["gpu2"])
    hosts = copy["all"]["hosts"]
    assert hosts["head"]["ansible_connection"] == "local"
    assert hosts["gpu2"]["ansible_ssh_private_key_file"] == "/var/lib/meshctl/control/head_ed25519"
    assert "ansible_ssh_private_key_file" not in hosts["desk"]
    assert "meshctl_vault_id" not in copy["all"]["vars"] and copy["all"]["vars"]["meshctl_head_copy"] is True
    assert data["all"]["hosts"]["desk"]["ansible_ssh_private_key_file"] == "/home/me/.ssh/id"  # not changed
    # meshctl reads the copy: the head local, the Lambda node with the head's key.
    mesh.inventory.write_text(yaml.safe_dump(copy))
    nodes, mesh_vars = mesh.load()
    by_name = {n.name: n for n in nodes}
    assert by_name["head"].connection == "local" and by_name["gpu2"].ssh_key.endswith("head_ed25519")
    assert mesh_vars.get("meshctl_head_copy") is True
    with pytest.raises(resources.plugin("module_utils.mesh_power_save").PowerSaveError):
        resources.plugin("module_utils.mesh_power_save").head_copy({"all": {}}, "head", "k", [])


def test_remove_node_leaves_no_trace_of_the_node_in_the_heads_copy(mesh, lam):
    """remove-node's run comes before mesh.yml is saved without the node: the head's copy
    leaves the leaving node out, and its settings, facts, key and relaunch record there go."""
    power = resources.plugin("module_utils.mesh_power_save")
    lambda_node(mesh, lam, "gpu2")
    lambda_node(mesh, lam, "gpu3")
    data = yaml.safe_load(mesh.inventory.read_text())
    copy = power.head_copy(data, "head", "/k", ["gpu2", "gpu3"], leaving=["gpu3"])
    assert "gpu3" not in copy["all"]["hosts"] and {"head", "gpu2"} <= set(copy["all"]["hosts"])
    control = "/var/lib/meshctl/control"
    found = [f"{control}/{part}" for part in (
        "host_vars/gpu2.yml", "host_vars/gpu3.yml", "host_vars/old.yml", "facts/gpu2.json", "facts/gpu3.json",
        "authorized/gpu2.pub", "authorized/gpu3.pub", "relaunched/gpu2.json", "relaunched/gpu3.json")]  # fmt: skip
    local = [f"{mesh.path}/host_vars/gpu2.yml", f"{mesh.path}/host_vars/gpu3.yml", f"{mesh.path}/facts/gpu2.json",
             f"{mesh.path}/facts/gpu3.json"]  # fmt: skip
    gone = power.head_copy_leftovers(found, control, local, ["gpu2", "gpu3"], ["gpu2", "gpu3"], leaving=["gpu3"])
    assert gone == sorted(f"{control}/{part}" for part in (
        "host_vars/gpu3.yml", "host_vars/old.yml", "facts/gpu3.json", "authorized/gpu3.pub",
        "relaunched/gpu3.json"))  # fmt: skip
    # An apply with nothing leaving removes nothing the mesh still has.
    assert power.head_copy_leftovers(found[:2] + found[3:], control, local, ["gpu2", "gpu3"], ["gpu2", "gpu3"]) == []


def test_the_heads_key_is_registered_once_by_its_own_name(lam):
    api = cloud.client("lambda", KEY)
    public = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHeadKey meshctl head"
    name = machine.register_key(api, public)
    assert name.startswith("meshctl-head-") and lam.ssh_keys[name] == public
    posts = [r for r in lam.requests if r == ("POST", "/api/v1/ssh-keys")]
    assert machine.register_key(api, public) == name  # registered already: not again
    assert [r for r in lam.requests if r == ("POST", "/api/v1/ssh-keys")] == posts
    lam.ssh_keys[name] = "ssh-ed25519 AAAAOther someone"
    with pytest.raises(ProviderError, match="another key"):
        machine.register_key(api, public)


def never_converged(*_args):
    raise AssertionError("no instance was reached: nothing is to be converged")


def test_a_relaunch_without_capacity_fails_with_the_reason_and_records_nothing(mesh, lam, tmp_path):
    old = lambda_node(mesh, lam, "gpu2")
    lam.backend.terminate(old)
    spec = tmp_path / "gpu2.json"
    spec.write_text(json.dumps({"instance": f"lambda:{old.id}", "instance_type": "gpu_1x_a10",
                                "region": "us-east-1", "name": "gpu2"}))  # fmt: skip
    key = tmp_path / "head_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    before = mesh.inventory.read_text()
    lam.backend.capacity = 0
    with pytest.raises(MeshctlError) as caught:
        machine.relaunch(mesh, "gpu2", spec, key, None, never_converged, say=lambda _m: None)
    assert caught.value.exit_code == 8 and "capacity" in str(caught.value).lower()
    assert mesh.inventory.read_text() == before and spec.is_file()  # asked again by the next job
    with pytest.raises(UsageError, match="is no node the head launches again"):
        machine.relaunch(mesh, "head", spec, key, None, never_converged, say=lambda _m: None)
    for bad in ({}, {"instance_type": "gpu_1x_a10; reboot", "region": "us-east-1"}, {"instance_type": 1}):
        spec.write_text(json.dumps(bad))
        with pytest.raises(UsageError, match="no instance type"):
            machine.relaunch(mesh, "gpu2", spec, key, None, never_converged, say=lambda _m: None)


def test_a_new_instance_that_cannot_be_set_up_is_terminated(mesh, lam, tmp_path, monkeypatch):
    old = lambda_node(mesh, lam, "gpu2")
    lam.backend.terminate(old)
    spec = tmp_path / "gpu2.json"
    spec.write_text(json.dumps({"instance_type": "gpu_1x_a10", "region": "us-east-1", "name": "gpu2"}))
    key = tmp_path / "head_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)

    def no_ssh(host, port, timeout):
        raise cloud.ProviderError(f"{host}:{port} did not answer on SSH within {timeout:.0f} s")

    monkeypatch.setattr(cloud, "wait_for_ssh", no_ssh)
    with pytest.raises(MeshctlError) as caught:
        machine.relaunch(mesh, "gpu2", spec, key, None, never_converged, say=lambda _m: None)
    launched = [m for m in lam.backend.machines.values() if m.id != old.id]
    assert len(launched) == 1 and launched[0].state == "terminated" and launched[0].name == "gpu2"
    assert f"lambda:{launched[0].id} was terminated" in caught.value.hint
    assert lam.ssh_keys[machine.key_name(key.with_suffix(".pub").read_text())]  # the head's key, registered
    assert launched[0].public_keys == [key.with_suffix(".pub").read_text().strip()]


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device", "huge"])
def test_the_launch_spec_is_read_from_plain_files_only(tmp_path, kind):
    """The spec folder is SlurmUser's: root never follows a link there, waits on a FIFO or reads a device."""
    import os

    spec = tmp_path / "gpu2.json"
    if kind == "symlink":
        (tmp_path / "real.json").write_text('{"instance_type": "gpu_1x_a10", "region": "us-east-1"}')
        spec.symlink_to(tmp_path / "real.json")
    elif kind == "fifo":
        os.mkfifo(spec)  # reading it would block until a writer comes
    elif kind == "device":
        spec = type(tmp_path)("/dev/zero")
    else:
        spec.write_text('{"instance_type": "gpu_1x_a10", "region": "us-east-1", "x": "' + "a" * 70000 + '"}')
    with pytest.raises(UsageError, match="cannot read the launch spec"):
        relaunch.read_spec(spec)


def test_the_head_sets_up_a_relaunched_node_with_apply_limited_to_it(monkeypatch):
    calls = []
    monkeypatch.setattr(machine.apply, "apply", lambda *a, **kw: calls.append((a[0], kw["limit"])))
    machine.converge("the work", "gpu2")
    assert calls == [("the work", "gpu2")]


def test_the_relaunch_service_clears_anything_in_its_spool_and_never_crashes(mesh, tmp_path, monkeypatch):
    """A folder, a link and a name that is no node in the spool (the slurm user can write there):
    before, a folder raised IsADirectoryError, stayed, and its path unit started the service again
    forever. Each is said and removed; a real request still fails cleanly (no launch spec here)."""
    from click.testing import CliRunner

    from meshctl.cli import cli

    calls = tmp_path / "scontrol.calls"
    fake = tmp_path / "bin" / "scontrol"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    spool, state = tmp_path / "spool", tmp_path / "state"
    (spool / "gpu9" / "inner").mkdir(parents=True)
    (spool / "gpu9" / "inner" / "f").write_text("x")
    (spool / "gpu8").symlink_to("/etc")
    (spool / "Not_A_Node").write_text("\n")
    (spool / "gpu2").write_text("\n")
    state.mkdir()
    key = tmp_path / "head_key"
    key.write_text("k")
    done = CliRunner().invoke(cli, ["relaunch-node", "--mesh", str(mesh.path), "--spool", str(spool), "--state",
                                    str(state), "--key", str(key)])  # fmt: skip
    assert done.exit_code == 1 and isinstance(done.exception, SystemExit), done.output
    assert list(spool.iterdir()) == [] and (tmp_path / "state").is_dir() and Path("/etc/passwd").exists()
    for name in ("gpu9", "gpu8", "Not_A_Node", "gpu2"):
        assert f"{name}: FAILED" in done.output
    said = calls.read_text()
    assert "nodename=gpu2 state=down" in said and "Not_A_Node" not in said


def relaunch_unit(**settings) -> list[str]:
    """The relaunch service's unit as role relaunch renders it, with SETTINGS over the defaults."""
    import jinja2

    templates = Path(__file__).resolve().parents[3] / "roles" / "relaunch" / "templates"
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates)), undefined=jinja2.StrictUndefined)
    env.filters["upper"] = str.upper
    env.filters["bool"] = bool
    defaults = yaml.safe_load((templates.parent / "defaults" / "main.yml").read_text())
    return env.get_template("meshctl-relaunch.service.j2").render({
        **defaults, "ansible_managed": "x", "mesh_power_providers": ["lambda"], "mesh_provider_api_urls": {},
        "relaunch_spool": "/var/lib/meshctl/power/relaunch", "mesh_power_state_dir": "/var/lib/meshctl/power",
        "relaunch_head_key": "/root/.ssh/k", "mesh_burst_cooldown": 300, "mesh_burst_nodes": [], **settings,
    }).splitlines()  # fmt: skip


def test_the_relaunch_service_imports_only_from_its_code():
    """`python -m` puts its working directory first on sys.path: the unit's is /, and PYTHONSAFEPATH
    leaves even that out (before: the mesh copy's folder)."""
    lines = relaunch_unit()
    assert "WorkingDirectory=/" in lines and "Environment=PYTHONSAFEPATH=1" in lines
    assert "Environment=PYTHONPATH=/opt/meshctl/control/src" in lines


def test_the_heads_runs_go_under_mitogen_only_where_the_mesh_says_so():
    """relaunch_mitogen: meshctl on the head gets MESHCTL_MITOGEN=1 (runner.mitogen_strategies
    reads it); by default its runs are plain Ansible, as the control machine's are."""
    assert not [line for line in relaunch_unit() if "MESHCTL_MITOGEN" in line]
    assert "Environment=MESHCTL_MITOGEN=1" in relaunch_unit(relaunch_mitogen=True)


@pytest.mark.parametrize("playbook", ["rotate_munge_key.yml", "rotate_authkey.yml"])
def test_each_rotation_refreshes_the_heads_copy_of_the_secrets_in_the_same_run(playbook):
    """The next relaunch (apply --limit NODE on the head) read the head's copy: after a
    rotation it would have put the old munge key back. Shown on real daemons in test_power_save.py."""
    plays = yaml.safe_load((Path(__file__).resolve().parents[3] / "playbooks" / playbook).read_text())
    last = plays[-1]
    task = last["tasks"][0]["ansible.builtin.include_role"]
    assert last["hosts"] == "head" and task["name"] == "meshctl.mesh.relaunch" and task["tasks_from"] == "refresh"


def test_the_secrets_copied_are_chosen_by_their_own_names_whatever_the_mesh_path(tmp_path):
    """A mesh under a dot-folder (~/.meshctl/prod) sent no secret to the head's copy: the filter
    looked for '/.' anywhere in the path. The role's task, run here by ansible-playbook."""
    import os

    if os.geteuid() != 0:
        pytest.skip("the task makes root's files")
    secrets = tmp_path / ".meshctl" / "prod" / "secrets"
    secrets.mkdir(parents=True)
    (secrets / "munge.key").write_text("k" * 64)
    (secrets / ".munge.key.tmp").write_text("partial")
    (tmp_path / "copy" / "secrets").mkdir(parents=True)
    (tmp_path / "play.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.include_role:\n"
        "        name: meshctl.mesh.relaunch\n        rolespec_validate: false\n        tasks_from: refresh\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(resources.collections_path(tmp_path / "collections")),
               ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=sys.executable)  # fmt: skip
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", "play.yml",
            "-e", json.dumps({"mesh_secrets_dir": str(secrets), "relaunch_dir": str(tmp_path / "copy")})]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-2000:]
    assert sorted(p.name for p in (tmp_path / "copy" / "secrets").iterdir()) == ["munge.key"]
    assert (tmp_path / "copy" / "secrets" / "munge.key").stat().st_mode & 0o777 == 0o600


def test_a_spool_of_5000_requests_is_bounded_and_said_in_one_line(mesh, tmp_path, monkeypatch):
    """The slurm user can write the spool: 5,000 entries kept the root service busy for minutes, one
    scontrol each. At most MAX_REQUESTS are served a round; the rest are removed unserved, said once."""
    from meshctl.ops import relaunch_node

    calls = []
    monkeypatch.setattr(relaunch_node.relaunch, "mark_down", lambda name, reason, *a: calls.append(name))
    spool, state = tmp_path / "spool", tmp_path / "state"
    spool.mkdir()
    state.mkdir()
    for i in range(5000):
        (spool / f"n{i:05d}").write_text("\n")
    said: list[str] = []
    failed = relaunch_node.serve(str(mesh.path), spool, state, tmp_path / "key", None, 60, said.append, said.append)
    assert list(spool.iterdir()) == [] and len(failed) == 5000
    assert len(calls) == relaunch_node.MAX_REQUESTS  # one scontrol each for those served, none for the rest
    assert len(said) == relaunch_node.MAX_REQUESTS + 1
    assert said[-1].startswith(f"{5000 - relaunch_node.MAX_REQUESTS} more request(s) refused and removed unserved")
