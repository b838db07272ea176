"""meshctl status decisions from what the roles report (`<role>_health` facts), ansible-runner faked."""

import io
import json

import pytest
from click.testing import CliRunner

from meshctl import membership, runner
from meshctl.cli import cli
from meshctl.mesh import Mesh, Node

SLURM_NODES = {
    "head": {"state": "idle", "gres": "(null)", "ready": True},
    "gpu1": {"state": "mixed", "gres": "gpu:rtx_a5000:2", "ready": True},
    "cpu1": {"state": "idle", "gres": "(null)", "ready": True},
}


def head_health(**changes):
    health = {
        "munge_health": "active",
        "slurm_health": {"daemons": {"slurmctld": "active", "slurmd": "active"}, "sinfo_ok": True,
                         "nodes": dict(SLURM_NODES)},
        "nfs_server_health": "exporting",
        "mlflow_health": "OK",
    }  # fmt: skip
    health.update(changes)
    return health


def node_health(nfs="mounted", munge="active", slurmd="active", tailnet=None):
    health = {"munge_health": munge, "slurm_health": {"daemons": {"slurmd": slurmd}}, "nfs_client_health": nfs}
    if tailnet is not None:
        health["tailscale_health"] = tailnet
    return health


def ts(state, ipv4, userspace=False):
    return {"backend_state": state, "ipv4": ipv4, "userspace": userspace}


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


class FakeStatus(list):
    def __init__(self):
        super().__init__()
        self.health: dict[str, dict] = {}
        self.unreachable: list[str] = []

    def run_playbook(self, playbook, inventory, mesh_dir=None, **kw):
        self.append({"playbook": playbook, "inventory": inventory, **kw})
        failures = [runner.Failure(h, "Munge", "ssh: connect to host: Connection timed out") for h in self.unreachable]
        stats = {h: {"ok": 3} for h in self.health} | {h: {"unreachable": 1} for h in self.unreachable}
        # What the nodes report goes through the run's event handler, as in a real run (its schema).
        progress = runner.Progress(out=io.StringIO(), live=False)
        for host, facts in self.health.items():
            if host not in self.unreachable:
                progress.event({"event": "runner_on_ok", "event_data": {"host": host, "res": {"ansible_facts": facts}}})
        return runner.RunResult("failed" if failures else "successful", 4 if failures else 0, failures, stats,
                                health=dict(progress.health), refused_health=progress.refused_health)  # fmt: skip


@pytest.fixture
def fake(monkeypatch):
    f = FakeStatus()
    monkeypatch.setattr(runner, "run_playbook", f.run_playbook)
    return f


def test_status_runs_the_roles_status_entry_points_on_every_node(mesh, fake):
    fake.health = {"head": head_health(), "gpu1": node_health(), "cpu1": node_health()}
    rows, mlflow, healthy = membership.status(mesh, *mesh.load())
    assert fake[0]["playbook"] == "status.yml" and fake[0].get("limit") is None
    assert fake[0]["mitogen"] is False  # a few tasks per node: plain Ansible is faster
    assert set(fake[0]["inventory"]["all"]["hosts"]) == {"head", "gpu1", "cpu1"}
    assert healthy and mlflow == "OK"
    by = {r.name: r for r in rows}
    assert by["gpu1"].gpus == "gpu:rtx_a5000:2" and by["gpu1"].slurm == "mixed"
    assert by["head"].daemon == "slurmctld active, slurmd active" and by["head"].nfs == "exporting"


def test_one_down_node_makes_status_fail(mesh, fake):
    fake.health = {"head": head_health(), "gpu1": node_health(), "cpu1": node_health()}
    fake.unreachable = ["cpu1"]
    result = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path), "--json"])
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    out = json.loads(result.output[: result.output.rindex("}") + 1])
    rows = {r["name"]: r for r in out["nodes"]}
    assert rows["head"]["healthy"] and rows["gpu1"]["healthy"]
    assert not rows["cpu1"]["ssh"] and "timed out" in rows["cpu1"]["error"]
    assert out["mlflow"] == "OK" and out["healthy"] is False
    # The head's Slurm view of the node SSH could not reach, and advice that fits a machine that is off.
    assert rows["cpu1"]["slurm"] == "idle"  # SLURM_NODES: Slurm has not noticed yet
    assert "SSH fails" in rows["cpu1"]["error"] and "may have just stopped" in rows["cpu1"]["error"]
    assert "meshctl apply" not in rows["cpu1"]["error"]
    assert fake[-1]["connect_timeout"] == membership.STATUS_CONNECT_TIMEOUT  # seconds, not Ansible's 10


def test_a_stopped_node_gets_slurms_view_and_advice_to_start_it(mesh, fake):
    nodes_down = {**SLURM_NODES, "cpu1": {"state": "down*", "gres": "(null)", "ready": False}}
    fake.health = {"head": head_health(slurm_health={"daemons": {"slurmctld": "active", "slurmd": "active"},
                                                     "sinfo_ok": True, "nodes": nodes_down}),
                   "gpu1": node_health(), "cpu1": node_health()}  # fmt: skip
    fake.unreachable = ["cpu1"]
    result = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path)], env={"COLUMNS": "300"})
    assert result.exit_code == 1
    assert "down*" in result.output and "start it (it rejoins by itself)" in result.output
    assert "remove-node cpu1 --force" in result.output
    assert "each row's note says what to do" in result.output and "converges the reachable" not in result.output


def test_fstab_only_counts_as_healthy_but_is_explained(mesh, fake):
    fake.health = {"head": head_health(), "gpu1": node_health(), "cpu1": node_health(nfs="fstab-only")}
    rows, _mlflow, healthy = membership.status(mesh, *mesh.load())
    cpu1 = next(r for r in rows if r.name == "cpu1")
    assert cpu1.healthy and "cannot mount NFS" in cpu1.error
    assert healthy


def not_ready(name):
    nodes = dict(SLURM_NODES, **{name: {"state": "down*", "gres": "(null)", "ready": False}})
    return head_health(slurm_health={"daemons": {"slurmctld": "active", "slurmd": "active"}, "sinfo_ok": True,
                                     "nodes": nodes})  # fmt: skip


@pytest.mark.parametrize(
    ("head", "gpu1"),
    [
        (head_health(), node_health(slurmd="inactive")),  # slurmd stopped
        (head_health(), node_health(munge="failed")),  # munge down
        (head_health(), node_health(nfs="not-mounted")),  # mountable but not mounted
        (head_health(mlflow_health="unreachable"), node_health()),  # MLflow not answering
        (not_ready("gpu1"), node_health()),  # down in Slurm (the role says which states are ready)
        (head_health(nfs_server_health="down"), node_health()),  # the export is gone
    ],
    ids=["slurmd", "munge", "nfs", "mlflow", "slurm-state", "export"],
)
def test_each_fault_is_unhealthy(mesh, fake, head, gpu1):
    fake.health = {"head": head, "gpu1": gpu1, "cpu1": node_health()}
    _rows, _mlflow, healthy = membership.status(mesh, *mesh.load())
    assert healthy is False


@pytest.fixture
def tailnet_mesh(mesh):
    nodes, _ = mesh.load()
    mesh.save(nodes, {"mesh_tailscale": True})
    return mesh


def test_tailnet_column_and_health(tailnet_mesh, fake):
    fake.health = {
        "head": head_health(tailscale_health=ts("Running", "100.64.0.1")),
        "gpu1": node_health(tailnet=ts("Running", "100.64.0.2", userspace=True)),  # no TUN device
        "cpu1": node_health(tailnet=ts("NeedsLogin", None)),
    }
    rows, _mlflow, healthy = membership.status(tailnet_mesh, *tailnet_mesh.load())
    by = {r.name: r for r in rows}
    assert by["head"].healthy and by["head"].tailnet == "Running 100.64.0.1"
    assert not by["gpu1"].healthy and "NCCL" in by["gpu1"].error and by["gpu1"].tailnet.endswith("userspace")
    assert not by["cpu1"].healthy and "rotate-authkey --stored" in by["cpu1"].error
    assert by["cpu1"].tailnet == "NeedsLogin -"
    assert healthy is False


def test_a_pod_in_userspace_without_nfs_is_healthy_and_says_why(tailnet_mesh, fake):
    nodes, mesh_vars = tailnet_mesh.load()
    nodes[1].pod = True  # gpu1 is a pod: userspace Tailscale and no kernel NFS are its normal state
    tailnet_mesh.save(nodes, mesh_vars)
    fake.health = {
        "head": head_health(tailscale_health=ts("Running", "100.64.0.1")),
        "gpu1": node_health(nfs="no-kernel-nfs", tailnet=ts("Running", "100.64.0.2", userspace=True)),
        "cpu1": node_health(tailnet=ts("Running", "100.64.0.3", userspace=True)),  # not a pod
    }
    rows, _mlflow, healthy = membership.status(tailnet_mesh, *tailnet_mesh.load())
    by = {r.name: r for r in rows}
    assert by["gpu1"].healthy and by["gpu1"].tailnet.endswith("userspace") and "pod" in by["gpu1"].error
    assert not by["cpu1"].healthy and "NCCL" in by["cpu1"].error
    assert healthy is False
    fake.health["gpu1"] = node_health(slurmd="fatal", tailnet=ts("Running", "100.64.0.2", userspace=True))
    rows, _mlflow, _healthy = membership.status(tailnet_mesh, *tailnet_mesh.load())
    assert not {r.name: r for r in rows}["gpu1"].healthy  # a pod's slurmd that supervisor gave up on


def test_a_node_on_another_tailnet_address_is_unhealthy(tailnet_mesh, fake):
    fake.health = {
        "head": head_health(tailscale_health=ts("Running", "100.64.0.1")),
        "gpu1": node_health(tailnet=ts("Running", "100.64.9.9")),  # Slurm and NFS still use 100.64.0.2
        "cpu1": node_health(tailnet=ts("Running", "100.64.0.3")),
    }
    rows, _mlflow, _healthy = membership.status(tailnet_mesh, *tailnet_mesh.load())
    assert [r.name for r in rows if not r.healthy] == ["gpu1"]


def test_progress_collects_health_facts_per_host():
    import io

    progress = runner.Progress(out=io.StringIO(), live=False)
    res = {"ansible_facts": {"munge_health": "active"}, "changed": False}
    progress.event({"event": "runner_on_ok", "event_data": {"host": "gpu1", "res": res}})
    res = {"ansible_facts": {"slurm_health": {"daemons": {"slurmd": "active"}}}, "changed": False}
    progress.event({"event": "runner_on_ok", "event_data": {"host": "gpu1", "res": res}})
    assert progress.health == {"gpu1": {"munge_health": "active", "slurm_health": {"daemons": {"slurmd": "active"}}}}


def test_health_a_node_reports_outside_its_shape_is_refused_never_shown(mesh, fake, capsys):
    """A hostile node's status words: an escape sequence, a line break, a tailnet address that is not one."""
    hostile = node_health(munge="active\x1b]52;c;aWQK\x07", tailnet=ts("Running", "8.8.8.8\nx"))
    hostile["slurm_health"] = {"daemons": {"slurmd": "active"}, "owner": "x"}
    fake.health = {"head": head_health(), "gpu1": node_health(), "cpu1": hostile}
    nodes, _vars = mesh.load()
    rows, _mlflow, healthy = membership.status(mesh, nodes, {"mesh_tailscale": True})
    cpu1 = next(r for r in rows if r.name == "cpu1")
    assert not healthy and not cpu1.healthy
    assert cpu1.munge == "refused" and "reported what meshctl refuses" in cpu1.error
    assert "munge_health: not a status word" in cpu1.error and "tailscale_health: ipv4" in cpu1.error
    assert "slurm_health: not a mapping" in cpu1.error
    assert "\x1b" not in repr(rows) and "8.8.8.8" not in repr(rows)


@pytest.mark.parametrize(
    "name",
    ["needslogin-1.94.2-proxmox-linux-no-ips.txt", "legacy-2020-format-tailaddr-derp-peers.txt"],
)
def test_the_tailscale_roles_real_reports_pass_the_health_schema(name):
    """What the tailscale role sets (its filter on real `tailscale status --json` captures) is taken as sent."""
    from meshctl import health
    from tests.conftest import fixture_text, load_file

    report = load_file("plugins/filter/tailscale_status.py").tailscale_status(fixture_text(f"tailscale-status/{name}"))
    assert health.checked("tailscale_health", report) == (report, None)
    running = {**report, "backend_state": "Running", "ipv4": "100.101.1.2", "ipv6": "fd7a:115c:a1e0::1",
               "hostname": "gpu1", "key_expiry": "2026-05-01T10:00:00Z", "version": "1.94.2-t1a2b3c4d"}  # fmt: skip
    assert health.checked("tailscale_health", running) == (running, None)
    assert health.checked("tailscale_health", {**report, "ipv6": "fd7a::1\nx"})[1] == "ipv6 is not an IPv6 address"
