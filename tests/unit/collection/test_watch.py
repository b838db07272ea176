"""The head's watch of rented machines: which machine is lost, from the providers' lists and Slurm's
own rows (tests/fixtures/sinfo, recorded), and what meshctl-power watch does about each, against
the providers' stand-ins (tests/cloud_standin.py: a machine taken away as each provider takes it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from meshctl import core, resources
from tests.cloud_standin import KEY, Standin

watch = core.mesh_watch
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sinfo"
PROGRAM = resources.roles_dir() / "power_save" / "files" / "meshctl-power"


def recorded(version: str, name: str) -> dict:
    text = (FIXTURES / version / f"{name}.txt").read_text()
    return watch.parse_sinfo("\n".join(line for line in text.splitlines() if not line.startswith("#")))


@pytest.mark.parametrize("version", ["slurm-22.05", "slurm-24.11"])
@pytest.mark.parametrize(("fixture", "node"), [("powered_down", "cpu1"), ("powering_up", "cpu1"),
                                               ("powering_down", "cpu1"), ("power_down_pending", "cpu1")])  # fmt: skip
def test_a_node_slurm_powers_up_or_down_is_meshctls_doing_never_lost(version, fixture, node):
    rows = recorded(version, fixture)
    assert watch.powering(rows[node]["state"]), rows[node]
    gone = {"cpu1": {"instance": "lambda:i1", "provider": "lambda", "id": "i1"}}
    assert watch.losses(gone, {"lambda": []}, rows) == []


@pytest.mark.parametrize("version", ["slurm-22.05", "slurm-24.11"])
def test_slurms_rows_are_read_as_the_status_reads_them(version):
    rows = recorded(version, "idle")
    assert rows and all(not watch.powering(r["state"]) and r["reason"] == "" for r in rows.values()), rows
    answering = recorded(version, "not_responding")
    assert "*" in answering["head"]["state"] and not watch.powering(answering["head"]["state"])


def instance(provider: str, iid: str, name: str, status: str) -> dict:
    return core.mesh_cloud.instance(provider, iid, name, status, status)


STATIC = {"gpu2": {"instance": "lambda:i1", "provider": "lambda", "id": "i1"}}
POOL = {"h100-1": {"instance": "", "provider": "", "id": "", "pool": "h100"}}


def up(state: str = "allocated", reason: str = "") -> dict:
    return {"state": state, "reason": reason}


@pytest.mark.parametrize(("status", "why"), [("preempted", "preempted by lambda"),
                                             ("terminated", "terminated by lambda"),
                                             ("stopped", "stopped outside meshctl")])  # fmt: skip
def test_a_static_rented_node_taken_away_is_lost_with_its_providers_word_and_never_given_back(status, why):
    found = watch.losses(STATIC, {"lambda": [instance("lambda", "i1", "gpu2", status)]}, {"gpu2": up()})
    assert found == [{"node": "gpu2", "pool": "", "give_back": "", "instance": "lambda:i1", "why": why}]
    said = watch.reason(found[0])
    assert said.startswith(f"lambda:i1 {why}") and "`meshctl remove-node gpu2`" in said and "launch" in said


def test_a_static_node_no_longer_listed_was_terminated_by_its_provider():
    found = watch.losses(STATIC, {"lambda": [instance("lambda", "other", "x", "running")]}, {"gpu2": up("idle")})
    assert [(f["instance"], f["why"]) for f in found] == [("lambda:i1", "terminated by lambda (no longer listed)")]


def test_a_static_node_that_stopped_answering_is_left_to_slurm():
    running = {"lambda": [instance("lambda", "i1", "gpu2", "running")]}
    assert watch.losses(STATIC, running, {"gpu2": up("down*", "Not responding")}) == []
    assert watch.losses(STATIC, running, {"gpu2": up("allocated")}) == []


def test_a_pool_machine_preempted_is_lost_and_given_back():
    listed = {"lambda": [instance("lambda", "old", "h100-1", "terminated"), instance("lambda", "i9", "h100-1",
                                                                                     "preempted")],
              "runpod": [instance("runpod", "p1", "other", "running")]}  # fmt: skip
    found = watch.losses(POOL, listed, {"h100-1": up("mixed")})
    assert found == [{"node": "h100-1", "pool": "h100", "give_back": "i9", "instance": "lambda:i9",
                      "why": "preempted by lambda"}]  # fmt: skip
    assert "pool h100 rents a replacement" in watch.reason(found[0])


def test_a_pool_machine_gone_from_every_list_while_slurm_has_it_up_is_lost():
    found = watch.losses(POOL, {"lambda": [], "runpod": []}, {"h100-1": up("idle")})
    assert [(f["why"], f["give_back"]) for f in found] == [("its machine is gone (no provider lists it)", "")]


def test_a_pool_machine_silent_past_slurms_grace_is_lost_and_given_back():
    running = {"lambda": [instance("lambda", "i9", "h100-1", "running")]}
    assert watch.losses(POOL, running, {"h100-1": up("allocated*")}) == []  # within SlurmdTimeout: waited for
    found = watch.losses(POOL, running, {"h100-1": up("down*", "Not responding")})
    assert [(f["why"], f["give_back"]) for f in found] == [("stopped answering", "i9")]


def silent_down(version: str, name: str) -> set:
    text = (FIXTURES / version / "silent-down" / f"{name}.txt").read_text()
    return watch.parse_silent("\n".join(line for line in text.splitlines() if not line.startswith("#")))


@pytest.mark.parametrize("version", ["slurm-22.05", "slurm-24.11"])
def test_a_pool_node_drained_before_its_machine_went_silent_is_lost_once_slurm_holds_it_down(version):
    """Slurm's own output (recorded): a drained node whose slurmd stopped prints ``drained*`` with
    its drain's reason within SlurmdTimeout and past it; only ``sinfo --dead --states=down`` says
    when Slurm holds it DOWN. The machine is given back then, not before, and once only."""
    pool = {"gpu1": {"instance": "", "provider": "", "id": "", "pool": "h100"}}
    running = {"lambda": [instance("lambda", "i9", "gpu1", "running")]}
    early = recorded(version, "drained_not_responding")
    assert watch.ask_silent(pool, early) and not watch.ask_silent(STATIC | {"gpu1": STATIC["gpu2"]}, early)
    assert "gpu1" not in silent_down(version, "drained_not_responding")  # within the grace: waited for
    assert watch.losses(pool, running, early, silent_down(version, "drained_not_responding")) == []
    late = recorded(version, "drained_silent")
    assert late["gpu1"]["state"] == early["gpu1"]["state"] and not late["gpu1"]["reason"].startswith("Not")
    assert watch.losses(pool, running, late) == []  # the row alone cannot tell
    found = watch.losses(pool, running, late, silent_down(version, "drained_silent"))
    assert [(f["why"], f["give_back"]) for f in found] == [("stopped answering", "i9")], found
    # What Slurm printed after each of the watch's steps: acted on once, offered again when powered down.
    lost = {"gpu1": {"lost": True, "pool": "h100", "offered": 0}}
    acted = recorded(version, "drained_silent_ours")
    assert not watch.ask_silent(pool, acted) and watch.losses(pool, running, acted, {"gpu1"}) == []
    assert watch.reoffer(lost, acted) == []
    powered = recorded(version, "drained_silent_powered_down")
    assert watch.losses(pool, {"lambda": []}, powered, {"gpu1"}) == []
    assert watch.reoffer(lost, powered) == ["gpu1"]
    offered = recorded(version, "drained_silent_offered")
    assert watch.reoffer(lost, offered) == [] and watch.losses(pool, {"lambda": []}, offered) == []
    assert not watch.ask_silent(pool, offered)


def test_the_list_of_silent_nodes_is_node_names_only():
    assert watch.parse_silent("gpu1\n h100-2 \n\nnot a name; rm\n" + "x" * 300) == {"gpu1", "h100-2"}
    assert watch.parse_silent(None) == set()


def test_a_node_the_head_launches_again_is_found_by_its_name_whatever_its_instance_now():
    relaunched = {"gpu2": {"instance": "lambda:i1", "provider": "lambda", "id": "i1", "by_name": True}}
    listed = {"lambda": [instance("lambda", "i1", "gpu2", "terminated"), instance("lambda", "i2", "gpu2", "running")]}
    assert watch.losses(relaunched, listed, {"gpu2": up()}) == []  # i1 terminated when idle, i2 runs it now
    listed["lambda"][1] = instance("lambda", "i2", "gpu2", "preempted")
    assert [f["instance"] for f in watch.losses(relaunched, listed, {"gpu2": up()})] == ["lambda:i2"]
    nodes = {"gpu2": {"meshctl_instance": "lambda:i1", "idle_stop": "1h", "idle_terminate": True}}
    assert core.power_save.power_plan(nodes)["watched"]["gpu2"]["by_name"] is True


def test_nobody_is_lost_while_a_provider_that_may_hold_the_machine_cannot_be_asked():
    assert watch.losses(STATIC, {"lambda": None}, {"gpu2": up()}) == []
    assert watch.losses(POOL, {"lambda": [], "runpod": None}, {"h100-1": up()}) == []


def test_a_node_meshctl_set_down_already_or_slurm_powers_is_not_acted_on_again():
    gone = {"lambda": []}
    assert watch.losses(POOL, gone, {"h100-1": up("down", "meshctl: lambda:i9 preempted by lambda")}) == []
    assert watch.losses(POOL, gone, {"h100-1": up("down~", "meshctl: the head could not rent")}) == []
    assert watch.losses(POOL, gone, {"h100-1": up("idle~")}) == []
    assert watch.losses(POOL, gone, {"h100-1": up("mixed#")}) == []  # being rented
    assert watch.losses(POOL, gone, {}) == []  # not in Slurm (yet)


def test_a_lost_pool_node_is_offered_again_once_slurm_has_powered_it_down():
    lost = {"h100-1": {"lost": True, "pool": "h100", "offered": 0}}
    ours = "meshctl: lambda:i9 preempted by lambda"
    assert watch.reoffer(lost, {"h100-1": up("down%", ours)}) == []  # still powering down
    assert watch.reoffer(lost, {"h100-1": up("down~", ours)}) == ["h100-1"]
    assert watch.reoffer(lost, {"h100-1": up("down~", "an administrator's")}) == []
    assert watch.reoffer({"h100-1": {**lost["h100-1"], "offered": 1}}, {"h100-1": up("down~", ours)}) == []
    idle = {"h100-1": {"lost": False, "pool": "h100"}}  # given back when idle: never DOWN, nothing to offer
    assert watch.reoffer(idle, {"h100-1": up("down~", ours)}) == []


def test_a_pool_machine_that_registered_too_few_gpus_is_given_back_and_replaced():
    """Slurm's own rows (recorded): slurmctld set the pool node INVAL and drained it for fewer GPUs
    than its pool's, the job requeued. The machine is no use to the pool: given back, replaced."""
    short = recorded("slurm-22.05", "gpus_short")
    assert short["h100-1"]["state"] == "inval" and watch.gpus_short(short["h100-1"]), short["h100-1"]
    running = {"lambda": [instance("lambda", "i9", "h100-1", "active")]}
    found = watch.losses(POOL, running, short)
    assert [(f["instance"], f["give_back"]) for f in found] == [("lambda:i9", "i9")], found
    assert watch.reason(found[0]).startswith("lambda:i9 registered 0 of its 1 GPUs; its jobs requeued")
    assert "pool h100 rents a replacement" in watch.reason(found[0])
    draining = recorded("slurm-22.05", "gpus_short_draining")  # its job's step still ending there
    assert [f["give_back"] for f in watch.losses(POOL, running, draining)] == ["i9"]
    # Given back already (Slurm powered the drained node down: the suspend), still judged: DOWN with
    # meshctl's reason, so that it is offered again once powered down.
    gone = watch.losses(POOL, {"lambda": [instance("lambda", "i9", "h100-1", "terminated")]}, short)
    assert [(f["instance"], f["give_back"]) for f in gone] == [("lambda:i9", "")], gone
    # A static node's GPUs are its own: the health check and its owner's (never given back here).
    assert watch.losses(STATIC, {"lambda": [instance("lambda", "i1", "gpu2", "active")]},
                        {"gpu2": short["h100-1"]}) == []  # fmt: skip


def test_a_node_acted_on_is_not_acted_on_again_though_slurm_still_says_inval():
    ours = "meshctl: lambda:i9 registered 0 of its 1 GPUs; its jobs requeued, pool h100 rents a replacement"
    assert watch.losses(POOL, {"lambda": []}, {"h100-1": up("inval", ours)}) == []
    lost = {"h100-1": {"lost": True, "pool": "h100", "offered": 0, "short": 1}}
    assert watch.reoffer(lost, {"h100-1": up("drained~", ours)}) == ["h100-1"]  # DOWN+DRAIN, powered down
    assert watch.reoffer(lost, {"h100-1": up("inval", ours)}) == []  # not powered down yet
    again = {"h100-1": {**lost["h100-1"], "short": watch.SHORT_AT_MOST}}
    assert watch.reoffer(again, {"h100-1": up("drained~", ours)}) == []  # twice in a row: no third rent
    said = watch.reason({"node": "h100-1", "pool": "h100", "instance": "lambda:i9", "why": "registered 0 of its 1 "
                         "GPUs", "short": watch.SHORT_AT_MOST})  # fmt: skip
    assert "2 machines in a row: no more rented until `scontrol update nodename=h100-1 state=idle`" in said, said


def test_the_plan_watches_every_rented_node_and_pool_node_never_the_head():
    nodes = {"head": {"meshctl_instance": "lambda:h", "meshctl_roles": ["head"]},
             "gpu2": {"meshctl_instance": "lambda:i1"}, "desk": {"mesh_provider": "local"},
             "odd": {"meshctl_instance": "elsewhere:x"}}  # fmt: skip
    pools = [{"name": "h100", "gpu": "H100", "gpus": 1, "max_nodes": 1, "max_price": 3, "providers": ["any"],
              "idle": 60, "cpus": 1, "memory_mb": 1024}]  # fmt: skip
    plan = core.power_save.power_plan(nodes, pools=pools)
    assert plan["watched"] == {"gpu2": {"instance": "lambda:i1", "provider": "lambda", "id": "i1"},
                               "h100-1": {"instance": "", "provider": "", "id": "", "pool": "h100"}}  # fmt: skip
    # Since when meshctl had the machine (mesh.yml's meshctl_instance_since) goes with it, a time only.
    nodes["gpu2"]["meshctl_instance_since"] = 1_800_000_000
    assert core.power_save.power_plan(nodes, pools=pools)["watched"]["gpu2"]["since"] == 1_800_000_000
    nodes["gpu2"]["meshctl_instance_since"] = "yesterday"
    assert "since" not in core.power_save.power_plan(nodes, pools=pools)["watched"]["gpu2"]


def test_a_lost_machines_cost_is_its_hours_at_its_price_only_where_the_record_says_both():
    assert watch.cost({"at": 7200 + 100, "since": 100, "price": 2.5}) == (2.0, 2.5, 5.0)
    assert watch.cost({"at": 100, "since": None, "price": 2.5}) is None
    assert watch.cost({"at": 100, "since": 200, "price": 2.5}) is None  # ended before it began: not a record's
    assert watch.cost({"at": 100, "since": 50, "price": True}) is None
    assert watch.cost("text") is None


@pytest.fixture
def head(tmp_path):
    """meshctl-power laid out as role power_save lays it out, with fake scontrol and sinfo (the rows
    given per test, in the recorded format; what ``--dead --states=down`` lists) that record their calls."""
    conf = tmp_path / "power"
    (conf / "keys").mkdir(parents=True)
    (conf / "keys" / "lambda.key").write_text(KEY + "\n")
    (tmp_path / "state").mkdir()  # the role's
    calls, rows, dead = tmp_path / "calls", tmp_path / "rows", tmp_path / "dead"
    listing = f'case "$*" in *--dead*) cat {dead} ;; *) cat {rows} ;; esac\n'
    for program, body in (("scontrol", ""), ("sinfo", listing)):
        path = tmp_path / program
        path.write_text(f'#!/bin/sh\necho {program} "$@" >> {calls}\n{body}exit 0\n')
        path.chmod(0o755)
    env = {**os.environ, "MESHCTL_POWER_DIR": str(conf), "MESHCTL_POWER_LIB": str(resources.collections_path(
        tmp_path / "lib")), "MESHCTL_POWER_STATE": str(tmp_path / "state"), "MESHCTL_POWER_LOG": str(
        tmp_path / "power.log"), "MESHCTL_SCONTROL": str(tmp_path / "scontrol"), "MESHCTL_SINFO": str(
        tmp_path / "sinfo")}  # fmt: skip

    def run(sinfo: str, down_silent: str = ""):
        rows.write_text(sinfo)
        dead.write_text(down_silent)
        calls.write_text("")
        done = subprocess.run([sys.executable, str(PROGRAM), "watch"], env=env, capture_output=True, text=True,
                              timeout=60, check=False)  # fmt: skip
        return done, calls.read_text()

    run.conf, run.log, run.state = conf, tmp_path / "power.log", tmp_path / "state"
    return run


def test_the_watch_gives_a_pool_machine_taken_away_back_sets_its_node_down_and_offers_it_again(head):
    with Standin("lambda") as api:
        machine = api.add("h100-1", "gpu_1x_h100_sxm5", 1, 3.29)
        (head.conf / "api-urls.json").write_text(json.dumps({"lambda": api.url}))
        (head.conf / "watched.json").write_text(json.dumps(POOL))
        done, calls = head("h100-1|mixed|gpu:h100:1|none\n")
        assert done.returncode == 0 and calls.count("scontrol") == 0, (done.stderr, calls)  # running: nothing
        api.take_away(machine)  # Lambda preempts it
        assert machine.state == "preempted"
        done, calls = head("h100-1|mixed|gpu:h100:1|none\n")
        assert done.returncode == 0, done.stderr
        assert f"nodename=h100-1 state=down reason=meshctl: lambda:{machine.id} preempted by lambda" in calls, calls
        assert "nodename=h100-1 state=power_down_force" in calls, calls
        assert calls.index("state=down ") < calls.index("power_down_force")  # requeued, then powered down
        assert ("POST", "/api/v1/instance-operations/terminate") in api.requests
        record = json.loads((head.state / watch.ENDED / "h100-1.json").read_text())
        assert record["instances"] == [f"lambda:{machine.id}"] and record["lost"] and not record["offered"]
        assert f"watch h100-1: lambda:{machine.id} preempted by lambda: DOWN, its jobs requeued" in head.log.read_text()
        reason = f"meshctl: lambda:{machine.id} preempted by lambda; its jobs requeued"
        done, calls = head(f"h100-1|down%|gpu:h100:1|{reason}\n")  # Slurm powers it down: wait
        assert "state=idle" not in calls and "state=down" not in calls, calls
        done, calls = head(f"h100-1|down~|gpu:h100:1|{reason}\n")
        assert "nodename=h100-1 state=idle" in calls, calls
        assert json.loads((head.state / watch.ENDED / "h100-1.json").read_text())["offered"]
        done, calls = head("h100-1|idle~|gpu:h100:1|none\n")
        assert "scontrol" not in calls, calls  # offered once


def test_the_watch_asks_slurm_whether_a_drained_pool_node_gone_silent_is_down_and_then_gives_it_back(head):
    drained = "h100-1|drained*|gpu:h100:1|an administrator's drain\n"
    with Standin("lambda") as api:
        machine = api.add("h100-1", "gpu_1x_h100_sxm5", 1, 3.29)
        (head.conf / "api-urls.json").write_text(json.dumps({"lambda": api.url}))
        (head.conf / "watched.json").write_text(json.dumps(POOL))
        done, calls = head("h100-1|mixed|gpu:h100:1|none\n")
        assert done.returncode == 0 and calls.count("sinfo") == 1, (done.stderr, calls)  # nothing left open
        done, calls = head(drained, "")  # not answering, within SlurmdTimeout
        assert done.returncode == 0 and "--dead --states=down" in calls and "scontrol" not in calls, calls
        assert machine.state != "terminated"
        done, calls = head(drained, "h100-1\n")  # Slurm holds it DOWN now
        assert done.returncode == 0, done.stderr
        assert f"nodename=h100-1 state=down reason=meshctl: lambda:{machine.id} stopped answering" in calls, calls
        assert "nodename=h100-1 state=power_down_force" in calls and machine.state == "terminated", calls
        assert f"watch h100-1: lambda:{machine.id} stopped answering: DOWN, its jobs requeued" in head.log.read_text()


def test_the_watch_records_what_a_static_nodes_lost_machine_cost_an_hour_and_since_when(head):
    with Standin("lambda") as api:
        machine = api.add("gpu2", "gpu_1x_h100_sxm5", 1, 3.29)
        (head.conf / "api-urls.json").write_text(json.dumps({"lambda": api.url}))
        since = int(time.time()) - 7200  # meshctl took it in two hours ago
        watched = {"gpu2": {"instance": f"lambda:{machine.id}", "provider": "lambda", "id": machine.id,
                            "since": since}}  # fmt: skip
        (head.conf / "watched.json").write_text(json.dumps(watched))
        api.take_away(machine)
        done, calls = head("gpu2|mixed|gpu:h100:1|none\n")
        assert done.returncode == 0 and "nodename=gpu2 state=down" in calls, (done.stderr, calls)
        assert "power_down_force" not in calls and ("POST", "/api/v1/instance-operations/terminate") not in api.requests
        record = json.loads((head.state / watch.ENDED / "gpu2.json").read_text())
        assert record["price"] == 3.29 and record["since"] == since and record["lost"], record
        hours, price, dollars = watch.cost(record)
        assert 2 <= hours < 2.1 and price == 3.29 and dollars == round(hours * 3.29, 2), (hours, dollars)


def test_the_watch_judges_nobody_while_a_provider_does_not_answer_and_says_so_once(head):
    (head.conf / "api-urls.json").write_text(json.dumps({"lambda": "http://127.0.0.1:9"}))  # nothing listens
    (head.conf / "watched.json").write_text(json.dumps(STATIC))
    for _ in range(2):
        done, calls = head("gpu2|allocated|(null)|none\n")
        assert done.returncode == 0 and "scontrol" not in calls, (done.stderr, calls)
    assert head.log.read_text().count("watch: could not ask lambda") == 1, head.log.read_text()


def test_the_watch_follows_a_pod_the_program_moved_to_a_new_pod(head):
    (head.conf / "keys" / "lambda.key").unlink()
    (head.conf / "keys" / "runpod.key").write_text(KEY + "\n")
    with Standin("runpod") as api:
        old, new = api.add("pod1", "NVIDIA RTX A4000", 1, 0.17), api.add("pod1", "NVIDIA RTX A4000", 1, 0.17)
        api.backend.terminate(old)  # the resume's start_or_replace: the old pod deleted, a new one runs the node
        (head.conf / "api-urls.json").write_text(json.dumps({"runpod": api.url}))
        (head.conf / "watched.json").write_text(json.dumps(
            {"pod1": {"instance": f"runpod:{old.id}", "provider": "runpod", "id": old.id}}))  # fmt: skip
        head.state.mkdir(exist_ok=True)
        (head.state / "pod1.moved").write_text(json.dumps({"from": old.id, "to": new.id}))
        done, calls = head("pod1|idle|(null)|none\n")
        assert done.returncode == 0 and "scontrol" not in calls, (done.stderr, calls)
        (head.state / "pod1.moved").unlink()  # without the program's record, the recorded pod is gone
        done, calls = head("pod1|idle|(null)|none\n")
        assert f"runpod:{old.id} terminated by runpod" in calls, calls


def test_the_watch_gives_back_machines_short_of_gpus_and_stops_after_the_second_in_a_row(head):
    short = "h100-1|inval|gpu:h100:1|gres/gpu count reported lower than configured (0 < 1)\n"
    with Standin("lambda") as api:
        (head.conf / "api-urls.json").write_text(json.dumps({"lambda": api.url}))
        (head.conf / "watched.json").write_text(json.dumps(POOL))
        first = api.add("h100-1", "gpu_1x_h100_sxm5", 1, 3.29)
        done, calls = head(short)
        assert done.returncode == 0, done.stderr
        assert f"nodename=h100-1 state=down reason=meshctl: lambda:{first.id} registered 0 of its 1 GPUs" in calls
        assert "pool h100 rents a replacement" in calls and first.state == "terminated", calls
        assert json.loads((head.state / watch.ENDED / "h100-1.json").read_text())["short"] == 1
        log = head.log.read_text()
        assert f"watch h100-1: lambda:{first.id} registered 0 of its 1 GPUs: DOWN" in log, log
        reason = f"meshctl: lambda:{first.id} registered 0 of its 1 GPUs; its jobs requeued"
        done, calls = head(f"h100-1|inval|gpu:h100:1|{reason}\n")
        assert "scontrol" not in calls, calls  # acted on once
        done, calls = head(f"h100-1|drained~|gpu:h100:1|{reason}\n")
        assert "nodename=h100-1 state=idle" in calls, calls  # offered again: the job rents another
        second = api.add("h100-1", "gpu_1x_h100_sxm5", 1, 3.29)
        done, calls = head(short)
        assert "2 machines in a row: no more rented until `scontrol update nodename=h100-1 state=idle`" in calls, calls
        assert second.state == "terminated"
        done, calls = head(f"h100-1|drained~|gpu:h100:1|{reason}\n")
        assert "state=idle" not in calls, calls  # no third


def test_the_folder_of_ended_machines_is_named_once_for_the_roles_and_the_program():
    defaults = resources.role_defaults("mesh")
    assert defaults["mesh_power_ended_dir"] == "{{ mesh_power_state_dir }}/" + watch.ENDED
    readers = (resources.roles_dir() / "relaunch" / "vars" / "main.yml").read_text()
    assert 'ended: "{{ mesh_power_ended_dir }}"' in readers  # `meshctl status` reads it on the head
