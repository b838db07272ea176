"""meshctl init --from-inventory: hosts from a user's own Ansible inventory (SSH preflight faked)."""

import textwrap

import pytest
from click.testing import CliRunner

from meshctl import preflight
from meshctl.cli import cli
from meshctl.mesh import Mesh

PROBE = {"sudo": "root", "os_id": "debian", "os_name": "Debian 12", "arch": "x86_64", "disk_free_mb": "9000",
         "pid1": "systemd", "tun": "yes", "python3": "/usr/bin/python3", "hostname": "box"}  # fmt: skip

INI = textwrap.dedent(
    """\
    [controller]
    desk ansible_host=192.0.2.10 ansible_user=ubuntu

    [gpus]
    gpu1 ansible_host=192.0.2.11 ansible_user=ubuntu ansible_port=2222 ansible_ssh_private_key_file={key}
    gpu2 ansible_host=192.0.2.12

    [gpus:vars]
    ansible_user=paperspace

    [other]
    printer ansible_host=192.0.2.99
    """
)


@pytest.fixture
def probed(monkeypatch):
    """Every host passes the preflight, except those listed in the returned set."""
    failing: set[str] = set()
    seen: list[tuple[str, str, int]] = []

    def run(_argv, user, host, port, _known_hosts=None, **_kw):
        seen.append((user, host, port))
        if host in failing:
            return preflight.Preflight(False, [], {}, error=("refused the connection", "start sshd on it"))
        return preflight.Preflight(True, preflight.evaluate(PROBE, user), dict(PROBE))

    monkeypatch.setattr(preflight, "run", run)
    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    return failing, seen


def invoke(tmp_path, text=INI, *extra):
    key = tmp_path / "lab_ed25519"
    key.write_text("not really a key\n")
    source = tmp_path / "hosts.ini"
    source.write_text(text.replace("{key}", str(key)))
    return CliRunner().invoke(cli, ["init", str(tmp_path / "m"), "--from-inventory", str(source),
                                    "--head-group", "controller", "--compute-group", "gpus", *extra])  # fmt: skip


def test_hosts_groups_users_ports_and_keys_are_imported_after_a_preflight_each(tmp_path, probed):
    _, seen = probed
    result = invoke(tmp_path)
    assert result.exit_code == 0, result.output
    nodes, _ = Mesh(tmp_path / "m").load()
    got = {n.name: (n.user, n.host, n.port, n.roles, n.state) for n in nodes}
    assert got == {
        "desk": ("ubuntu", "192.0.2.10", 22, ["head", "compute"], "pending"),
        "gpu1": ("ubuntu", "192.0.2.11", 2222, ["compute"], "pending"),  # host var beats group var
        "gpu2": ("paperspace", "192.0.2.12", 22, ["compute"], "pending"),
    }
    assert next(n for n in nodes if n.name == "gpu1").ssh_key == str(tmp_path / "lab_ed25519")
    assert sorted(seen) == [("paperspace", "192.0.2.12", 22), ("ubuntu", "192.0.2.10", 22),
                            ("ubuntu", "192.0.2.11", 2222)]  # fmt: skip
    assert "printer" not in result.output  # hosts of other groups are left out
    assert "meshctl apply" in result.output


def test_yaml_inventories_work_too(tmp_path, probed):
    text = "all:\n  children:\n    controller:\n      hosts:\n        desk: {ansible_host: 192.0.2.10}\n"
    text += "    gpus:\n      hosts:\n        gpu1: {ansible_host: 192.0.2.11}\n"
    source = tmp_path / "hosts.yml"
    source.write_text(text)
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "m"), "--from-inventory", str(source),
                                      "--head-group", "controller", "--compute-group", "gpus"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert [n.name for n in Mesh(tmp_path / "m").load()[0]] == ["desk", "gpu1"]


def test_a_host_that_fails_its_preflight_leaves_nothing_written(tmp_path, probed):
    failing, _ = probed
    failing.add("192.0.2.12")
    result = invoke(tmp_path)
    assert result.exit_code == 4, result.output
    assert not (tmp_path / "m").exists()


def test_a_folder_that_existed_keeps_what_it_had(tmp_path, probed):
    failing, _ = probed
    failing.add("192.0.2.11")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "notes.txt").write_text("mine")
    assert invoke(tmp_path).exit_code == 4
    assert [p.name for p in (tmp_path / "m").iterdir()] == ["notes.txt"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[gpus]\ngpu1\n", "group 'controller'"),  # no head group
        ("[controller]\na\nb\n", "has 2 hosts, not one"),
        ("[controller]\nDesk_1 ansible_host=192.0.2.10\n", "Desk_1"),  # not a valid node name
        ("[controller]\ndesk ansible_host=192.0.2.10 ansible_user=-oProxyCommand=x\n", "ansible_user"),
        ("[controller]\ndesk ansible_host=192.0.2.10 ansible_port=ssh\n", "ansible_port"),
    ],
)
def test_bad_inventories_are_refused_with_the_fix(tmp_path, probed, text, message):
    result = invoke(tmp_path, text)
    assert result.exit_code in (2, 3), result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "m").exists()


def test_head_and_from_inventory_exclude_each_other(tmp_path, probed):
    source = tmp_path / "hosts.ini"
    source.write_text(INI)
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "m"), "--from-inventory", str(source),
                                      "--head", "root@192.0.2.1"])  # fmt: skip
    assert result.exit_code == 2 and "one of them" in result.output
