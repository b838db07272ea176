"""Burst pools: what a pool may say and the Slurm lines it gives (module_utils/mesh_burst.py), the
power plan and the head's program for its nodes, and the rent's limits (meshctl/ops/burst.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from meshctl import core
from meshctl.ops.work import Work
from tests.cloud_standin import KEY, Standin
from tests.unit.collection.test_power_save import program  # noqa: F401 (the fixture)

burst = core.mesh_burst
PROVIDERS = ("lambda", "runpod", "paperspace")
POOL = {"name": "h100", "gpu": "H100", "gpus": 1, "max_nodes": 2, "max_price": 3.5, "providers": ["any"],
        "idle": 600, "cpus": 8, "memory_mb": 65536}  # fmt: skip


def test_a_pool_gives_cloud_nodes_after_every_other_node_its_partition_and_its_gres():
    lines = burst.slurm_lines([POOL], ["meshctl", "gpu"], "meshctl_idle_", " AllowGroups=meshjobs")
    assert lines == [
        "NodeName=h100-[1-2] State=CLOUD CPUs=8 RealMemory=65536 Gres=gpu:h100:1 "
        "Feature=meshctl,gpu,h100,meshctl_burst,meshctl_idle_600 Weight=1000",
        "PartitionName=h100 Nodes=h100-[1-2] MaxTime=INFINITE State=UP AllowGroups=meshjobs",
    ]
    assert burst.gres_lines([POOL, {**POOL, "name": "big", "gpu": "RTX 4090", "gpus": 4, "max_nodes": 1}]) == [
        "NodeName=h100-[1-2] Name=gpu Type=h100 File=/dev/nvidia0",
        "NodeName=big-1 Name=gpu Type=rtx_4090 File=/dev/nvidia[0-3]",
    ]
    assert burst.pool_nodes([POOL]) == {"h100-1": POOL, "h100-2": POOL}
    assert burst.pool_of("h100-3", [POOL]) is None


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"name": "H100"}, "lower-case letter"),
        ({"name": "main"}, "already names"),
        ({"name": "meshctl_on"}, "lower-case"),
        ({"gpu": "H100; rm -rf"}, "gpu must be"),
        ({"gpus": 0}, "gpus must be"),
        ({"gpus": 1.5}, "gpus must be"),
        ({"max_nodes": 65}, "max_nodes must be"),
        ({"max_price": 0}, "max_price must be"),
        ({"max_price": True}, "max_price must be"),
        ({"idle": 30}, "idle must be"),
        ({"providers": ["aws"]}, "providers"),
        ({"providers": ["any", "lambda"]}, "providers"),
        ({"weight": 3}, "unknown key"),
    ],
)
def test_a_pool_that_is_not_one_is_refused_naming_what(change, said):
    problems = burst.pool_problems({**POOL, **change}, PROVIDERS)
    assert any(said in p for p in problems), problems
    with pytest.raises(burst.BurstError):
        burst.check_pools([{**POOL, **change}], PROVIDERS)


def test_pools_twice_and_a_list_that_is_none_are_refused():
    assert "declared twice" in " ".join(burst.pools_problems([POOL, POOL], PROVIDERS))
    assert burst.pools_problems({"h100": POOL}, PROVIDERS) == [
        "burst_pools must be a list of pools (`meshctl burst add` writes it)"]  # fmt: skip
    assert burst.pools_problems(None) == [] and burst.check_pools([POOL], PROVIDERS) == [POOL]


def test_the_spend_limit_and_what_a_machine_may_cost():
    assert burst.max_spend(None) is None and burst.max_spend("") is None and burst.max_spend("12.5") == 12.5
    for bad in ("lots", -1, True, "1e9"):
        with pytest.raises(burst.BurstError):
            burst.max_spend(bad)
    assert burst.within(3.29, POOL, 0.0, None) and not burst.within(3.6, POOL, 0.0, None)
    assert burst.within(3.29, POOL, 2.0, 5.29) and not burst.within(3.29, POOL, 2.01, 5.29)


def test_any_provider_means_every_account_and_a_list_only_those():
    assert burst.providers_of(POOL, ["runpod", "lambda"]) == ["lambda", "runpod"]
    assert burst.providers_of({**POOL, "providers": ["lambda", "paperspace"]}, ["lambda"]) == ["lambda"]
    assert burst.burst_providers([POOL, {**POOL, "name": "a", "providers": ["runpod"]}], ["runpod"]) == ["runpod"]


def test_every_pool_node_is_in_the_power_plan_with_its_idle_time_and_recorded_machine():
    plan = core.power_save.power_plan(
        {
            "h100-1": {"meshctl_instance": "lambda:abc123", "mesh_provider": "lambda"},
            "desk": {"mesh_provider": "local"},
        },
        pools=[POOL],
    )
    assert plan["nodes"] == {
        "h100-1": {"instance": "lambda:abc123", "provider": "lambda", "id": "abc123", "idle_stop": 600, "pool": "h100"},
        "h100-2": {"instance": "", "provider": "", "id": "", "idle_stop": 600, "pool": "h100"},
    }
    assert plan["refused"] == {}


def test_the_settings_check_refuses_a_bad_pool_and_spend_with_the_fix(tmp_path):
    from meshctl import settings

    problems, fix = settings.value_problems("burst_pools", [{**POOL, "gpus": 0}], {})
    assert problems and "burst add" in fix
    problems, fix = settings.value_problems("burst_max_spend", "a lot", {})
    assert problems == ["burst_max_spend 'a lot' must be dollars an hour (a number, 0 to 100000)"] and "10" in fix


def test_a_pool_node_is_rented_on_resume_and_its_machine_found_by_name_terminated_on_suspend_and_fail(program):  # noqa: F811
    (program.conf / "keys" / "lambda.key").write_text(KEY + "\n")
    (program.conf / "keys" / "paperspace.key").unlink()  # the pools rent from Lambda only here
    with Standin("lambda") as api:
        machine = api.add("h100-1", "gpu_1x_h100_pcie", 1, 2.49)
        other = api.add("gpu2", "gpu_1x_a10", 1, 1.29)
        plan = {"h100-1": {"instance": "", "provider": "", "id": "", "idle_stop": 60, "pool": "h100"},
                "h100-2": {"instance": "", "provider": "", "id": "", "idle_stop": 60, "pool": "h100"}}  # fmt: skip
        (program.conf / "nodes.json").write_text(json.dumps(plan))
        (program.conf / "api-urls.json").write_text(json.dumps({"lambda": api.url}))
        done = program("resume", "h100-2")
        assert done.returncode == 0, done.stderr
        assert (program.state / "relaunch" / "h100-2").is_file()
        assert not [r for r in api.requests if r[1].endswith("/launch")]  # the service rents, as root
        done = program("suspend", "h100-1")
        assert done.returncode == 0, program.log.read_text()
        assert machine.state == "terminated" and other.state == "running"
        assert f"suspend h100-1 (pool h100): terminated lambda:{machine.id}" in program.log.read_text()
        again = api.add("h100-2", "gpu_1x_h100_pcie", 1, 2.49)
        done = program("fail", "h100-2")
        assert done.returncode == 0 and again.state == "terminated"
        calls = program.calls.read_text()
        assert "nodename=h100-2 state=down" in calls and "did not register within ResumeTimeout" in calls


def test_a_pool_machine_is_its_nodes_in_machines_not_one_billing_outside_the_mesh():
    from meshctl import burst as pooled
    from meshctl import cloud

    rows = [cloud.MachineRow("lambda", "i1", "h100-1", "running", "1.2.3.4", 1, "H100", 3.29, None),
            cloud.MachineRow("lambda", "i2", "stray", "running", "1.2.3.5", 1, "H100", 3.29, None),
            cloud.MachineRow("lambda", "i3", "h100-9", "running", "1.2.3.6", 1, "H100", 3.29, None)]  # fmt: skip
    marked = pooled.pool_machines(rows, {"burst_pools": [POOL]})
    assert [r.node for r in marked] == ["h100-1 (pool h100)", None, None]
    _total, forgotten = cloud.costing(marked)
    assert [r.name for r in forgotten] == ["stray", "h100-9"]


def test_a_node_that_could_not_be_had_is_powered_down_its_jobs_told_why_and_offered_again_later():
    from meshctl.ops import burst as ops

    calls = []

    def run(argv, **_kw):
        calls.append(argv)

        class Done:
            returncode, stdout = 0, "41\n42\n"

        return Done()

    assert ops.note_jobs("h100-1", 'burst_max_spend $2.00/h reached "now"', run=run) == ["41", "42"]
    assert calls[0] == ["squeue", "-h", "-w", "h100-1", "-t", "CONFIGURING,PENDING", "-o", "%i"]
    assert calls[1] == ["scontrol", "update", "jobid=41",
                        "comment=meshctl: h100-1: burst_max_spend $2.00/h reached 'now'"]  # fmt: skip
    ops.power_down("h100-1", run=run)
    assert calls[-1] == ["scontrol", "update", "nodename=h100-1", "state=power_down_force"]
    ops.retry_later("h100-1", 30, run=run)
    # A retry of the node still pending or running is stopped first (systemd refuses a transient
    # unit whose name is loaded: a node refused again while its earlier retry ran got none).
    assert calls[-2] == ["systemctl", "stop", "meshctl-burst-retry-h100-1.timer", "meshctl-burst-retry-h100-1.service"]
    argv = calls[-1]
    assert argv[:4] == ["systemd-run", "--unit=meshctl-burst-retry-h100-1", "--on-active=30",
                        "--timer-property=AccuracySec=1s"]  # fmt: skip
    assert argv[-5:] == [sys.executable, "-m", "meshctl", "offer-again", "h100-1"]
    # meshctl's code where this process has it (the relaunch service's PYTHONPATH, which a
    # transient unit does not inherit), and nothing from the working directory.
    source = Path(ops.__file__).resolve().parents[2]
    assert f"--setenv=PYTHONPATH={source}" in argv and (source / "meshctl" / "__main__.py").is_file()
    assert {"--setenv=PYTHONSAFEPATH=1", "--working-directory=/"} <= set(argv)
    # Plain words only: systemd 252 writes `$`, `;`, `%`, quotes and newlines into a transient
    # unit's file in a way its next daemon-reload (any converge of the head) reads back wrong: a
    # shell script given here ran with its `$` gone ("Syntax error"), a newline in the description
    # broke the timer, and the node stayed DOWN.
    assert all(ops.RETRY_ARG.fullmatch(word) for word in argv), argv


def test_no_retry_is_given_to_systemd_with_words_it_cannot_keep(monkeypatch, capsys):
    from meshctl.ops import burst as ops

    calls = []
    monkeypatch.setattr(sys, "executable", "/opt/my venv/bin/python")  # a space: systemd would quote it
    ops.retry_later("h100-1", 30, run=lambda argv, **_kw: calls.append(argv))
    assert [c[0] for c in calls] == ["systemctl"]  # the earlier retry stopped, no new one
    assert "no retry for h100-1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("states", "reason", "offered", "said"),
    [
        (["down%", "down%", "down~"], "meshctl: the head could not rent a machine for it", True, "(down~): offered"),
        (["down~"], "Not responding", False, "left as it is"),
        (["idle~"], "meshctl: cut short", True, "(idle~): offered"),
    ],
)
def test_the_retry_waits_out_the_power_down_and_offers_only_a_node_meshctl_set_down(states, reason, offered, said):
    """`meshctl offer-again NODE`, what the retry's timer runs, against Slurm's words (sinfo's %T
    states, scontrol's Reason= line): it waits while the node powers down (`%`), offers it again
    only while the reason is meshctl's, and says which."""
    from meshctl.ops import burst as ops

    calls, slept = [], []
    left = list(states)

    def run(argv, **_kw):
        calls.append(argv)
        out = ""
        if argv[0] == "sinfo":
            out = (left.pop(0) if len(left) > 1 else left[0]) + "\n"
        elif argv[:2] == ["scontrol", "show"]:
            out = f"NodeName=h100-1 State=DOWN+CLOUD\n   Reason={reason} [root@2026-12-02T22:37:42]\n"
        return subprocess.CompletedProcess(argv, 0, out, "")

    ok, line = ops.offer_again("h100-1", run=run, sleep=slept.append)
    updates = [c for c in calls if c[:2] == ["scontrol", "update"]]
    assert (updates == [["scontrol", "update", "nodename=h100-1", "state=idle"]]) is offered, calls
    assert ok and said in line, line
    assert slept == [ops.RETRY_POLL_SECONDS] * (len(states) - 1)


def test_the_retry_says_a_refused_update_and_fails(monkeypatch):
    from click.testing import CliRunner

    from meshctl.cli import cli
    from meshctl.ops import burst as ops

    def run(argv, **_kw):
        if argv[0] == "sinfo":
            return subprocess.CompletedProcess(argv, 0, "down~\n", "")
        if argv[1] == "show":
            return subprocess.CompletedProcess(argv, 0, "   Reason=meshctl: no offer [root@2026-12-02T22:37:42]\n", "")
        return subprocess.CompletedProcess(argv, 1, "", "slurm_update error: Invalid node state specified\n")

    monkeypatch.setattr(subprocess, "run", run)
    done = CliRunner().invoke(cli, ["offer-again", "h100-1"])
    assert done.exit_code == 1, done.output
    assert "h100-1 (down~): scontrol update state=idle failed: slurm_update error" in done.output
    assert ops.offer_again("h100-1", run=run)[0] is False


def test_a_pool_machine_the_head_rented_is_taken_into_mesh_yml_only_with_its_record(mesh, monkeypatch, tmp_path):
    """apply's first step: the machine running under a pool node's name is that node only when the
    head recorded renting that very instance, and then with the host keys the head met on it."""
    import subprocess

    from meshctl import cloud, hostkeys
    from meshctl.ops import apply

    class Notes:
        def __init__(self):
            self.lines = []

        def note(self, line):
            self.lines.append(line)

    with Standin("lambda") as api:
        monkeypatch.setenv("MESHCTL_LAMBDA_API_URL", api.url)
        cloud.add_account(mesh, {}, "lambda", KEY)
        nodes, mesh_vars = mesh.load()
        mesh_vars["burst_pools"] = [POOL]
        mesh.save(nodes, mesh_vars)
        machine = api.add("h100-1", "gpu_1x_h100_pcie", 1, 2.49)
        machine.ip = "100.100.70.41"
        key = tmp_path / "hostkey"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        shown = " ".join(key.with_suffix(".pub").read_text().split()[:2])
        notes = Notes()
        records = {}
        nodes, mesh_vars = mesh.load()
        assert apply.follow_pools(Work(mesh, nodes, mesh_vars), notes, head_record=records.get) == []
        assert "the head recorded no rent of it: not taken" in notes.lines[-1]
        records["h100-1"] = {"instance": f"lambda:{machine.id}", "host_keys": [shown], "mesh_address": "100.100.70.41"}
        assert apply.follow_pools(Work(mesh, nodes, mesh_vars), notes, check=True, head_record=records.get) == []
        assert apply.follow_pools(Work(mesh, nodes, mesh_vars), notes, head_record=records.get) == ["h100-1"]
        node = {n.name: n for n in mesh.load()[0]}["h100-1"]
        assert (node.instance, node.host, node.provider, node.state) == (f"lambda:{machine.id}", "100.100.70.41",
                                                                         "lambda", "active")  # fmt: skip
        assert [f.sha256 for f in hostkeys.recorded(mesh.known_hosts, "100.100.70.41", 22)] != []
        assert node.mesh_address == "100.100.70.41"
        # Already a node: nothing more to take.
        assert apply.follow_pools(Work(mesh, mesh.load()[0], mesh_vars), notes, head_record=records.get) == []


def test_a_pools_nodes_have_what_its_smallest_offer_has_unless_told(mesh, monkeypatch):
    """Slurm drains a cloud node that registers with less than slurm.conf says: a pool's nodes get
    the smallest fitting offer's CPUs and memory (Lambda's specs), or what the user says."""
    from meshctl import cloud
    from meshctl.ops import burst as ops

    with Standin("lambda") as api:
        monkeypatch.setenv("MESHCTL_LAMBDA_API_URL", api.url)
        api.instance_types = {"gpu_1x_h100_pcie": ("NVIDIA H100 (80 GB PCIe)", 1, 249, ["us-east-1"]),
                              "gpu_2x_h100_sxm5": ("NVIDIA H100 (80 GB SXM5)", 2, 658, ["us-east-1"]),
                              "gpu_1x_h100_sxm5": ("NVIDIA H100 (80 GB SXM5)", 1, 329, [])}  # fmt: skip
        cloud.add_account(mesh, {}, "lambda", KEY)
        said = []
        record = ops.pool_record(mesh, {}, "h100", "H100:1", 2, 3.5, [], 600, None, None, said.append)
        assert (record["cpus"], record["memory_mb"]) == (30, 200 * 1024)  # the two 1-GPU offers: 30 vCPUs, 200 GiB
        assert "the smallest offer's" in said[-1]
        record = ops.pool_record(mesh, {}, "h100", "H100:1", 2, 3.5, ["lambda"], 600, 4, 16, said.append)
        assert (record["cpus"], record["memory_mb"], record["providers"]) == (4, 16 * 1024, ["lambda"])
        with pytest.raises(Exception, match=r"no offer of H100:1 at most \$1.00/h; the cheapest is \$2.49/h"):
            ops.pool_record(mesh, {}, "h100", "H100:1", 2, 1.0, [], 600, None, None, said.append)
        with pytest.raises(Exception, match="no runpod account"):
            ops.pool_record(mesh, {}, "h100", "H100:1", 2, 3.5, ["runpod"], 600, None, None, said.append)


def test_a_pool_keeps_the_providers_own_launch_options_and_every_rent_sends_them(mesh, monkeypatch):
    """`burst add --cloud community --image I` (Runpod's own options): the pool keeps them as its
    ``launch``, checked as every setting is; a rent of the pool rents in that cloud only and sends them.
    What a pool decides itself (the head's key, the machine's size) is no option of the user's."""
    from meshctl import cloud
    from meshctl.errors import UsageError
    from meshctl.ops import burst as ops
    from meshctl.ops import launch
    from meshctl.ops.work import reading

    with Standin("runpod") as api:
        monkeypatch.setenv("MESHCTL_RUNPOD_API_URL", api.url)
        cloud.add_account(mesh, {}, "runpod", KEY, check=False)
        said = []
        own = {"cloud": "community", "image": "ghcr.io/lab/node:1", "template_id": None, "ssh_key_names": ()}
        record = ops.pool_record(mesh, {}, "a5k", "RTX A5000:1", 2, 1.0, ["runpod"], 600, None, None, said.append, own)
        assert record["launch"] == {"cloud": "COMMUNITY", "image": "ghcr.io/lab/node:1"}
        assert core.mesh_burst.pool_problems(record, cloud.PROVIDERS) == []
        with pytest.raises(UsageError, match="--template-id is Paperspace's, not runpod's"):
            ops.pool_record(mesh, {}, "a5k", "RTX A5000:1", 2, 1.0, ["runpod"], 600, None, None, said.append,
                            {"template_id": "t1"})  # fmt: skip
        for bad, why in (({"public_key": "ssh-ed25519 A"}, "none a pool may set"), ({"image": "x\ny"}, "plain text"),
                         ({"cpus": "64"}, "none a pool may set"), ("COMMUNITY", "must be a mapping")):  # fmt: skip
            problems = core.mesh_burst.pool_problems({**record, "launch": bad}, cloud.PROVIDERS)
            assert any(why in p for p in problems), (bad, problems)
        # The rent's plan: the pool's options with its size; the Community Cloud's offer only.
        options = {**record["launch"], "cpus": 1, "memory_gb": 1.0, "public_key": "ssh-ed25519 A x"}
        request = launch.new_request("a5k-1", None, None, "RTX A5000:1", "runpod", 1.0, options)
        chosen = launch.plan(reading(mesh), request, say=said.append, warn=said.append)
        assert [c[3]["cloud"] for c in chosen.candidates] == ["COMMUNITY"]
        assert chosen.candidates[0][3]["image"] == "ghcr.io/lab/node:1"
