"""Inventory records, validation, atomic writes and the mesh lock."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from meshctl.errors import InventoryError, UsageError
from meshctl.mesh import Mesh, atomic_write, to_inventory
from meshctl.model import Node, check_host, parse_target


def test_parse_target_forms():
    assert parse_target("10.0.0.5") == parse_target("root@10.0.0.5:22")
    t = parse_target("ubuntu@gpu-box.example.com:2222")
    assert (t.user, t.host, t.port) == ("ubuntu", "gpu-box.example.com", 2222)
    t = parse_target("root@[fd7a:115c:a1e0::1]:22")
    assert (t.host, t.port) == ("fd7a:115c:a1e0::1", 22)


@pytest.mark.parametrize("bad", ["root@host:0", "root@host:99999", "root@host:ssh", "Root!@host", "root@-bad-.com",
                                 "root@300.1.1.1", "root@"])  # fmt: skip
def test_parse_target_refuses(bad):
    with pytest.raises(UsageError):
        parse_target(bad)


def test_a_target_that_is_neither_host_port_nor_a_provider_names_both_readings():
    """`add-node foo:bar` said only "'bar' is not a TCP port", never naming the providers."""
    with pytest.raises(UsageError) as caught:
        parse_target("foo:bar")
    assert "'bar' is not a TCP port, and 'foo' is not a provider" in caught.value.message
    assert "PROVIDER:NAME with a provider of lambda, runpod, paperspace" in caught.value.hint


def test_check_host_accepts_ips_and_names():
    assert check_host("100.101.1.7") == "100.101.1.7"
    assert check_host("node-1.tail1234.ts.net") == "node-1.tail1234.ts.net"


def test_inventory_groups_follow_state_and_roles():
    nodes = [
        Node("head", "10.0.0.1", roles=["head", "compute"], state="active", provider="local", mesh_address="10.0.0.1"),
        Node("gpu1", "10.0.0.2", state="active", provider="runpod", mesh_address="10.0.0.2"),
        Node("new", "10.0.0.3", state="pending", mesh_address="10.0.0.3"),
    ]
    inv = to_inventory(nodes, {})
    children = inv["all"]["children"]
    assert sorted(children["compute"]["hosts"]) == ["gpu1", "head"]
    assert list(children["head"]["hosts"]) == ["head"]
    assert list(children["pending"]["hosts"]) == ["new"]
    assert list(children["runpod"]["hosts"]) == ["gpu1"]
    assert inv["all"]["hosts"]["gpu1"]["meshctl_state"] == "active"


def test_a_pod_is_recorded_and_grouped(tmp_path):
    mesh = Mesh(tmp_path)
    head = Node("head", "10.0.0.1", roles=["head", "compute"], state="active", mesh_address="10.0.0.1")
    pod = Node("pod1", "10.0.0.4", state="active", provider="runpod", mesh_address="10.0.0.4", pod=True)
    mesh.save([head, pod], {})
    nodes, _ = mesh.load()
    assert [n.pod for n in nodes] == [False, True]
    inv = to_inventory(nodes, {})
    assert list(inv["all"]["children"]["pod"]["hosts"]) == ["pod1"]
    assert inv["all"]["hosts"]["pod1"]["mesh_pod"] is True and "mesh_pod" not in inv["all"]["hosts"]["head"]
    (tmp_path / "mesh.yml").write_text("all:\n  hosts:\n    a: {ansible_host: 10.0.0.1, mesh_pod: 'yes'}\n")
    with pytest.raises(InventoryError, match="mesh_pod is 'yes'"):
        mesh.load()


def test_ansible_reads_the_inventory(tmp_path):
    mesh = Mesh(tmp_path)
    mesh.save([Node("head", "10.0.0.1", roles=["head", "compute"], state="active", mesh_address="10.0.0.1")], {})
    out = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(mesh.inventory), "--list"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert '"ansible_host": "10.0.0.1"' in out


def test_round_trip_and_backup(tmp_path):
    mesh = Mesh(tmp_path)
    first = [Node("head", "10.0.0.1", roles=["head", "compute"], mesh_address="10.0.0.1")]
    mesh.save(first, {"x": 1})
    original = mesh.inventory.read_bytes()
    second = [*first, Node("cpu1", "10.0.0.2", mesh_address="10.0.0.2")]
    mesh.save(second, {"x": 1})
    assert (tmp_path / "mesh.yml.bak").read_bytes() == original
    nodes, mesh_vars = mesh.load()
    assert [n.name for n in nodes] == ["head", "cpu1"] and mesh_vars == {"x": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("all: [broken\n", "not valid YAML"),
        ("- a\n- b\n", "no top-level 'all'"),
        ("all:\n  hosts:\n    BAD_NAME:\n      ansible_host: 10.0.0.1\n", "not valid for Slurm"),
        ("all:\n  hosts:\n    a:\n      ansible_host: 10.0.0.1\n      mesh_provider: aws\n", "unknown provider"),
        ("all:\n  hosts:\n    a:\n      ansible_user: root\n", "ansible_host is None"),
        (
            "all:\n  hosts:\n    a: {ansible_host: 10.0.0.1, meshctl_roles: [head]}\n"
            "    b: {ansible_host: 10.0.0.2, meshctl_roles: [head]}\n",
            "2 heads",
        ),
    ],
)
def test_corrupt_inventories_are_named(tmp_path, text, message):
    (tmp_path / "mesh.yml").write_text(text)
    with pytest.raises(InventoryError) as err:
        Mesh(tmp_path).load()
    assert message in str(err.value)
    assert (tmp_path / "mesh.yml").read_text() == text


def test_invalid_record_is_never_written(tmp_path):
    mesh = Mesh(tmp_path)
    mesh.save([Node("head", "10.0.0.1", roles=["head"], mesh_address="10.0.0.1")], {})
    before = mesh.inventory.read_bytes()
    with pytest.raises(UsageError):
        mesh.save([Node("Bad Name", "10.0.0.1")], {})
    assert mesh.inventory.read_bytes() == before


def test_atomic_write_leaves_the_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "mesh.yml"
    target.write_text("old\n")

    def boom(*_a):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(InventoryError, match=r"cannot write .*mesh\.yml: disk full"):
        atomic_write(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["mesh.yml"]  # no temp file left


def test_lock_says_who_holds_it(tmp_path):
    from meshctl.errors import Busy

    mesh = Mesh(tmp_path)
    with mesh.lock("add-node 10.0.0.9"):
        for _ in range(2):  # a refused run leaves the holder's note as it was: the next refusal says it too
            with pytest.raises(Busy) as err, Mesh(tmp_path).lock("apply"):
                pass
            assert re.fullmatch(
                rf"the mesh is busy: pid {os.getpid()} on \S+ running `add-node 10.0.0.9` since "
                r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC",
                err.value.message,
            ), err.value.message
            assert "--wait" in str(err.value) and err.value.exit_code == 9 and "{" not in err.value.message
    with mesh.lock("apply"):  # released
        pass


def test_find_walks_up_and_honours_env(tmp_path, monkeypatch):
    Mesh(tmp_path).save([Node("head", "10.0.0.1", roles=["head"], mesh_address="10.0.0.1")], {})
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    assert Mesh.find(cwd=sub).path == tmp_path.resolve()
    monkeypatch.setenv("MESHCTL_MESH", str(tmp_path))
    assert Mesh.find(cwd=Path("/")).path == tmp_path.resolve()
    monkeypatch.setenv("MESHCTL_MESH", str(sub))
    with pytest.raises(InventoryError, match="meshctl init"):
        Mesh.find()


def test_saved_file_is_plain_yaml_with_a_header(tmp_path):
    mesh = Mesh(tmp_path)
    mesh.save([Node("head", "10.0.0.1", roles=["head", "compute"], mesh_address="10.0.0.1")], {})
    text = mesh.inventory.read_text()
    assert text.startswith("# meshctl mesh inventory")
    assert yaml.safe_load(text)["all"]["hosts"]["head"]["meshctl_roles"] == ["head", "compute"]


def test_the_documented_example_inventory_loads(tmp_path):
    example = Path(__file__).resolve().parents[3] / "inventory" / "example.yml"
    (tmp_path / "mesh.yml").write_text(example.read_text())
    nodes, mesh_vars = Mesh(tmp_path).load()
    assert mesh_vars == {"mesh_tailscale": True}
    assert {n.name: (n.provider, n.roles, n.state) for n in nodes} == {
        "desk": ("local", ["head", "compute"], "active"),
        "ps-a6000": ("paperspace", ["compute"], "active"),
        "lambda-cpu": ("lambda", ["compute"], "active"),
        "rp-4090": ("runpod", ["compute"], "active"),
    }
    assert [n.name for n in nodes if n.pod] == ["rp-4090"]
    # meshctl would write the same groups back
    assert yaml.safe_load(example.read_text())["all"]["children"] == to_inventory(nodes, mesh_vars)["all"]["children"]


USER_EDITED = """all:
  vars:
    my_site_var: 7
  hosts:
    desk:
      ansible_host: 127.0.0.1
      ansible_connection: local
      ansible_python_interpreter: /usr/bin/python3
      meshctl_roles: [head, compute]
      meshctl_state: active
      mesh_address: 100.64.0.1
      mesh_provider: local
    gpu1:
      ansible_host: 203.0.113.5
      mesh_address: 100.64.0.2
      meshctl_state: active
      ansible_python_interpreter: /opt/py/bin/python3
      nvidia_note: {driver: "550", ok: true}
  children:
    compute: {hosts: {desk: {}, gpu1: {}}}
    lab_rack: {hosts: {gpu1: {}}, vars: {rack: b2}}
"""


def test_host_variables_and_groups_a_user_adds_are_kept(tmp_path):
    """mesh.yml round-trips what meshctl does not manage; comments are the one thing it says it drops."""
    m = Mesh(tmp_path)
    m.inventory.write_text(USER_EDITED)
    nodes, mesh_vars = m.load()
    gpu1 = next(n for n in nodes if n.name == "gpu1")
    note = {"driver": "550", "ok": True}
    assert gpu1.extra == {"ansible_python_interpreter": "/opt/py/bin/python3", "nvidia_note": note}
    assert next(n for n in nodes if n.name == "desk").extra == {}  # the local head's interpreter is meshctl's own
    nodes.append(Node("cpu1", "203.0.113.6", state="active", mesh_address="100.64.0.3"))
    m.save(nodes, mesh_vars)
    data = yaml.safe_load(m.inventory.read_text())
    assert data["all"]["vars"] == {"my_site_var": 7}
    assert data["all"]["hosts"]["gpu1"]["nvidia_note"] == {"driver": "550", "ok": True}
    assert data["all"]["hosts"]["gpu1"]["ansible_python_interpreter"] == "/opt/py/bin/python3"
    assert data["all"]["hosts"]["desk"]["ansible_python_interpreter"] == "/usr/bin/python3"
    assert data["all"]["children"]["lab_rack"] == {"hosts": {"gpu1": {}}, "vars": {"rack": "b2"}}
    assert "comments are not" in m.inventory.read_text().splitlines()[0] + m.inventory.read_text().splitlines()[1]
    # A node that leaves leaves the user's group too; the group stays.
    m.load()
    m.save([n for n in nodes if n.name != "gpu1"], mesh_vars)
    rack = yaml.safe_load(m.inventory.read_text())["all"]["children"]["lab_rack"]
    assert rack == {"hosts": {}, "vars": {"rack": "b2"}}
    # The run's inventory has the user's group and variables too.
    nodes, mesh_vars = m.load()
    run = m.run_inventory(nodes, mesh_vars)
    assert "lab_rack" in run["all"]["children"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("      mesh_hw: {cpus: 1}\n", "mesh_hw is meshctl's to set"),
        ('      "bad-name": 1\n', "is not a variable name"),
    ],
)
def test_host_variables_meshctl_sets_or_ansible_cannot_name_are_refused(tmp_path, line, message):
    m = Mesh(tmp_path)
    m.inventory.write_text(USER_EDITED.replace("      nvidia_note:", line + "      nvidia_note:"))
    with pytest.raises(InventoryError, match=message):
        m.load()


def test_since_when_meshctl_has_a_nodes_instance_is_recorded_kept_and_new_with_a_new_instance(tmp_path):
    m = Mesh(tmp_path)
    node = Node("gpu2", "198.51.100.7", state="active", instance="lambda:i1", since=1_700_000_000)
    m.save([node], {})
    assert "meshctl_instance_since: 1700000000" in m.inventory.read_text()
    loaded = m.load()[0][0]
    assert loaded.since == 1_700_000_000 and "meshctl_instance_since" not in loaded.extra
    loaded.move_to("198.51.100.7", 22, "lambda:i1")  # the same machine: the same since
    assert loaded.since == 1_700_000_000
    loaded.move_to("198.51.100.8", 22, "lambda:i2")  # another machine: since now
    assert loaded.since is not None and loaded.since > 1_700_000_000
    m.inventory.write_text(m.inventory.read_text().replace("1700000000", "yesterday"))
    with pytest.raises(InventoryError, match="meshctl_instance_since is 'yesterday', not a time in seconds"):
        m.load()


def test_a_local_head_runs_the_systems_python_not_meshctls():
    hv = Node("desk", "127.0.0.1", roles=["head", "compute"], connection="local", mesh_address="100.64.0.1").hostvars()
    assert hv["ansible_python_interpreter"] == "/usr/bin/python3"
    assert "ansible_python_interpreter" not in Node("gpu1", "203.0.113.5").hostvars()


def test_a_tab_in_mesh_yml_is_refused_with_its_line(tmp_path):
    Mesh(tmp_path).save([Node("head", "10.0.0.1", roles=["head"], mesh_address="10.0.0.1")], {})
    inventory = tmp_path / "mesh.yml"
    lines = inventory.read_text().splitlines()
    number = next(i for i, line in enumerate(lines) if "ansible_host" in line)
    lines[number] = "\t" + lines[number].lstrip()
    inventory.write_text("\n".join(lines) + "\n")
    with pytest.raises(InventoryError) as caught:
        Mesh(tmp_path).load()
    assert f"line {number + 1}, column 1:" in caught.value.message and "never tabs" in caught.value.message


def test_a_users_groups_are_kept_by_a_mesh_object_that_never_loaded(tmp_path):
    """Nothing of save() or run_inventory() rests on an earlier load() of the same object: the
    user's groups are read from mesh.yml where they are written."""
    Mesh(tmp_path).inventory.write_text(USER_EDITED)
    nodes, mesh_vars = Mesh(tmp_path).load()
    fresh = Mesh(tmp_path)
    assert "lab_rack" in fresh.run_inventory(nodes, mesh_vars)["all"]["children"]
    fresh.save(nodes, mesh_vars)
    assert yaml.safe_load(fresh.inventory.read_text())["all"]["children"]["lab_rack"]["vars"] == {"rack": "b2"}
    assert Mesh(tmp_path / "new").user_groups() == {}  # no mesh.yml yet: none
