"""meshctl status decisions, with the remote commands answered by the test."""

import json

import pytest
from click.testing import CliRunner

from meshctl import membership, ssh
from meshctl.cli import cli
from meshctl.mesh import Mesh, Node

SINFO = "head|idle|(null)\ngpu1|mixed|gpu:rtx_a5000:2\ngpu1|mixed|gpu:rtx_a5000:2\ncpu1|down*|(null)\n"


@pytest.fixture
def mesh(tmp_path, monkeypatch):
    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    m = Mesh(tmp_path)
    m.save(
        [
            Node("head", "100.64.0.1", roles=["head", "compute"], state="active", mesh_address="100.64.0.1"),
            Node("gpu1", "100.64.0.2", state="active", mesh_address="100.64.0.2"),
            Node("cpu1", "100.64.0.3", state="active", mesh_address="100.64.0.3"),
        ],
        {},
    )
    return m


def answer(replies):
    def _on(_mesh, node, command, timeout=60):
        if command.startswith("sinfo"):
            return ssh.SshResult(0, SINFO, "")
        if command.startswith("python3 -c"):
            return ssh.SshResult(0, replies.get("mlflow", "OK\n"), "")
        return replies[node.name]

    return _on


HEAD_OK = ssh.SshResult(0, "munge=active\nslurmctld=active\nslurmd=active\nnfs=exporting\n", "")
GPU_OK = ssh.SshResult(0, "munge=active\nslurmd=active\nnfs=mounted\n", "")


def test_probe_script_asks_the_right_questions():
    head = membership.probe_script(["slurmctld", "slurmd"], is_head=True)
    assert "systemctl is-active slurmctld" in head and "nfs-ganesha" in head
    node = membership.probe_script(["slurmd"], is_head=False)
    assert "findmnt -rn -t nfs,nfs4 /mnt/shared-slurm" in node and "/proc/filesystems" in node


def test_one_down_node_makes_status_fail(mesh, monkeypatch):
    replies = {"head": HEAD_OK, "gpu1": GPU_OK, "cpu1": ssh.SshResult(255, "", "Connection timed out")}
    monkeypatch.setattr(membership, "_on", answer(replies))
    result = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path), "--json"])
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    out = json.loads(result.output[: result.output.rindex("}") + 1])
    rows = {r["name"]: r for r in out["nodes"]}
    assert rows["head"]["healthy"] and rows["gpu1"]["healthy"]
    assert rows["gpu1"]["gpus"] == "gpu:rtx_a5000:2"
    assert not rows["cpu1"]["ssh"] and "did not answer" in rows["cpu1"]["error"]
    assert out["mlflow"] == "OK" and out["healthy"] is False


def test_fstab_only_counts_as_healthy_but_is_explained(mesh, monkeypatch):
    fstab_only = ssh.SshResult(0, "munge=active\nslurmd=active\nnfs=fstab-only\n", "")
    replies = {"head": HEAD_OK, "gpu1": GPU_OK, "cpu1": fstab_only}
    monkeypatch.setattr(membership, "_on", answer(replies))
    monkeypatch.setattr(membership, "READY_STATES", (*membership.READY_STATES, "down"))  # cpu1's sinfo row
    rows, _mlflow, healthy = membership.status(mesh, mesh.load()[0])
    cpu1 = next(r for r in rows if r.name == "cpu1")
    assert cpu1.healthy and "cannot mount NFS" in cpu1.error
    assert healthy


@pytest.mark.parametrize(
    ("probe", "mlflow"),
    [
        ("munge=active\nslurmd=inactive\nnfs=mounted\n", "OK\n"),  # slurmd stopped
        ("munge=failed\nslurmd=active\nnfs=mounted\n", "OK\n"),  # munge down
        ("munge=active\nslurmd=active\nnfs=not-mounted\n", "OK\n"),  # mountable but not mounted
        ("munge=active\nslurmd=active\nnfs=mounted\n", ""),  # MLflow not answering
    ],
)
def test_each_fault_is_unhealthy(mesh, monkeypatch, probe, mlflow):
    replies = {"head": HEAD_OK, "gpu1": ssh.SshResult(0, probe, ""), "cpu1": GPU_OK, "mlflow": mlflow}
    monkeypatch.setattr(membership, "_on", answer(replies))
    monkeypatch.setattr(membership, "READY_STATES", (*membership.READY_STATES, "down"))
    _rows, _mlflow, healthy = membership.status(mesh, mesh.load()[0])
    assert healthy is False


@pytest.fixture
def tailnet_mesh(mesh):
    nodes, _ = mesh.load()
    mesh.save(nodes, {"mesh_tailscale": True})
    return mesh


def with_tailnet(result: ssh.SshResult, tailnet: str) -> ssh.SshResult:
    return ssh.SshResult(result.rc, result.stdout + f"tailnet={tailnet}\n", result.stderr)


def test_probe_script_asks_tailscale_only_on_a_tailnet_mesh():
    assert "tailscale status --json" not in membership.probe_script(["slurmd"], is_head=False)
    script = membership.probe_script(["slurmd"], is_head=False, tailnet=True)
    assert "tailscale status --json" in script and "tailnet=absent" in script


def test_tailnet_probe_reads_real_status_json(tmp_path):
    import subprocess
    import sys

    from tests.conftest import fixture_text

    text = fixture_text("tailscale-status/needslogin-1.94.2-proxmox-linux-no-ips.txt")
    out = subprocess.run([sys.executable, "-c", membership.TAILNET_PROBE], input=text, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert out.split() == ["NeedsLogin", "-"]


def test_tailnet_column_and_health(tailnet_mesh, monkeypatch):
    replies = {
        "head": with_tailnet(HEAD_OK, "Running 100.64.0.1 "),
        "gpu1": with_tailnet(GPU_OK, "Running 100.64.0.2 userspace"),  # no TUN device
        "cpu1": with_tailnet(GPU_OK, "NeedsLogin - "),
    }
    monkeypatch.setattr(membership, "_on", answer(replies))
    monkeypatch.setattr(membership, "READY_STATES", (*membership.READY_STATES, "down"))
    rows, _mlflow, healthy = membership.status(tailnet_mesh, *tailnet_mesh.load())
    by = {r.name: r for r in rows}
    assert by["head"].healthy and by["head"].tailnet == "Running 100.64.0.1"
    assert not by["gpu1"].healthy and "NCCL" in by["gpu1"].error
    assert not by["cpu1"].healthy and "rotate-authkey --stored" in by["cpu1"].error
    assert healthy is False


def test_a_node_on_another_tailnet_address_is_unhealthy(tailnet_mesh, monkeypatch):
    replies = {
        "head": with_tailnet(HEAD_OK, "Running 100.64.0.1 "),
        "gpu1": with_tailnet(GPU_OK, "Running 100.64.9.9 "),  # Slurm and NFS still use 100.64.0.2
        "cpu1": with_tailnet(GPU_OK, "Running 100.64.0.3 "),
    }
    monkeypatch.setattr(membership, "_on", answer(replies))
    monkeypatch.setattr(membership, "READY_STATES", (*membership.READY_STATES, "down"))
    rows, _mlflow, _healthy = membership.status(tailnet_mesh, *tailnet_mesh.load())
    assert [r.name for r in rows if not r.healthy] == ["gpu1"]
