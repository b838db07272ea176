"""`meshctl status` without an Ansible run (meshctl/quickread.py): what it reads, over which
command, what it refuses, and when it leaves the read to playbooks/status.yml."""

import getpass
import io
import json
import shlex
import shutil
import socket
import subprocess
import sys
import time

import pytest

from meshctl import quickread, runner, session, ssh
from meshctl.mesh import Mesh
from meshctl.model import Node

REQUEST = {
    "services": ["munge", "slurmd"],
    "sinfo": False,
    "tailscale": False,
    "mount_path": "/mnt/shared-slurm",
    "mount_possible": True,
    "share_id": "ab" * 32,
    "share_marker": ".meshctl-share",
    "url": None,
    "supervisor": False,
    "expect": {"compute": True, "controller": "head"},
}
HEAD_REQUEST = {
    **REQUEST,
    "services": ["munge", "slurmctld", "slurmd", "nfs-ganesha"],
    "sinfo": True,
    "mount_path": None,
    "url": "http://100.64.0.1:5000/health",
    "expect": {"compute": True, "controller": "head", "share_service": "nfs-ganesha"},
}


@pytest.fixture
def mesh(tmp_path, monkeypatch):
    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    m = Mesh(tmp_path)
    head = Node("head", "100.64.0.1", roles=["head", "compute"], state="active", mesh_address="100.64.0.1",
                ssh_key="/keys/id")  # fmt: skip
    nodes = [head, Node("gpu1", "100.64.0.2", state="active", mesh_address="100.64.0.2", port=2222)]
    m.save(nodes, {})
    return m


def test_a_request_as_the_roles_make_it_passes():
    assert quickread.request_problem(REQUEST) is None
    assert quickread.request_problem(HEAD_REQUEST) is None


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"services": ["munge; rm -rf /"]}, "unit names"),
        ({"services": "munge"}, "unit names"),
        ({"sinfo": "yes"}, "sinfo"),
        ({"mount_path": "relative/path"}, "absolute path"),
        ({"rented": "../burst; cat /etc/shadow"}, "rented is not an absolute path"),
        ({"ended": "ended && reboot"}, "ended is not an absolute path"),
        ({"url": "http://100.64.0.1:5000/api/2.0/mlflow/experiments"}, "health URL"),
        ({"url": "file:///etc/shadow"}, "health URL"),
        ({"expect": {"controller": "Head Node"}}, "node name"),
        ({"expect": {"runs_as": "root"}}, "known keys"),
        ({"extra": 1}, "unexpected or missing"),
    ],
)
def test_a_recorded_request_outside_its_shape_is_refused(change, why):
    assert why in quickread.request_problem({**REQUEST, **change})


def test_the_ssh_command_is_the_connection_meshctl_records(mesh):
    nodes, _ = mesh.load()
    head, gpu1 = nodes
    argv = quickread.command(head, mesh.known_hosts, 1)
    assert argv[0] == "ssh" and argv[-2] == "100.64.0.1"
    options = [argv[i + 1] for i, word in enumerate(argv) if word == "-o"]
    assert "BatchMode=yes" in options and "ConnectTimeout=1" in options
    assert "StrictHostKeyChecking=yes" in options and f"UserKnownHostsFile={mesh.known_hosts}" in options
    assert argv[argv.index("-i") + 1] == "/keys/id" and argv[argv.index("-l") + 1] == "root"
    assert shlex.split(argv[-1]) == ["python3", "-c", quickread.BOOT]  # one word for ssh, quoted for the shell
    other = quickread.command(gpu1, mesh.known_hosts, 1)
    assert other[other.index("-p") + 1] == "2222" and "-i" not in other
    sudoer = Node("n3", "100.64.0.3", user="ubuntu")
    assert shlex.split(quickread.command(sudoer, mesh.known_hosts, 1)[-1])[:3] == ["sudo", "-n", "--"]
    local = Node("here", "127.0.0.1", connection="local", roles=["head"])
    assert quickread.command(local, mesh.known_hosts, 1) == ["/usr/bin/python3", "-c", quickread.BOOT]


def test_the_script_sent_to_a_node_reads_it_with_the_standard_library(tmp_path):
    """The text meshctl sends, run by a python3 (this machine's here): the module's shape comes back."""
    fstab = tmp_path / "fstab"
    # The head's records of the pool machines it rented: root reads them, never one through a link
    # (a link laid there would make root read what it points at).
    rented = tmp_path / "burst"
    rented.mkdir()
    (rented / "h100-1.json").write_text('{"node": "h100-1"}\n')
    (tmp_path / "secret").write_text("not a record\n")
    (rented / "h100-2.json").symlink_to(tmp_path / "secret")
    (rented / "notes.txt").write_text("no record\n")
    ended = tmp_path / "ended"  # the power program's records of the machines that ended: read the same way
    ended.mkdir()
    (ended / "gpu2.json").write_text('{"node": "gpu2", "lost": true}\n')
    (ended / "h100-1.json").symlink_to(tmp_path / "secret")
    request = {**REQUEST, "services": ["meshctl-no-such-unit"], "mount_path": str(tmp_path / "share"),
               "rented": str(rented), "ended": str(ended)}  # fmt: skip
    assert quickread.request_problem(request) is None
    done = subprocess.run([sys.executable, "-c", quickread.BOOT], input=quickread.script(request), text=True,
                          capture_output=True, timeout=60, check=True)  # fmt: skip
    status = json.loads(done.stdout)
    assert set(status) == {"services", "sinfo", "tailscale", "mount", "http", "rented", "ended"}
    assert status["rented"] == {"h100-1": '{"node": "h100-1"}\n'}
    assert status["ended"] == {"gpu2": '{"node": "gpu2", "lost": true}\n'}
    assert (
        list(status["services"]) == ["meshctl-no-such-unit"] and status["services"]["meshctl-no-such-unit"] != "active"
    )
    assert status["mount"] == "missing" and status["sinfo"] is None and status["http"] is None
    assert not fstab.exists()


def local_mesh(tmp_path, request, *extra_nodes):
    m = Mesh(tmp_path)
    me = getpass.getuser()
    nodes = [Node("head", "127.0.0.1", user=me, roles=["head", "compute"], state="active", connection="local",
                  mesh_address="100.64.0.1"), *extra_nodes]  # fmt: skip
    m.save(nodes, {})
    for node in nodes:
        m.record_status_request(node.name, request)
    return m


def test_read_judges_a_reached_node_and_names_one_that_is_not(tmp_path, monkeypatch):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]  # bound, never listening: ssh is refused at once
    mesh = local_mesh(tmp_path, {**HEAD_REQUEST, "services": ["meshctl-no-such-unit"], "sinfo": False,
                                 "url": None}, Node("gpu1", "127.0.0.1", port=port, state="active"))  # fmt: skip
    if getpass.getuser() != "root":  # the local head would be read through sudo: read it as this user here
        monkeypatch.setattr(quickread, "command", lambda node, kh, t, *k, real=quickread.command: (
            [sys.executable, "-c", quickread.BOOT] if node.connection == "local"
            else real(node, kh, t, *k)))  # fmt: skip
    nodes, _ = mesh.load()
    result = quickread.read(mesh, nodes, {}, 2)
    assert result is not None
    record = result.records["head"]
    assert record["problem"] == "service" and "meshctl-no-such-unit" in record["detail"]
    assert result.unreachable == ["gpu1"] and not result.ok
    assert [(f.host, f.task) for f in result.failures] == [("gpu1", quickread.TASK)]
    closed.close()


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs ssh")
def test_a_node_that_takes_no_connection_is_unreachable_after_the_timeout_not_sshs_second(tmp_path, monkeypatch):
    """A stopped machine drops the TCP handshake: status waited SSH's ConnectTimeout (1 s at least)
    for it. A listener whose queue is full drops it the same way."""
    full = socket.socket()
    full.bind(("127.0.0.1", 0))
    full.listen(0)
    port = full.getsockname()[1]
    queued = socket.create_connection(("127.0.0.1", port))  # the one connection its queue takes
    mesh = local_mesh(tmp_path, {**HEAD_REQUEST, "sinfo": False, "url": None},
                      Node("gpu1", "127.0.0.1", port=port, state="active"))  # fmt: skip
    if getpass.getuser() != "root":
        monkeypatch.setattr(quickread, "command", lambda node, kh, t, *k, real=quickread.command: (
            [sys.executable, "-c", quickread.BOOT] if node.connection == "local"
            else real(node, kh, t, *k)))  # fmt: skip
    seen = []
    monkeypatch.setattr(quickread, "command", lambda node, kh, t, *kex, real=quickread.command: (
        seen.append(t), real(node, kh, t, *kex))[1])  # fmt: skip
    nodes, _ = mesh.load()
    start = time.monotonic()
    result = quickread.read(mesh, nodes, {}, 0.3)
    print(f"status read of a node that takes no connection, timeout 0.3 s: {time.monotonic() - start:.2f} s")
    assert result.unreachable == ["gpu1"]
    said = next(f.message for f in result.failures if f.host == "gpu1")
    assert said == f"ssh: connect to host 127.0.0.1 port {port}: Connection timed out (no answer in 0.3 s)"
    assert ssh.not_answered(said)  # the words every command reads as a machine that did not answer
    assert seen and set(seen) == {1}  # SSH's own wait: the timeout in whole seconds
    queued.close()
    full.close()


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs ssh")
def test_the_connection_probed_is_the_one_ssh_opens_or_none_through_a_proxy(tmp_path):
    """A Host alias's HostName is where the TCP connection goes; through a ProxyJump or ProxyCommand
    the node's own address is never dialled, so no probe can say it is silent. Read from ssh's own
    `-G` output for a config file."""
    said = ssh_config(tmp_path, "Host alias\n  HostName 10.9.8.7\nHost viajump\n  HostName 10.1.2.3\n"
                      "  ProxyJump bastion\nHost viacmd\n  ProxyCommand nc %h %p\n")  # fmt: skip
    assert ssh.connects_to(said("alias")) == ("10.9.8.7", 2222)
    assert ssh.connects_to(said("100.64.0.2")) == ("100.64.0.2", 2222)
    assert ssh.connects_to(said("viajump")) is None
    assert ssh.connects_to(said("viacmd")) is None
    assert ssh.connects_to(ssh.config_of("")) is None and ssh.connects_to(None) is None
    assert ssh.whole_seconds(0.5) == 1 and ssh.whole_seconds(2.5) == 3 and ssh.whole_seconds(7) == 7


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs ssh")
def test_a_status_read_offers_the_same_key_exchanges_as_ssh_with_sntrup761_last(tmp_path):
    """sntrup761's key generation cost the control machine 70 ms of CPU per connection: most of a
    status of 16 nodes. The read offers what ssh would, nothing added, sntrup761 after the rest (ML-KEM
    first where this ssh has it); a user's config that allows only it keeps only it."""
    said = ssh_config(tmp_path, "Host strict\n  KexAlgorithms sntrup761x25519-sha512@openssh.com\n"
                      "Host classic\n  KexAlgorithms curve25519-sha256\n")  # fmt: skip
    default = said("100.64.0.2")
    offered = default["kexalgorithms"].split(",")
    order = ssh.fast_kex_first(default)
    if any(a.startswith(ssh.SLOW_KEX) for a in offered[:-1]):
        assert order is not None and sorted(order.split(",")) == sorted(offered)
        assert [a for a in order.split(",") if a.startswith(ssh.SLOW_KEX)] == order.split(",")[-len(
            [a for a in offered if a.startswith(ssh.SLOW_KEX)]):]  # fmt: skip
        assert not order.startswith(ssh.SLOW_KEX)
        if "mlkem768x25519-sha256" in offered:
            assert order.startswith("mlkem768x25519-sha256")
    assert ssh.fast_kex_first(said("strict")) is None  # only sntrup761: kept as the user set it
    assert ssh.fast_kex_first(said("classic")) is None
    assert ssh.fast_kex_first(None) is None
    mesh = Mesh(tmp_path / "m")
    node = Node("gpu1", "100.64.0.2", state="active")
    argv = quickread.command(node, mesh.known_hosts, 1, "curve25519-sha256,sntrup761x25519-sha512@openssh.com")
    assert argv[argv.index("--") - 2 : argv.index("--")] == [
        "-o", "KexAlgorithms=curve25519-sha256,sntrup761x25519-sha512@openssh.com"]  # fmt: skip
    assert not any(a.startswith("KexAlgorithms") for a in quickread.command(node, mesh.known_hosts, 1))


def ssh_config(tmp_path, text: str):
    """ssh's own `-G` answer for a host under the config file TEXT, as ``ssh.config_of`` reads it."""
    config = tmp_path / "ssh_config"
    config.write_text(text)

    def said(host: str) -> dict:
        done = subprocess.run(["ssh", "-F", str(config), "-G", "-p", "2222", "-l", "root", "--", host],
                              capture_output=True, text=True, check=True)  # fmt: skip
        return ssh.config_of(done.stdout)

    return said


def test_anything_meshctl_cannot_read_as_ansible_would_is_left_to_the_playbook(tmp_path):
    mesh = local_mesh(tmp_path, REQUEST)
    nodes, _ = mesh.load()
    never = Node("gpu9", "100.64.0.9", state="active")
    assert quickread.read(mesh, [*nodes, never], {}, 1) is None  # gpu9 has no recorded request
    assert quickread.read(mesh, nodes, {"ansible_ssh_common_args": "-o ProxyJump=bastion"}, 1) is None
    (tmp_path / "group_vars").mkdir(exist_ok=True)
    (tmp_path / "group_vars" / "all.yml").write_text("slurm_accounting: true\nansible_port: 2200\n")
    assert quickread.read(mesh, nodes, {}, 1) is None
    (tmp_path / "group_vars" / "all.yml").write_text("$ANSIBLE_VAULT;1.1;AES256\n6162\n")
    assert quickread.read(mesh, nodes, {}, 1) is None  # cannot see inside: may set anything
    (tmp_path / "group_vars" / "all.yml").write_text("slurm_accounting: true\n")
    mesh.record_status_request("head", {**REQUEST, "services": ["munge && reboot"]})  # tampered with
    assert quickread.read(mesh, nodes, {}, 1) is None
    proxied = Node("head", "127.0.0.1", roles=["head"], state="active", extra={"ansible_ssh_extra_args": "-A"})
    assert not quickread.modelled(proxied, {})


def test_an_apply_records_what_status_reads_only_for_nodes_it_finished(mesh, monkeypatch):
    nodes, mesh_vars = mesh.load()

    def fake_run(playbook, inventory, mesh_dir=None, check=False, **kw):
        stats = {"head": {"ok": 5}, "gpu1": {"ok": 4, "failed": 1}}
        return runner.RunResult("failed", 2, [runner.Failure("gpu1", "t", "broke")], stats,
                                status_requests={"head": HEAD_REQUEST, "gpu1": REQUEST})  # fmt: skip

    monkeypatch.setattr(runner, "run_playbook", fake_run)
    session.run(mesh, nodes, mesh_vars, "site.yml", runner.Progress(live=False, out=io.StringIO()))
    assert mesh.load_status_requests() == {"head": HEAD_REQUEST}
    mesh.forget_facts("head")
    assert mesh.load_status_requests() == {}


def test_a_node_answering_200000_nested_brackets_is_one_failed_row_not_a_traceback(tmp_path):
    """The depth is bounded before the parser (which recurses per level: a RecursionError before)."""
    from meshctl import quickread

    script = tmp_path / "deep.sh"
    script.write_text("#!/bin/sh\ncat >/dev/null\nprintf '%0200000d' 0 | tr 0 '['\n")
    script.chmod(0o755)
    kind, why = quickread._read_one([str(script)], "x", 5)
    assert kind == "failed" and "deeper than 32 levels" in why
    script.write_text("#!/bin/sh\ncat >/dev/null\necho '{\"a\": [[[1]]]}'\n")
    assert quickread._read_one([str(script)], "x", 5) == ("ok", {"a": [[[1]]]})
