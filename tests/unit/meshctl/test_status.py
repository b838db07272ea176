"""meshctl status: what nodes read (module mesh_status), judged by the collection's filter
node_status into one record per node, checked and worded by meshctl; ansible-runner faked.

The fake runs the real filter on raw reads shaped as the module returns them, and hands the
records to meshctl through the run's event handler, as a real run does.
"""

import io
import json

import pytest
from click.testing import CliRunner

from meshctl import core, health, resources, runner, slurm
from meshctl.cli import cli
from meshctl.errors import PartialError
from meshctl.mesh import Mesh
from meshctl.model import Node
from meshctl.ops import apply as apply_op
from meshctl.ops import status as status_op
from meshctl.ops.work import Work, reading

SINFO = {"head": "idle|(null)", "gpu1": "mixed|gpu:rtx_a5000:2", "cpu1": "idle|(null)"}
TS_JSON = {"BackendState": "{state}", "TUN": True, "Self": {"HostName": "x", "TailscaleIPs": ["{ip}"]}}


def flt():
    return resources.plugin("module_utils.mesh_node_status")


def sinfo(**states):
    rows = {**SINFO, **states}
    return {"rc": 0, "stdout": "".join(f"{name}|{row}\n" for name, row in rows.items())}


def ts(state, ipv4, userspace=False):
    data = {
        "BackendState": state,
        "TUN": not userspace,
        "Self": {"HostName": "x", "TailscaleIPs": [ipv4] if ipv4 else []},
    }
    return {"rc": 0, "stdout": json.dumps(data)}


def head_read(mlflow=200, export="active", sinfo_read=None, tailnet=None, **services):
    read = {"services": {"munge": "active", "slurmctld": "active", "slurmd": "active", "nfs-ganesha": export,
                         **services},
            "sinfo": sinfo_read or sinfo(), "tailscale": tailnet, "mount": None,
            "http": {"status": mlflow, "body": "OK" if mlflow == 200 else ""}}  # fmt: skip
    return read


def node_read(nfs="mounted", munge="active", slurmd="active", tailnet=None):
    return {"services": {"munge": munge, "slurmd": slurmd}, "sinfo": None, "tailscale": tailnet, "mount": nfs,
            "http": None}  # fmt: skip


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
    """ansible-runner for status.yml: each host's read judged by the real filter, as the play does."""

    def __init__(self):
        super().__init__()
        self.reads: dict[str, dict] = {}
        self.unreachable: list[str] = []
        self.records: dict[str, dict] = {}  # a record to hand over as it is (a hostile one)

    def run_playbook(self, playbook, inventory, mesh_dir=None, **kw):
        self.append({"playbook": playbook, "inventory": inventory, **kw})
        failures = [runner.Failure(h, "Read the node's services", "ssh: connect to host: Connection timed out")
                    for h in self.unreachable]  # fmt: skip
        if playbook == "site.yml":  # apply: every node reached converges, the others are unreachable
            stats = {h: {"ok": 9} for h in inventory["all"]["hosts"]}
            stats |= {h: {"unreachable": 1} for h in self.unreachable}
            return runner.RunResult("failed" if failures else "successful", 4 if failures else 0, failures, stats)
        stats = {h: {"ok": 3} for h in self.reads} | {h: {"unreachable": 1} for h in self.unreachable}
        hostvars = inventory["all"]["hosts"]
        groups = {g: set(body["hosts"]) for g, body in inventory["all"]["children"].items()}
        controller = sorted(groups["head"])[0]
        progress = runner.Events(runner.Progress(out=io.StringIO(), live=False))
        for host, read in self.reads.items():
            if host in self.unreachable:
                continue
            expect = {"name": host, "address": hostvars[host].get("mesh_address"), "pod": bool(
                      hostvars[host].get("mesh_pod")), "active": hostvars[host]["meshctl_state"] == "active",
                      "head": host in groups["head"], "compute": host in groups["compute"],
                      "tailnet": host in groups["tailnet"], "controller": controller}  # fmt: skip
            if host in groups["head"]:
                expect["share_service"] = "nfs-ganesha"
            head_sinfo = None if controller in self.unreachable else self.reads[controller]["sinfo"]
            record = self.records.get(host) or flt().node_status(read, expect, head_sinfo)
            res = {"ansible_facts": {health.FACT: record}}
            progress.event({"event": "runner_on_ok", "event_data": {"host": host, "res": res}})
        return runner.RunResult("failed" if failures else "successful", 4 if failures else 0, failures, stats,
                                records=progress.records, refused_records=progress.refused_records)  # fmt: skip


@pytest.fixture
def fake(monkeypatch):
    f = FakeStatus()
    monkeypatch.setattr(runner, "run_playbook", f.run_playbook)
    return f


def healthy_reads():
    return {"head": head_read(), "gpu1": node_read(), "cpu1": node_read()}


def test_status_reads_every_node_once_and_judges_it(mesh, fake):
    fake.reads = healthy_reads()
    rows, mlflow, healthy, _volumes = status_op.status(reading(mesh))
    assert fake[0]["playbook"] == "status.yml" and fake[0].get("limit") is None
    assert fake[0]["mitogen"] is False  # one read per node: plain Ansible is faster
    assert set(fake[0]["inventory"]["all"]["hosts"]) == {"head", "gpu1", "cpu1"}
    assert healthy and mlflow == "OK"
    by = {r.name: r for r in rows}
    assert by["gpu1"].gpus == "gpu:rtx_a5000:2" and by["gpu1"].slurm == "mixed"
    assert by["head"].daemon == "slurmctld active, slurmd active" and by["head"].nfs == "exporting"
    assert all(r.error == "" and r.problem == "" for r in rows)


def test_one_down_node_is_the_unreachable_outcome(mesh, fake):
    fake.reads = healthy_reads()
    fake.unreachable = ["cpu1"]
    result = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path), "--json"])
    assert result.exit_code == 7, (result.output, result.exception)
    assert "1 node(s) could not be reached: cpu1" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    out = json.loads(result.output[: result.output.rindex("}") + 1])
    rows = {r["name"]: r for r in out["nodes"]}
    assert rows["head"]["healthy"] and rows["gpu1"]["healthy"]
    assert not rows["cpu1"]["ssh"] and "timed out" in rows["cpu1"]["error"]
    assert out["mlflow"] == "OK" and out["healthy"] is False
    # The head's Slurm view of the node SSH could not reach, and advice that fits a machine that is off.
    assert rows["cpu1"]["slurm"] == "idle"  # Slurm has not noticed yet
    assert "SSH fails" in rows["cpu1"]["error"] and "may have just stopped" in rows["cpu1"]["error"]
    assert "meshctl apply" not in rows["cpu1"]["error"]
    assert fake[-1]["connect_timeout"] == 1  # SSH's whole seconds for the default 0.5, not Ansible's 10
    assert "--timeout 5" in rows["cpu1"]["error"]  # a slow link is one of the causes it names
    CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path), "--timeout", "7"])
    assert fake[-1]["connect_timeout"] == 7
    assert CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path), "--timeout", "0"]).exit_code == 2


def test_a_stopped_node_gets_slurms_view_and_advice_to_start_it(mesh, fake):
    fake.reads = {**healthy_reads(), "head": head_read(sinfo_read=sinfo(cpu1="down*|(null)"))}
    fake.unreachable = ["cpu1"]
    result = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path)], env={"COLUMNS": "300"})
    assert result.exit_code == 7
    assert "down*" in result.output and "start it (it rejoins by itself)" in result.output
    assert "remove-node cpu1 --force" in result.output
    assert "fix: start them" in result.output and "converges the reachable" not in result.output


def test_a_node_whose_machine_the_head_found_taken_away_says_what_was_lost_and_the_fix(mesh, fake):
    watched = {"cpu1": {"instance": "lambda:i1", "provider": "lambda", "id": "i1"}}
    loss = core.mesh_watch.losses(watched, {"lambda": []}, {"cpu1": {"state": "allocated", "reason": ""}})[0]
    said = core.mesh_text.slurm_reason("meshctl: " + core.mesh_watch.reason(loss))  # as meshctl-power gives it
    fake.reads = {**healthy_reads(), "head": head_read(sinfo_read=sinfo(cpu1=f"down|(null)|{said}"))}
    fake.unreachable = ["cpu1"]
    result = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path)], env={"COLUMNS": "400"})
    assert result.exit_code == 7, result.output
    assert "its machine was lost" in result.output and "lambda:i1 terminated by lambda" in result.output
    assert "`meshctl launch` it again, or `meshctl remove-node cpu1`" in result.output, result.output
    assert "start it (it rejoins by itself)" not in result.output


def test_a_lost_rented_nodes_row_says_what_its_machine_cost_until_it_was_lost(mesh, fake):
    """The watch records the lost machine's price (its provider's list) and since when meshctl had it
    (mesh.yml's meshctl_instance_since, passed on in the power plan); status reads that record on
    the head and says the hours and their sum, before the fix."""
    nodes, _ = mesh.load()
    taken_in = 1_800_000_000
    for node in nodes:
        if node.name == "cpu1":
            node.instance, node.since = "lambda:i1", taken_in
    mesh.save(nodes, {})
    hv = {n.name: n.hostvars() for n in mesh.load()[0]}
    watched = core.power_save.watched(hv, {})
    assert watched["cpu1"] == {"instance": "lambda:i1", "provider": "lambda", "id": "i1", "since": taken_in}
    listed = {"lambda": [{"id": "i1", "name": "cpu1", "status": "preempted", "price_per_hour": 3.29}]}
    loss = core.mesh_watch.losses(watched, listed, {"cpu1": {"state": "allocated", "reason": ""}})[0]
    assert loss["price"] == 3.29 and loss["since"] == taken_in
    said = core.mesh_text.slurm_reason("meshctl: " + core.mesh_watch.reason(loss))
    # meshctl-power's record of it (ended/<node>.json), 2.5 h after meshctl took it in
    ended = {"node": "cpu1", "at": taken_in + 9000, "instances": ["lambda:i1"], "why": loss["why"], "lost": True,
             "pool": "", "offered": 0, "short": 0, "price": loss["price"], "since": loss["since"]}  # fmt: skip
    head = head_read(sinfo_read=sinfo(cpu1=f"down|(null)|{said}"))
    fake.reads = {**healthy_reads(), "head": {**head, "ended": {"cpu1": json.dumps(ended)}}}
    fake.unreachable = ["cpu1"]
    result = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path)], env={"COLUMNS": "400"})
    assert result.exit_code == 7, result.output
    assert ("lambda:i1 preempted by lambda after 2.5 h at $3.29/h ($8.22); its jobs requeued: `meshctl launch` it "
            "again, or `meshctl remove-node cpu1`") in result.output, result.output  # fmt: skip
    # A record of another machine (the node launched again since) says nothing of this one's cost.
    fake.reads["head"]["ended"] = {"cpu1": json.dumps({**ended, "instances": ["lambda:i0"]})}
    result = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path)], env={"COLUMNS": "400"})
    assert "lambda:i1 preempted by lambda; its jobs requeued" in result.output and "$8.22" not in result.output


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ('{"node": "cpu1", "at": 100, "instances": ["lambda:i1"], "why": "preempted by lambda", "lost": true}', True),
        (
            '{"node": "cpu1", "at": 100, "instances": ["lambda:i1"], "why": "given back when idle", "lost": false}',
            False,
        ),
        ('{"node": "cpu2", "at": 100, "instances": ["lambda:i1"], "why": "x", "lost": true}', False),  # not its name
        ('{"node": "cpu1", "at": "100", "instances": ["lambda:i1"], "why": "x", "lost": true}', False),
        ('{"node": "cpu1", "at": 100, "instances": ["lambda:i1"], "why": "a\\u001b[2Jb", "lost": true}', False),
        ("[1, 2]", False),
    ],
)
def test_the_heads_records_of_lost_machines_are_read_as_data(text, kept):
    rows = flt().ended_rows({"cpu1": text})
    assert ("cpu1" in rows) is kept
    if kept:
        assert rows["cpu1"] == {"instance": "lambda:i1", "why": "preempted by lambda", "at": 100, "price": None,
                                "since": None}  # fmt: skip
        record = {"name": "head", "services": {}, "problem": "", "healthy": True, "ended": rows}
        assert health.checked("head", record)[1] is None
        bad = {**rows["cpu1"], "price": "3.29"}
        assert "price is not $/h" in health.checked("head", {**record, "ended": {"cpu1": bad}})[1]


def with_addresses(read, **addresses):
    """The head's read with each node's address in Slurm beside its rows (sinfo --format=%N|%o)."""
    wanted = {"head": "100.64.0.1", "gpu1": "100.64.0.2", "cpu1": "100.64.0.3", **addresses}
    read["sinfo"] = {
        **read["sinfo"],
        "addresses": {"rc": 0, "stdout": "".join(f"{n}|{a}\n" for n, a in wanted.items())},
    }
    return read


def test_a_node_address_in_slurm_other_than_meshctls_record_is_a_problem_named_with_both(mesh, fake):
    """A node's root changed gpu1's NodeAddr (scontrol update, with the munge key)."""
    fake.reads = {**healthy_reads(), "head": with_addresses(head_read())}
    rows, _mlflow, healthy, _volumes = status_op.status(reading(mesh))
    assert healthy and all(r.problem == "" for r in rows)  # every NodeAddr is the record's
    fake.reads = {**healthy_reads(), "head": with_addresses(head_read(), gpu1="100.64.0.3", cpu1="$(reboot)")}
    rows, _mlflow, healthy, _volumes = status_op.status(reading(mesh))
    by_name = {r.name: r for r in rows}
    assert not healthy and by_name["head"].problem == ""
    assert by_name["gpu1"].problem == "address" and not by_name["gpu1"].healthy
    assert "Slurm has its address as 100.64.0.3, meshctl recorded 100.64.0.2" in by_name["gpu1"].error
    assert "sets it back" in by_name["gpu1"].error
    assert (
        "not-an-address, meshctl recorded 100.64.0.3" in by_name["cpu1"].error and "reboot" not in by_name["cpu1"].error
    )


def test_a_cloud_node_powered_down_has_its_own_name_as_address_and_that_is_no_problem():
    rows = flt().slurm_addresses(
        {"addresses": {"rc": 0, "stdout": "pool-a-1|pool-a-1\ngpu1|100.64.0.2\nEVIL|1.2.3.4\n"}}
    )
    assert rows == {"gpu1": "100.64.0.2"}


def test_fstab_only_counts_as_healthy_but_is_explained(mesh, fake):
    fake.reads = {**healthy_reads(), "cpu1": node_read(nfs="fstab-only")}
    rows, _mlflow, healthy, _volumes = status_op.status(reading(mesh))
    cpu1 = next(r for r in rows if r.name == "cpu1")
    assert cpu1.healthy and cpu1.problem == "no-nfs-kernel" and "cannot mount NFS" in cpu1.error
    assert healthy


@pytest.mark.parametrize(
    ("head", "gpu1", "problem", "says"),
    [
        (head_read(), node_read(slurmd="inactive"), "service", "slurmd not active: `meshctl apply --limit gpu1`"),
        (head_read(), node_read(munge="failed"), "service", "munge not active"),
        (head_read(), node_read(nfs="not-mounted"), "share", "the share is not-mounted"),
        (head_read(), node_read(nfs="missing"), "share", "the share is missing"),
        (head_read(sinfo_read=sinfo(gpu1="down*|gpu:rtx_a5000:2")), node_read(), "slurm", "Slurm sees it down*"),
        (head_read(sinfo_read=sinfo(gpu1="drained|gpu:rtx_a5000:2")), node_read(), "slurm", "Reason="),
        (head_read(sinfo_read=sinfo(gpu1="idle*|gpu:rtx_a5000:2")), node_read(), "slurm", "idle*"),
    ],
    ids=["slurmd", "munge", "nfs", "fstab", "slurm-down", "drained", "not-responding"],
)
def test_each_fault_of_a_node_is_named_with_its_fix(mesh, fake, head, gpu1, problem, says):
    fake.reads = {"head": head, "gpu1": gpu1, "cpu1": node_read()}
    rows, _mlflow, healthy, _volumes = status_op.status(reading(mesh))
    by = {r.name: r for r in rows}
    assert healthy is False and not by["gpu1"].healthy and by["gpu1"].problem == problem
    assert says in by["gpu1"].error
    assert by["cpu1"].healthy and by["head"].healthy


@pytest.mark.parametrize(
    "head",
    [
        head_read(mlflow=0),
        head_read(mlflow=502),
        head_read(export="failed"),
        head_read(sinfo_read={"rc": 1, "stdout": ""}),
    ],
    ids=["mlflow-down", "mlflow-502", "export", "sinfo-fails"],
)
def test_each_fault_of_the_head_is_unhealthy(mesh, fake, head):
    fake.reads = {**healthy_reads(), "head": head}
    _rows, _mlflow, healthy, _volumes = status_op.status(reading(mesh))
    assert healthy is False


@pytest.fixture
def tailnet_mesh(mesh):
    nodes, _ = mesh.load()
    mesh.save(nodes, {"mesh_tailscale": True})
    return mesh


def test_tailnet_column_and_health(tailnet_mesh, fake):
    fake.reads = {
        "head": head_read(tailnet=ts("Running", "100.64.0.1")),
        "gpu1": node_read(tailnet=ts("Running", "100.64.0.2", userspace=True)),  # no TUN device
        "cpu1": node_read(tailnet=ts("NeedsLogin", None)),
    }
    rows, _mlflow, healthy, _volumes = status_op.status(reading(tailnet_mesh))
    by = {r.name: r for r in rows}
    assert by["head"].healthy and by["head"].tailnet == "Running 100.64.0.1"
    assert not by["gpu1"].healthy and "NCCL" in by["gpu1"].error and by["gpu1"].tailnet.endswith("userspace")
    assert not by["cpu1"].healthy and "rotate-authkey --stored" in by["cpu1"].error
    assert by["cpu1"].tailnet == "NeedsLogin -"
    assert healthy is False


def test_tailscaled_down_or_unreadable_is_unhealthy(tailnet_mesh, fake):
    fake.reads = {
        "head": head_read(tailnet=ts("Running", "100.64.0.1")),
        "gpu1": node_read(tailnet={"rc": 1, "stdout": ""}),
        "cpu1": node_read(tailnet={"rc": 0, "stdout": "not json"}),
    }
    rows, _mlflow, _healthy, _volumes = status_op.status(reading(tailnet_mesh))
    by = {r.name: r for r in rows}
    assert by["gpu1"].tailnet == "down -" and by["gpu1"].problem == "tailnet"
    assert by["cpu1"].tailnet == "unreadable -" and by["cpu1"].problem == "tailnet"


def test_a_pod_in_userspace_without_nfs_is_healthy_and_says_why(tailnet_mesh, fake):
    nodes, mesh_vars = tailnet_mesh.load()
    nodes[1].pod = True  # gpu1 is a pod: userspace Tailscale and no kernel NFS are its normal state
    tailnet_mesh.save(nodes, mesh_vars)
    fake.reads = {
        "head": head_read(tailnet=ts("Running", "100.64.0.1")),
        "gpu1": node_read(nfs="fstab-only", tailnet=ts("Running", "100.64.0.2", userspace=True)),
        "cpu1": node_read(tailnet=ts("Running", "100.64.0.3", userspace=True)),  # not a pod
    }
    rows, _mlflow, healthy, _volumes = status_op.status(reading(tailnet_mesh))
    by = {r.name: r for r in rows}
    assert by["gpu1"].healthy and by["gpu1"].tailnet.endswith("userspace") and "pod" in by["gpu1"].error
    assert not by["cpu1"].healthy and "NCCL" in by["cpu1"].error
    assert healthy is False
    fake.reads["gpu1"] = node_read(slurmd="fatal", tailnet=ts("Running", "100.64.0.2", userspace=True))
    rows, _mlflow, _healthy, _volumes = status_op.status(reading(tailnet_mesh))
    assert not {r.name: r for r in rows}["gpu1"].healthy  # a pod's slurmd that supervisor gave up on


def test_a_node_on_another_tailnet_address_is_unhealthy(tailnet_mesh, fake):
    fake.reads = {
        "head": head_read(tailnet=ts("Running", "100.64.0.1")),
        "gpu1": node_read(tailnet=ts("Running", "100.64.9.9")),  # Slurm and NFS still use 100.64.0.2
        "cpu1": node_read(tailnet=ts("Running", "100.64.0.3")),
    }
    rows, _mlflow, _healthy, _volumes = status_op.status(reading(tailnet_mesh))
    assert [r.name for r in rows if not r.healthy] == ["gpu1"]


def test_a_pending_node_is_unhealthy_whatever_it_reads(mesh, fake):
    nodes, mesh_vars = mesh.load()
    nodes[2].state = "pending"
    mesh.save(nodes, mesh_vars)
    fake.reads = healthy_reads()
    rows, _mlflow, healthy, _volumes = status_op.status(reading(mesh))
    cpu1 = next(r for r in rows if r.name == "cpu1")
    assert not healthy and cpu1.problem == "pending" and "meshctl apply" in cpu1.error


def test_every_problem_the_filter_names_has_advice():
    assert set(health.problems()) == set(status_op.ADVICE)
    assert set(flt().HEALTHY_PROBLEMS) <= {"", *status_op.ADVICE}


def test_progress_keeps_one_checked_record_per_host():
    progress = runner.Events(runner.Progress(out=io.StringIO(), live=False))
    record = flt().node_status(node_read(), {"name": "gpu1", "active": True, "compute": True})
    progress.event({"event": "runner_on_ok", "event_data": {"host": "gpu1", "res": {"ansible_facts": {
        health.FACT: record}}}})  # fmt: skip
    progress.event(
        {"event": "runner_on_ok", "event_data": {"host": "cpu1", "res": {"ansible_facts": {health.FACT: record}}}}
    )  # fmt: skip: gpu1's record handed over as cpu1's
    assert progress.records == {"gpu1": record}
    assert progress.refused_records == {"cpu1": "the record names another node"}


def hostile_record():
    record = flt().node_status(node_read(), {"name": "cpu1", "active": True, "compute": True})
    return record


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"services": {"munge": "active\x1b]52;c;aWQK\x07"}}, "services is not a mapping of service words"),
        ({"tailnet": {"backend_state": "Running", "ipv4": "8.8.8.8\nx", "userspace": False}}, "tailnet: ipv4"),
        ({"slurm": {"state": "idle", "gres": "gpu\x1b[2J", "ready": True, "reason": ""}}, "slurm: node cpu1's GRES"),
        ({"slurm": {"state": "down", "gres": "", "ready": False, "reason": "x\x1b]0;t\x07"}}, "cpu1's reason"),
        ({"problem": "all good"}, "problem is not one meshctl knows"),
        ({"healthy": "yes"}, "sinfo_ok or healthy"),
        ({"owner": "x"}, "not a status record"),
        ({"share": "mounted; rm -rf"}, "share is not a status word"),
    ],
    ids=["escape", "address", "gres", "reason", "problem", "healthy", "key", "share"],
)
def test_a_record_outside_its_shape_is_refused_never_shown(mesh, fake, change, why):
    """What a hostile node could slip into its record: never printed, the row unhealthy and named."""
    fake.reads = healthy_reads()
    fake.records = {"cpu1": {**hostile_record(), **change}}
    nodes, _vars = mesh.load()
    rows, _mlflow, healthy, _volumes = status_op.status(Work(mesh, nodes, {}))
    cpu1 = next(r for r in rows if r.name == "cpu1")
    assert not healthy and not cpu1.healthy
    assert "reported what meshctl refuses" in cpu1.error and why in cpu1.error
    assert "\x1b" not in repr(rows) and "8.8.8.8" not in repr(rows) and "rm -rf" not in repr(rows)


def test_a_hostile_sinfo_line_is_left_out_or_worded():
    rows = flt().slurm_rows({"rc": 0, "stdout": "gpu1|idle\x1b[2J|(null)|none\nEVIL NAME|idle|x|\n"
                                                  "cpu1|drained|gpu:a|bad\x1b]0;x\x07\nn2|idle\n"
                                                  "n3|mixed|gpu:a100:8|none\n"})  # fmt: skip
    assert rows == {"gpu1": {"state": "unknown", "gres": "(null)", "ready": False, "reason": ""},
                    "cpu1": {"state": "drained", "gres": "gpu:a", "ready": False, "reason": "?"},
                    "n3": {"state": "mixed", "gres": "gpu:a100:8", "ready": True, "reason": ""}}  # fmt: skip


@pytest.mark.parametrize(
    "name",
    ["needslogin-1.94.2-proxmox-linux-no-ips.txt", "legacy-2020-format-tailaddr-derp-peers.txt"],
)
def test_the_tailscale_roles_real_reports_pass_the_health_schema(name):
    """What the tailscale role sets (its filter on real `tailscale status --json` captures) is taken as sent."""
    from meshctl import health
    from tests.conftest import fixture_text, load_file

    parse = load_file("plugins/module_utils/mesh_tailscale_status.py").tailscale_status
    report = parse(fixture_text(f"tailscale-status/{name}"))
    record = flt().node_status(node_read(tailnet={"rc": 0, "stdout": fixture_text(f"tailscale-status/{name}")}),
                               {"name": "gpu1", "active": True, "tailnet": True})  # fmt: skip
    assert record["tailnet"] == report and health.checked("gpu1", record) == (record, None)
    running = {**report, "backend_state": "Running", "ipv4": "100.101.1.2", "ipv6": "fd7a:115c:a1e0::1",
               "hostname": "gpu1", "key_expiry": "2026-05-01T10:00:00Z", "version": "1.94.2-t1a2b3c4d"}  # fmt: skip
    assert health.checked("gpu1", {**record, "tailnet": running}) == ({**record, "tailnet": running}, None)
    bad = {**record, "tailnet": {**report, "ipv6": "fd7a::1\nx"}}
    assert health.checked("gpu1", bad)[1] == "tailnet: ipv6 is not an IPv6 address"


def test_status_shows_each_rented_nodes_price_and_the_total(mesh, fake, monkeypatch):
    from meshctl import cloud
    from tests.cloud_standin import KEY, Standin

    monkeypatch.setattr(status_op, "PRICE_WAIT", 30.0)  # a loaded test machine: the stand-in's answer is awaited
    with Standin("runpod") as api:
        monkeypatch.setenv("MESHCTL_RUNPOD_API_URL", api.url)
        pod = api.add("gpu1", "NVIDIA RTX A5000", 2, 0.54)
        api.add("elsewhere", "NVIDIA RTX 4090", 1, 0.69)  # not a node: not in the mesh's total
        cloud.add_account(mesh, {}, "runpod", KEY)
        nodes, mesh_vars = mesh.load()
        nodes[1].instance, nodes[1].provider = f"runpod:{pod.id}", "runpod"
        mesh.save(nodes, mesh_vars)
        fake.reads = healthy_reads()
        result = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path), "--json"])
        out = json.loads(result.output[: result.output.rindex("}") + 1])
        assert {r["name"]: r["price_per_hour"] for r in out["nodes"]} == {"head": None, "gpu1": 0.54, "cpu1": None}
        assert out["cost_per_hour"] == 0.54
        text = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path)], env={"COLUMNS": "250"}).output
        assert "$/h" in text and "cost: $0.54/h for the rented nodes" in text
        assert {r["name"]: r["stopped_bills"] for r in out["nodes"]} == {"head": "", "gpu1": "", "cpu1": ""}
        api.backend.stop(pod)
        rows, _mlflow, _healthy, _volumes = status_op.status(reading(mesh))
        assert {r.name: r.price_per_hour for r in rows}["gpu1"] == 0.0  # stopped: no compute an hour
        # ... but its volume disk still bills (Runpod's Manage Pods page): the row says so.
        bills = {r.name: r.stopped_bills for r in rows}
        assert bills["gpu1"].startswith("its volume disk") and bills["head"] == bills["cpu1"] == "", bills
        text = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path)], env={"COLUMNS": "300"}).output
        gpu1 = next(line for line in text.splitlines() if line.strip().startswith("gpu1"))
        assert "stopped; still billed: its volume disk" in gpu1, text
        # A network volume nothing mounts bills by the month: said, with the fix; the nodes as healthy.
        assert "network volume" not in text and out["unused_volumes"] == []
        api.add_volume("vol-left", "EU-RO-1", 100)
        text = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path)], env={"COLUMNS": "300"}).output
        assert (
            "runpod network volume vol-left (volume-vol-left, 100 GB, EU-RO-1, $7.00/month) is used by no "
            "instance: it bills until it is deleted (delete it at Runpod once its data is saved" in text
        ), text
        got = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path), "--json"])
        out = json.loads(got.output[: got.output.rindex("}") + 1])
        assert [v["id"] for v in out["unused_volumes"]] == ["vol-left"] and got.exit_code == result.exit_code


def test_status_does_not_wait_for_a_provider_that_does_not_answer_and_shows_a_question_mark(mesh, fake, monkeypatch):
    """Offline or a slow provider: the nodes' table comes once they are read, the
    price of a rented node `?`, never after the provider's own timeouts."""
    import socket
    import threading

    from meshctl import cloud
    from tests.cloud_standin import KEY

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts, never answers
    accepted = threading.Event()
    threading.Thread(target=lambda: (silent.accept(), accepted.set()), daemon=True).start()
    monkeypatch.setenv("MESHCTL_RUNPOD_API_URL", f"http://127.0.0.1:{silent.getsockname()[1]}/v1")
    monkeypatch.setattr(status_op, "PRICE_WAIT", 0.2)
    cloud.add_account(mesh, {}, "runpod", KEY, check=False)
    nodes, mesh_vars = mesh.load()
    nodes[1].instance, nodes[1].provider = "runpod:pod-1", "runpod"
    mesh.save(nodes, mesh_vars)
    fake.reads = healthy_reads()
    try:
        text = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path)], env={"COLUMNS": "250"}).output
        assert accepted.wait(5)  # the provider was asked, and had not answered when the table came
        gpu1 = next(line for line in text.splitlines() if line.strip().startswith("gpu1"))
        assert "?" in gpu1.split()
        assert "what the `?` nodes bill (their provider did not answer)" in text
        rows, _mlflow, _healthy, _volumes = status_op.status(reading(mesh))
        assert {r.name: r.price_unknown for r in rows} == {"head": False, "gpu1": True, "cpu1": False}
    finally:
        silent.close()


def test_status_without_provider_accounts_has_no_price_column(mesh, fake):
    fake.reads = healthy_reads()
    text = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path)], env={"COLUMNS": "250"}).output
    assert "$/h" not in text and "cost:" not in text


def test_slurms_reason_for_a_node_it_took_out_is_shown(mesh, fake):
    reason = "meshctl: paperspace could not start it: Machine type is out of capacity [slurm@2026-11-24T22:50:01]"
    fake.reads = {**healthy_reads(), "head": head_read(sinfo_read=sinfo(gpu1=f"down~|(null)|{reason}"))}
    fake.unreachable = ["gpu1"]
    rows, _mlflow, healthy, _volumes = status_op.status(reading(mesh))
    gpu1 = next(r for r in rows if r.name == "gpu1")
    assert not healthy and not gpu1.healthy and gpu1.slurm == "down~"
    assert "Slurm's reason: meshctl: paperspace could not start it" in gpu1.error
    fake.unreachable = []
    fake.reads["head"] = head_read(sinfo_read=sinfo(gpu1="drained|(null)|GPU count 1 of 2 [root@2026-11-24T22:51]"))
    rows, _mlflow, _healthy, _volumes = status_op.status(reading(mesh))
    gpu1 = next(r for r in rows if r.name == "gpu1")
    assert gpu1.problem == "slurm" and "Slurm sees it drained (GPU count 1 of 2" in gpu1.error


def test_a_node_that_started_without_a_gpu_shows_slurms_word_and_the_missing_device(mesh, fake):
    """slurmd-start without /dev/nvidia1: Slurm calls the registration invalid (fewer GPUs than the
    node's record) and the health check's drain names the device (recorded on Slurm 22.05)."""
    row = "inval|gpu:rtx_a5000:1|meshctl health: GPUs seen 1 of 2, missing /dev/nvidia1"
    fake.reads = {**healthy_reads(), "head": head_read(sinfo_read=sinfo(gpu1=row))}
    rows, _mlflow, healthy, _volumes = status_op.status(reading(mesh))
    gpu1 = next(r for r in rows if r.name == "gpu1")
    assert not healthy and gpu1.problem == "slurm" and gpu1.gpus == "gpu:rtx_a5000:1"
    assert "Slurm sees it inval (meshctl health: GPUs seen 1 of 2, missing /dev/nvidia1)" in gpu1.error


def test_a_node_stopped_while_idle_is_healthy_and_said_so(mesh, fake):
    fake.reads = {**healthy_reads(), "head": head_read(sinfo_read=sinfo(gpu1="idle~|(null)|", cpu1="idle#|(null)|"))}
    fake.unreachable = ["gpu1", "cpu1"]
    rows, _mlflow, healthy, _volumes = status_op.status(reading(mesh))
    by = {r.name: r for r in rows}
    assert healthy and by["gpu1"].healthy and "stopped while idle (idle_stop)" in by["gpu1"].error
    assert by["cpu1"].healthy and "starting: a job asked for it" in by["cpu1"].error


@pytest.mark.parametrize("state", ["idle~", "idle%"])
def test_apply_skips_a_node_stopped_while_idle_and_says_so(mesh, fake, state):
    """idle~: stopped; idle%: being stopped (the state Slurm printed, tests/fixtures/sinfo/)."""
    fake.reads = {**healthy_reads(), "head": head_read(sinfo_read=sinfo(gpu1=f"{state}|(null)|"))}
    fake.unreachable = ["gpu1"]
    said = io.StringIO()
    progress = runner.Progress(out=said, live=False)
    result = apply_op.apply(reading(mesh), progress)  # no PartialError: gpu1 is meant to be off
    assert [call["playbook"] for call in fake] == ["site.yml", "status.yml"]
    assert set(fake[1]["limit"].split(",")) - {"localhost"} == {"head"}  # the head's Slurm view, no node
    stopped = "stopped" if state == "idle~" else "being stopped"
    assert f"gpu1: {stopped} while idle (idle_stop); not changed" in said.getvalue()
    assert "`meshctl apply --limit gpu1`" in said.getvalue() and result.unreachable == ["gpu1"]


def test_apply_still_names_a_node_that_is_off_without_slurm_having_stopped_it(mesh, fake):
    refused = "down~|(null)|meshctl: paperspace could not start it: out of capacity"  # the power program's mark
    fake.reads = {**healthy_reads(), "head": head_read(sinfo_read=sinfo(gpu1="down*|(null)|Not responding",
                                                                        cpu1=refused))}  # fmt: skip
    fake.unreachable = ["gpu1", "cpu1"]
    with pytest.raises(PartialError) as caught:
        apply_op.apply(reading(mesh), runner.Progress(out=io.StringIO(), live=False))
    assert set(caught.value.unreachable) == {"gpu1", "cpu1"}  # down, or marked down powered off: not resting


def test_a_reason_slurm_2411_kept_does_not_make_a_stopped_node_a_lost_one(mesh, fake):
    """Slurm 24.11 keeps a resumed node's reason beside its later states: idle~ with an old reason is
    stopped while idle (tests/fixtures/sinfo/slurm-24.11/powered_down.txt)."""
    kept = "idle~|(null)|recorded reboot : reboot issued : reboot timed out"
    fake.reads = {**healthy_reads(), "head": head_read(sinfo_read=sinfo(gpu1=kept))}
    fake.unreachable = ["gpu1"]
    result = apply_op.apply(reading(mesh), runner.Progress(out=io.StringIO(), live=False))
    assert result.unreachable == ["gpu1"]  # skipped and said, not a failure


def test_resting_is_stopped_or_starting_by_power_saving_and_nothing_else():
    assert slurm.resting_state({"state": "idle~"}) == "stopped while idle (idle_stop)"
    assert slurm.resting_state({"state": "idle#"}) == "starting: a job asked for it"
    assert slurm.resting_state({"state": "idle%"}) == "being stopped while idle (idle_stop)"
    assert slurm.resting_state({"state": "alloc#"}) == "starting: a job asked for it"
    for off in ({"state": "down~", "reason": "meshctl: paperspace could not start it"}, {"state": "down~"},
                {"state": "down*"}, {"state": "idle*"}, {"state": "idle"}, {}, {"state": "drained~"},
                {"state": "draining!", "reason": "POWER_DOWN_ASAP"}):  # fmt: skip
        assert slurm.resting_state(off) is None, off
    # a reason Slurm 24.11 kept from before is history: the state says whose the node is
    assert slurm.resting_state({"state": "idle~", "reason": "recorded reboot : reboot timed out"}) is not None


def test_ctrl_c_during_status_is_exit_130_not_a_head_to_start(mesh, monkeypatch):
    from click.testing import CliRunner

    from meshctl import runner
    from meshctl.cli import cli

    monkeypatch.setattr(runner, "run_playbook", lambda *a, **kw: runner.RunResult("canceled", 254))
    out = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path)])
    assert out.exit_code == 130 and "during the Ansible run" in out.output
    assert "cannot be reached" not in out.output and "start it" not in out.output


@pytest.mark.parametrize(
    ("state", "ready"),
    [("idle%", True), ("idle~", True), ("idle#", True), ("idle!", True), ("idle$", True), ("idle@", True),
     ("idle^", True), ("idle-", True), ("idle+", True), ("idle*", False), ("down*", False), ("drained", False)],
)  # fmt: skip
def test_every_flag_sinfo_appends_to_a_state_is_read_not_turned_to_unknown(state, ready):
    """`sinfo -h -N -o %T` appends one of `~ % # ! * $ @ ^ - +` to a state word (Slurm's sinfo(1), NODE
    STATE CODES): a node Slurm is powering down (`idle%`) is idle, not `unknown`."""
    rows = flt().slurm_rows({"rc": 0, "stdout": f"gpu1|{state}|(null)|none\n"})
    assert rows["gpu1"]["state"] == state and rows["gpu1"]["ready"] is ready
    assert slurm.resting_state({"state": "idle%"}) is not None


POOL = {"name": "h100", "gpu": "H100", "gpus": 1, "max_nodes": 3, "max_price": 3.5, "providers": ["any"],
        "idle": 600, "cpus": 8, "memory_mb": 65536}  # fmt: skip


def test_status_shows_a_pool_nodes_machine_its_price_and_since_when_before_apply_takes_it_in(mesh, fake, monkeypatch):
    """A burst pool's node the head rented: its row from the head's Slurm, the
    provider's list (instance, $/h) and the head's record of renting it (since when); a node at
    rest, powered down with no machine, only named under the table; a node Slurm took out with
    meshctl's reason unhealthy, its reason shown. Records outside their shape are left out."""
    import time

    from meshctl import cloud
    from tests.cloud_standin import KEY, Standin

    monkeypatch.setattr(status_op, "PRICE_WAIT", 30.0)
    nodes, mesh_vars = mesh.load()
    mesh.save(nodes, {**mesh_vars, "burst_pools": [POOL]})
    with Standin("lambda") as api:
        monkeypatch.setenv("MESHCTL_LAMBDA_API_URL", api.url)
        machine = api.add("h100-1", "gpu_1x_h100_sxm5", 1, 3.29)
        cloud.add_account(mesh, {}, "lambda", KEY)
        since = int(time.time()) - 600
        record = {"node": "h100-1", "pool": "h100", "instance": f"lambda:{machine.id}", "price": 3.29, "since": since}
        rented = {"h100-1": json.dumps(record),
                  "h100-2": json.dumps({**record, "node": "h100-2", "instance": "lambda:x; rm -rf /"}),
                  "h100-3": "not json", "h100-4": json.dumps({**record, "node": "h100-1"})}  # fmt: skip
        assert flt().rented_rows(rented) == {"h100-1": {k: v for k, v in record.items() if k != "node"}}
        earlier = {f"h100-1@{n}": json.dumps({**record, "instance": f"lambda:old{n}"}) for n in range(100)}
        assert flt().rented_rows({**earlier, **rented})["h100-1"]["instance"] == record["instance"]  # now's, not before
        read = head_read(sinfo_read=sinfo(**{"h100-1": "mixed|gpu:h100:1|", "h100-2": "idle~|gpu:h100:1|",
                                             "h100-3": "down~|gpu:h100:1|meshctl: h100-3: no machine could be "
                                             "rented"}))  # fmt: skip
        fake.reads = {**healthy_reads(), "head": {**read, "rented": rented}}
        rows, _mlflow, healthy, _volumes = status_op.status(reading(mesh))
        by = {r.name: r for r in rows}
        assert "h100-2" not in by  # powered down, no machine: named under the table
        one = by["h100-1"]
        assert (one.pool, one.instance, one.price_per_hour, one.since) == ("h100", f"lambda:{machine.id}", 3.29, since)
        assert one.healthy and not one.listed and one.slurm == "mixed" and one.gpus == "gpu:h100:1"
        assert "rented lambda:" in one.error and "(10 min)" in one.error and "`meshctl apply` takes it" in one.error
        three = by["h100-3"]
        assert not three.healthy and not healthy and three.instance == "" and three.since is None
        assert "Slurm's reason: meshctl: h100-3: no machine could be rented" in three.error
        assert "again after the cool-down" in three.error
        out = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path), "--json"]).output
        shown = json.loads(out[: out.rindex("}") + 1])
        assert shown["pools"] == [{"name": "h100", "gres": "gpu:h100:1", "max_price": 3.5, "resting": ["h100-2"]}]
        assert shown["cost_per_hour"] == 3.29
        text = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path)], env={"COLUMNS": "300"}).output
        line = next(line for line in text.splitlines() if line.strip().startswith("h100-1"))
        assert "pool h100" in line and "3.29" in line, text
        assert "powered down with no machine: h100-2; a job asking --gres=gpu:h100:1 rents one" in text
        # Taken into mesh.yml by an apply: its own row, read over SSH, still its pool's and since when.
        nodes, mesh_vars = mesh.load()
        nodes.append(Node("h100-1", "203.0.113.9", state="active", mesh_address="100.64.0.9", provider="lambda",
                          instance=f"lambda:{machine.id}"))  # fmt: skip
        mesh.save(nodes, mesh_vars)
        fake.reads["h100-1"] = node_read()
        rows, _mlflow, _healthy, _volumes = status_op.status(reading(mesh))
        one = next(r for r in rows if r.name == "h100-1")
        assert one.listed and one.ssh and one.role == "pool h100" and one.since == since and one.price_per_hour == 3.29
        # Given back: the provider runs it no more; the head's record no longer makes it rented, and
        # powered down it is said to be its pool's again.
        api.backend.terminate(machine)
        rows, _mlflow, _healthy, _volumes = status_op.status(reading(mesh))
        one = next(r for r in rows if r.name == "h100-1")
        assert one.instance == "" and one.since is None
        fake.unreachable = ["h100-1"]
        fake.reads["head"] = {**read, "sinfo": sinfo(**{"h100-1": "idle~|gpu:h100:1|", "h100-2": "idle~|gpu:h100:1|",
                                                         "h100-3": "idle~|gpu:h100:1|"}), "rented": rented}  # fmt: skip
        rows, _mlflow, healthy, _volumes = status_op.status(reading(mesh))
        one = next(r for r in rows if r.name == "h100-1")
        assert one.healthy and one.error.startswith("given back to pool h100"), one


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"pool": "H100 pool"}, "pool is not a pool's name"),
        ({"instance": "aws:i-1"}, "instance is not provider:id"),
        ({"price": "3.29"}, "price is not $/h"),
        ({"since": True}, "since is not a time"),
        ({"extra": 1}, "not pool, instance, price, since"),
    ],
)
def test_a_heads_rented_record_outside_its_shape_is_refused(change, why):
    row = {"pool": "h100", "instance": "lambda:abc", "price": 3.29, "since": 1700000000}
    record = {"name": "head", "services": {}, "problem": "", "healthy": True, "rented": {"h100-1": row}}
    assert health.checked("head", record)[1] is None
    assert why in health.checked("head", {**record, "rented": {"h100-1": {**row, **change}}})[1]
