"""meshctl usage: sacct's lines summed per user (GPU-hours, CPU-hours, cost at today's prices)."""

import datetime

import pytest

from meshctl.errors import UsageError
from meshctl.ops import usage
from tests.conftest import FIXTURES


def lines():
    return (FIXTURES / "sacct" / "usage-parsable2.txt").read_text().splitlines()


@pytest.mark.parametrize(
    ("hostlist", "names"),
    [
        ("gpu1", ["gpu1"]),
        ("gpu[1-3]", ["gpu1", "gpu2", "gpu3"]),
        ("n[08-10],head", ["n08", "n09", "n10", "head"]),
        ("gpu[1,3-4]", ["gpu1", "gpu3", "gpu4"]),
        ("None assigned", []),
        ("", []),
    ],
)
def test_slurm_host_lists(hostlist, names):
    assert usage.hostnames(hostlist) == names


def test_alloc_tres_counts_gpus_once():
    assert usage.tres("billing=8,cpu=8,gres/gpu:rtx_a5000=2,gres/gpu=2,mem=32000M,node=1") == {
        "cpu": 8.0, "gpu": 2.0, "node": 1.0}  # fmt: skip


def test_per_user_hours_and_cost_at_todays_prices():
    gpus = {"gpu1": 2, "gpu2": 2, "head": 0, "cpu1": 0}
    cpus = {"gpu1": 16, "gpu2": 16, "head": 8, "cpu1": 4}
    prices = {"gpu1": 0.54, "gpu2": 0.54, "cpu1": 0.10}  # head: a desktop, no price
    rows = {r.user: r for r in usage.summarize(lines(), gpus, cpus, prices)}
    alice, bob, carol = rows["alice"], rows["bob"], rows["carol"]
    assert alice.jobs == 2 and alice.gpu_hours == pytest.approx(2 * 1 + 4 * 0.5)
    # 101: all of gpu1 for 1 h; 102: all of gpu1 and gpu2 for half an hour
    assert alice.cost == pytest.approx(0.54 * 1 + 2 * 0.54 * 0.5) and alice.nodes == {"gpu1", "gpu2"}
    assert bob.jobs == 2 and bob.cpu_hours == pytest.approx(4.0) and bob.cost == 0  # the head costs nothing
    assert carol.cost == pytest.approx(0.10 * 0.25)  # all 4 CPUs of cpu1 for a quarter hour
    assert [r.user for r in usage.summarize(lines(), gpus, cpus, prices)] == ["alice", "carol", "bob"]


def test_a_line_that_is_not_one_is_skipped():
    hostile = ["root|1|gpu1|abc|cpu=1|COMPLETED", "EVIL USER|2|gpu1|60|cpu=1|COMPLETED", "only|three|fields"]
    assert usage.summarize(hostile, {}, {}, {}) == []


def test_the_period_defaults_to_this_month_and_is_checked():
    assert usage.period(None, None, datetime.date(2026, 11, 24)) == ("2026-11-01", "now")
    assert usage.period("2026-10-01", "2026-11-01T12:00") == ("2026-10-01", "2026-11-01T12:00")
    with pytest.raises(UsageError, match="--since 'last week' is not a date"):
        usage.period("last week", None)
    with pytest.raises(UsageError, match="is not a date"):
        usage.period("2026-10-01; rm -rf /", None)
    with pytest.raises(UsageError, match="'2026-13-01' is no day of the calendar"):
        usage.period("2026-13-01", None)
    # A --since after --until was sent to sacct, which answered an empty period.
    with pytest.raises(UsageError, match="--since 2026-11-20 is after --until 2026-11-01"):
        usage.period("2026-11-20", "2026-11-01")
    with pytest.raises(UsageError, match="is after --until now"):
        usage.period("2999-01-01", None)


def test_the_usage_command_reads_the_heads_accounting_once(tmp_path, monkeypatch):
    import json

    from click.testing import CliRunner

    from meshctl import runner
    from meshctl.cli import cli
    from meshctl.mesh import Mesh
    from meshctl.model import Node

    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    mesh = Mesh(tmp_path)
    mesh.save([Node("head", "100.64.0.1", roles=["head", "compute"], state="active", mesh_address="100.64.0.1"),
               Node("gpu1", "100.64.0.2", state="active", mesh_address="100.64.0.2")], {})  # fmt: skip
    calls = []
    (tmp_path / "group_vars").mkdir(exist_ok=True)
    (tmp_path / "group_vars" / "all.yml").write_text("slurm_accounting: false\n")
    refused = CliRunner().invoke(cli, ["usage", "--mesh", str(tmp_path)])
    assert refused.exit_code == 2 and "set `slurm_accounting: true` in group_vars/all.yml" in refused.output
    (tmp_path / "group_vars" / "all.yml").write_text("slurm_accounting: true\n")

    def fake_run(playbook, inventory, mesh_dir=None, **kw):
        calls.append((playbook, kw))
        return runner.RunResult("successful", 0, stats={"head": {"ok": 2}}, reports={"head": {"lines": lines()}})

    monkeypatch.setattr(runner, "run_playbook", fake_run)
    result = CliRunner().invoke(cli, ["usage", "--since", "2026-11-01", "--json", "--mesh", str(tmp_path)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert [u["user"] for u in out["users"]] == ["alice", "bob", "carol"]  # no prices: by GPU-hours, then name
    assert out["users"][0]["gpu_hours"] == 4.0 and out["since"] == "2026-11-01" and out["until"] == "now"
    ((playbook, kw),) = calls
    assert playbook == "usage.yml" and kw["limit"] == runner.limit_to(["head"])  # the head only
    assert kw["extravars"] == {
        "slurm_accounting_usage_start": "2026-11-01",
        "slurm_accounting_usage_end": "now",
        "usage_ended_dir": "/var/lib/meshctl/power/ended",
    }  # the power program's records


def test_usage_on_a_head_without_accounting_yet_says_to_apply_first(tmp_path):
    """slurm_accounting set, never applied (no sacct on the head): the role's own words and the fix,
    not the command module's "Error executing command". A real run, on this machine."""
    import json
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from meshctl import resources

    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.import_role: {name: meshctl.mesh.slurm_accounting, tasks_from: usage,"
        " rolespec_validate: false}\n"
    )
    if shutil.which("sacct", path="/usr/bin:/bin:/usr/sbin:/sbin"):
        pytest.skip("this machine has sacct")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    collections = str(resources.collections_path(tmp_path / "c"))
    env.update(PATH="/usr/bin:/bin:/usr/sbin:/sbin", ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))  # fmt: skip
    settings = {"slurm_accounting": True, "slurm_accounting_usage_start": "2026-11-01",
                "slurm_accounting_usage_end": "2026-11-28", "ansible_python_interpreter": sys.executable}  # fmt: skip
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(play),
            "-e", json.dumps(settings)]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "the head has no accounting yet (no sacct)" in done.stdout, done.stdout[-2000:] + done.stderr[-1000:]
    assert "run `meshctl apply`" in done.stdout and "Error executing command" not in done.stdout


def test_usage_says_what_the_network_volumes_bill_by_the_month(tmp_path, monkeypatch):
    """Storage bills apart from the jobs' hours: the accounts' network volumes, and the one nothing mounts."""
    import json

    from click.testing import CliRunner

    from meshctl import cloud, runner
    from meshctl.cli import cli
    from meshctl.mesh import Mesh
    from meshctl.model import Node
    from tests.cloud_standin import KEY, Standin

    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    mesh = Mesh(tmp_path)
    (tmp_path / "group_vars").mkdir(exist_ok=True)
    (tmp_path / "group_vars" / "all.yml").write_text("slurm_accounting: true\n")

    def fake_run(playbook, inventory, mesh_dir=None, **kw):
        return runner.RunResult("successful", 0, stats={"head": {"ok": 2}}, reports={"head": {"lines": lines()}})

    monkeypatch.setattr(runner, "run_playbook", fake_run)
    with Standin("runpod") as api:
        monkeypatch.setenv("MESHCTL_RUNPOD_API_URL", api.url)
        pod = api.add("gpu1", "NVIDIA RTX A5000", 1, 0.27)
        api.add_volume("vol-used", "EU-RO-1", 20)
        pod.mounts = {"network": [{"volumeId": "vol-used", "path": "/workspace"}]}
        api.add_volume("vol-left", "EU-RO-1", 50)
        mesh.save([Node("head", "100.64.0.1", roles=["head", "compute"], state="active", mesh_address="100.64.0.1"),
                   Node("gpu1", "100.64.0.2", state="active", mesh_address="100.64.0.2", provider="runpod",
                        instance=f"runpod:{pod.id}")], {})  # fmt: skip
        cloud.add_account(mesh, {}, "runpod", KEY)
        result = CliRunner().invoke(cli, ["usage", "--mesh", str(tmp_path)], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert "and network volumes: $4.90/month now, apart from the jobs' hours: runpod:vol-used (gpu1), " \
               "runpod:vol-left (used by nothing)" in result.output  # fmt: skip
        assert "vol-left (volume-vol-left, 50 GB, EU-RO-1, $3.50/month) is used by no instance" in result.output
        out = json.loads(CliRunner().invoke(cli, ["usage", "--json", "--mesh", str(tmp_path)]).output)
        assert {v["id"]: v["used_by"] for v in out["volumes"]} == {"vol-used": ["gpu1"], "vol-left": []}


def test_every_machine_a_pool_rented_in_the_period_with_its_cost_the_lost_ones_too(mesh, tmp_path):
    """The head's records as `usage` reads them: the machine a pool node ran on before, kept by the
    next rent with the power program's record of its end (``machine.keep_earlier``), and the one it
    runs on now."""
    import json

    from meshctl.ops import burst, machine

    folder = burst.rented_dir(mesh)
    folder.mkdir()
    first = {"node": "h100-1", "pool": "h100", "instance": "lambda:i1", "price": 3.0, "since": 36000}
    (folder / "h100-1.json").write_text(json.dumps(first))
    ended = tmp_path / "ended"
    ended.mkdir()
    (ended / "h100-1.json").write_text(json.dumps({"node": "h100-1", "instances": ["lambda:i1"], "at": 36000 + 1800,
                                                   "why": "preempted by lambda", "lost": True}))  # fmt: skip
    machine.keep_earlier(mesh, "h100-1", ended, now=40000)
    kept = json.loads((folder / "h100-1@36000.json").read_text())
    assert kept["until"] == 37800 and kept["until_known"] and kept["lost"] and kept["why"] == "preempted by lambda"
    (folder / "h100-1.json").write_text(json.dumps({**first, "instance": "lambda:i2", "price": 2.0, "since": 37900}))
    (folder / "h100-1@1.json").write_text("not json")
    (folder / "other@5.json").write_text(json.dumps({**first, "node": "h100-2"}))  # a record under another's name
    records = {p.name.removesuffix(".json"): p.read_text() for p in folder.iterdir()}
    rows = usage.pool_machines(records, start=0, end=39700, now=39700)
    assert [(m.instance, m.lost, m.cost) for m in rows] == [("lambda:i1", True, 1.5), ("lambda:i2", False, 1.0)]
    assert rows[0].why == "preempted by lambda" and rows[1].until is None and rows[0].until_known
    assert usage.pool_machines(records, start=38000, end=39700, now=39700)[0].instance == "lambda:i2"  # i1 ended
    # The machine a node ran on last ended where the power program's record of its end names it.
    end = {"h100-1": json.dumps({"instances": ["lambda:i2"], "at": 38900, "why": "stopped answering", "lost": True})}
    last = usage.pool_machines(records, start=0, end=39700, now=39700, ended=end)[-1]
    assert (last.until, last.lost, last.why) == (38900, True, "stopped answering")
    assert last.cost == round(2000 / 3600, 4)
    other = {"h100-1": json.dumps({"instances": ["lambda:i1"], "at": 38900, "lost": True})}  # another machine's end
    assert usage.pool_machines(records, start=0, end=39700, now=39700, ended=other)[-1].until is None


def test_a_machine_whose_end_the_power_program_did_not_record_ends_at_most_at_the_next_rent(mesh, tmp_path):
    import json

    from meshctl.ops import burst, machine

    folder = burst.rented_dir(mesh)
    folder.mkdir()
    record = {"node": "h100-1", "pool": "h100", "instance": "lambda:i1", "price": 3.0, "since": 36000}
    (folder / "h100-1.json").write_text(json.dumps(record))
    (tmp_path / "ended").mkdir()
    (tmp_path / "ended" / "h100-1.json").symlink_to(tmp_path / "elsewhere.json")  # SlurmUser's folder: no link
    (tmp_path / "elsewhere.json").write_text(json.dumps({"instances": ["lambda:i1"], "at": 36100, "lost": True}))
    machine.keep_earlier(mesh, "h100-1", tmp_path / "ended", now=39000)
    kept = json.loads((folder / "h100-1@36000.json").read_text())
    assert kept["until"] == 39000 and not kept["until_known"] and not kept["lost"]
    for since in range(1, 30):  # the head keeps the last few
        (folder / "h100-1.json").write_text(json.dumps({**record, "since": 40000 + since}))
        machine.keep_earlier(mesh, "h100-1", None, now=50000)
    assert len(list(folder.glob("h100-1@*.json"))) == machine.KEPT_EARLIER


def test_usage_shows_the_pools_machines_as_the_head_reports_them(tmp_path, monkeypatch):
    import json
    import time

    from click.testing import CliRunner

    from meshctl import runner
    from meshctl.cli import cli
    from meshctl.mesh import Mesh
    from meshctl.model import Node

    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    mesh = Mesh(tmp_path)
    (tmp_path / "group_vars").mkdir(exist_ok=True)
    (tmp_path / "group_vars" / "all.yml").write_text("slurm_accounting: true\n")
    mesh.save([Node("head", "100.64.0.1", roles=["head", "compute"], state="active", mesh_address="100.64.0.1")], {})
    start = int(time.time()) - 3 * 3600
    record = {"node": "h100-1", "pool": "h100", "instance": "lambda:i1", "price": 2.0, "since": start}
    machines = {"h100-1@1": json.dumps({**record, "until": start + 3600, "lost": True, "why": "preempted by lambda"}),
                "h100-1@2": json.dumps({**record, "instance": "lambda:i0", "since": start - 60, "until": start,
                                        "until_known": False}),
                "h100-1": json.dumps({**record, "instance": "lambda:i2", "since": start + 3700})}  # fmt: skip

    def fake_run(playbook, inventory, mesh_dir=None, **kw):
        return runner.RunResult("successful", 0, stats={"head": {"ok": 2}},
                                reports={"head": {"lines": [], "machines": machines}})  # fmt: skip

    monkeypatch.setattr(runner, "run_playbook", fake_run)
    result = CliRunner().invoke(cli, ["usage", "--mesh", str(tmp_path), "--since", "2000-01-01"],
                                env={"COLUMNS": "200"})  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Machines the burst pools rented" in result.output and "lost: preempted by lambda" in result.output
    assert "by " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(start)) in result.output  # its end unrecorded
    out = json.loads(CliRunner().invoke(cli, ["usage", "--json", "--mesh", str(tmp_path), "--since",
                                              "2000-01-01"]).output)  # fmt: skip
    assert [m["instance"] for m in out["machines"]] == ["lambda:i0", "lambda:i1", "lambda:i2"]
    assert out["machines"][1]["cost"] == 2.0 and out["machines"][2]["until"] is None
