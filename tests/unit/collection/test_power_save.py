"""Power saving: which nodes may be stopped (filter power_plan) and the head's program
(roles/power_save/files/meshctl-power) against the stand-in API, with scontrol faked."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from meshctl import resources
from tests.cloud_standin import KEY, Standin

REPO = Path(__file__).resolve().parents[3]
PROGRAM = REPO / "roles" / "power_save" / "files" / "meshctl-power"


def flt():
    return resources.plugin("module_utils.mesh_power_save")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30m", 1800),
        ("90s", 90),
        (90, 90),
        ("2h", 7200),
        ("1d", 86400),
        (False, 0),
        (None, 0),
        ("", 0),
        (0, 0),
        ("30 minutes", 1800),
        ("1h30m", 5400),
        ("2 hours", 7200),
        ("1 h 5 min", 3900),
        ("90 Seconds", 90),
    ],
)
def test_durations(value, seconds):
    assert flt().duration_seconds(value) == seconds


def test_a_year_is_the_longest_idle_stop_slurm_can_keep():
    assert flt().duration_seconds("365d") == 365 * 86400 < 2**31


@pytest.mark.parametrize(
    "value",
    [
        "30 minutess",
        "-5m",
        "10s",
        True,
        1.5,
        "5m; reboot",
        "30 30m",
        "m30",
        "1h 30",
        "50000d",
        "366d",
        "9" * 5000,
        "9" * 5000 + "m",
        10**12,
    ],
)
def test_a_duration_that_is_not_one_is_refused(value):
    with pytest.raises(flt().PowerSaveError):
        flt().duration_seconds(value)


def test_the_plan_stops_only_instances_that_come_back_intact():
    nodes = {
        "head": {"meshctl_roles": ["head", "compute"], "mesh_provider": "local", "idle_stop": "30m"},
        "desk": {"mesh_provider": "local"},
        "ps1": {"mesh_provider": "paperspace", "meshctl_instance": "paperspace:psok2vd8", "idle_stop": "30m"},
        "ps2": {"mesh_provider": "paperspace", "meshctl_instance": "paperspace:psxq71ab"},  # by provider
        "ps3": {"mesh_provider": "paperspace", "meshctl_instance": "paperspace:ps000003", "idle_stop": False},
        "lam": {"mesh_provider": "lambda", "meshctl_instance": "lambda:0920582c7ff0", "idle_stop": "1h"},
        # Lambda has no stop: terminated when idle only when the node opts in; then launched again.
        "lam2": {
            "mesh_provider": "lambda",
            "meshctl_instance": "lambda:0920582c7ff1",
            "idle_stop": "1h",
            "idle_terminate": True,
        },
        "lam3": {
            "mesh_provider": "lambda",
            "meshctl_instance": "lambda:0920582c7ff2",
            "idle_stop": "1h",
            "idle_terminate": "yes",
        },  # only true opts in
        "pod": {"mesh_provider": "runpod", "meshctl_instance": "runpod:xedezhzb9la3ye", "idle_stop": "1h"},
        "pod2": {"mesh_provider": "runpod", "meshctl_instance": "runpod:pod0002", "idle_stop": "1h", "mesh_pod": True},
        "pod3": {
            "mesh_provider": "runpod",
            "meshctl_instance": "runpod:pod0003",
            "idle_stop": "1h",
            "mesh_pod": True,
            "mesh_pod_volume": "/data/",
        },
        "vm": {"mesh_provider": "paperspace", "idle_stop": "1h"},  # added by address: no instance known
    }
    plan = flt().power_plan(nodes, {"paperspace": "2h"})
    assert plan["nodes"] == {
        "ps1": {"instance": "paperspace:psok2vd8", "provider": "paperspace", "id": "psok2vd8", "idle_stop": 1800},
        "ps2": {"instance": "paperspace:psxq71ab", "provider": "paperspace", "id": "psxq71ab", "idle_stop": 7200},
        # A pod comes back from its volume: the head gives it the volume's rejoin script as its start command.
        "pod2": {"instance": "runpod:pod0002", "provider": "runpod", "id": "pod0002", "idle_stop": 3600,
                 "start_command": ["bash", "/workspace/.meshctl/rejoin"]},
        "pod3": {"instance": "runpod:pod0003", "provider": "runpod", "id": "pod0003", "idle_stop": 3600,
                 "start_command": ["bash", "/data/.meshctl/rejoin"]},
        "lam2": {"instance": "lambda:0920582c7ff1", "provider": "lambda", "id": "0920582c7ff1", "idle_stop": 3600,
                 "relaunch": True},
    }  # fmt: skip
    assert set(plan["refused"]) == {"head", "lam", "lam3", "pod", "vm"}
    assert "no stop" in plan["refused"]["lam"] and "idle_terminate: true" in plan["refused"]["lam"]
    assert "mesh_pod: true" in plan["refused"]["pod"]
    no_volume = {"pod": {"meshctl_instance": "runpod:p1", "idle_stop": "1h", "mesh_pod": True, "mesh_pod_volume": ""}}
    assert "volume" in flt().power_plan(no_volume)["refused"]["pod"]
    assert "PROVIDER:NAME" in plan["refused"]["vm"] and "head is never stopped" in plan["refused"]["head"]
    assert flt().power_plan({"desk": {"mesh_provider": "local"}}) == {"nodes": {}, "refused": {}, "watched": {}}


@pytest.fixture
def program(tmp_path):
    """The program laid out as the role lays it out, with a fake scontrol that records its calls."""
    conf = tmp_path / "power"
    (conf / "keys").mkdir(parents=True)
    (conf / "keys" / "paperspace.key").write_text(KEY + "\n")
    lib = resources.collections_path(tmp_path / "lib")
    calls = tmp_path / "scontrol.calls"
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n"
                        "[ \"$1\" = show ] && echo \"$3\" | tr ',' '\\n'\nexit 0\n")  # fmt: skip
    scontrol.chmod(0o755)
    state = tmp_path / "state"
    (state / "relaunch").mkdir(parents=True)
    env = {**os.environ, "MESHCTL_POWER_DIR": str(conf), "MESHCTL_POWER_LIB": str(lib),
           "MESHCTL_POWER_STATE": str(state), "MESHCTL_POWER_LOG": str(tmp_path / "power.log"),
           "MESHCTL_SCONTROL": str(scontrol)}  # fmt: skip

    def run(action, hostlist):
        return subprocess.run([sys.executable, str(PROGRAM), action, hostlist], env=env, capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip

    run.conf, run.calls, run.log, run.state = conf, calls, tmp_path / "power.log", state
    return run


def test_a_lambda_node_that_opted_in_is_terminated_and_its_resume_asks_for_a_new_one(program):
    (program.conf / "keys" / "lambda.key").write_text(KEY + "\n")
    with Standin("lambda") as api:
        machine = api.add("gpu2", "gpu_1x_a10", 1, 1.29)
        plan = {"gpu2": {"instance": f"lambda:{machine.id}", "provider": "lambda", "id": machine.id,
                         "idle_stop": 60, "relaunch": True}}  # fmt: skip
        (program.conf / "nodes.json").write_text(json.dumps(plan))
        (program.conf / "api-urls.json").write_text(json.dumps({"lambda": api.url}))
        assert not (program.state / "relaunch" / "gpu2").exists()
        done = program("resume", "gpu2")  # never terminated by the program: nothing to launch again from
        assert done.returncode == 1 and "no launch spec" in program.log.read_text()
        assert "state=down" in program.calls.read_text()
        done = program("suspend", "gpu2")
        assert done.returncode == 0, done.stderr
        assert machine.state == "terminated"
        assert ("POST", "/api/v1/instance-operations/terminate") in api.requests
        spec = json.loads((program.state / "gpu2.json").read_text())
        assert spec == {"instance": f"lambda:{machine.id}", "instance_type": "gpu_1x_a10", "region": "us-east-1",
                        "name": "gpu2"}  # fmt: skip
        done = program("resume", "gpu2")
        assert done.returncode == 0, done.stderr
        assert (program.state / "relaunch" / "gpu2").is_file()
        assert "asked the head's relaunch service" in program.log.read_text()
        assert not [r for r in api.requests if r[1].endswith("/launch")]  # the service launches, as root


def test_suspend_and_resume_stop_and_start_the_instance(program):
    with Standin("paperspace") as api:
        machine = api.add("n1", "A4000", 1, 0.76)
        plan = {"n1": {"instance": f"paperspace:{machine.id}", "provider": "paperspace", "id": machine.id,
                       "idle_stop": 60}}  # fmt: skip
        (program.conf / "nodes.json").write_text(json.dumps(plan))
        (program.conf / "api-urls.json").write_text(json.dumps({"paperspace": api.url}))
        done = program("suspend", "n1")
        assert done.returncode == 0, done.stderr
        assert machine.state == "stopped" and ("PATCH", f"/v1/machines/{machine.id}/stop") in api.requests
        done = program("resume", "n1")
        assert done.returncode == 0, done.stderr
        assert machine.state == "running"
        log = program.log.read_text()
        assert f"suspend n1 (paperspace:{machine.id}): asked paperspace" in log and "resume n1" in log
        assert KEY not in log


def test_a_stopped_pod_is_given_its_rejoin_start_command_before_it_starts_never_while_it_runs(program):
    """Runpod: "Editing a running Pod resets it completely" (its Manage Pods page). The head stops an
    idle pod as it is, and gives the stopped pod its rejoin start command just before starting it."""
    (program.conf / "keys" / "runpod.key").write_text(KEY + "\n")
    with Standin("runpod") as api:
        machine = api.add("rp1", "NVIDIA RTX A5000", 1, 0.27)
        rejoin = ["bash", "/workspace/.meshctl/rejoin"]
        plan = {"rp1": {"instance": f"runpod:{machine.id}", "provider": "runpod", "id": machine.id, "idle_stop": 60,
                        "start_command": rejoin}}  # fmt: skip
        (program.conf / "nodes.json").write_text(json.dumps(plan))
        (program.conf / "api-urls.json").write_text(json.dumps({"runpod": api.url}))
        done = program("suspend", "rp1")
        assert done.returncode == 0, done.stderr
        assert api.requests[-1] == ("POST", f"/v2/pods/{machine.id}/action") and api.bodies[-1][2] == {"action": "stop"}
        assert ("PATCH", f"/v2/pods/{machine.id}") not in api.requests and machine.state == "stopped"
        assert program("resume", "rp1").returncode == 0 and machine.state == "running"
        changes = [r for r in api.requests if r[0] != "GET"]
        assert changes[-2:] == [("PATCH", f"/v2/pods/{machine.id}"), ("POST", f"/v2/pods/{machine.id}/action")]
        assert machine.start_cmd == rejoin and api.patched_running == []
        # Stopped and started again: the start command is already the one wanted, so no PATCH at all.
        asked = len(api.requests)
        assert program("suspend", "rp1").returncode == 0 and program("resume", "rp1").returncode == 0
        assert ("PATCH", f"/v2/pods/{machine.id}") not in api.requests[asked:] and api.patched_running == []
        assert "resume rp1 (runpod:" in program.log.read_text() and "start command set to" in program.log.read_text()


def runpod_node(program, api, machine, volume=None):
    """rp1 as the role lays it out: its pod, idle_stop, the volume's rejoin script; a network VOLUME."""
    (program.conf / "keys" / "runpod.key").write_text(KEY + "\n")
    if volume:
        api.add_volume(volume, "EU-RO-1")
        machine.mounts, machine.data_center = {"network": [{"volumeId": volume, "path": "/workspace"}]}, "EU-RO-1"
    plan = {"rp1": {"instance": f"runpod:{machine.id}", "provider": "runpod", "id": machine.id, "idle_stop": 60,
                    "start_command": ["bash", "/workspace/.meshctl/rejoin"]}}  # fmt: skip
    (program.conf / "nodes.json").write_text(json.dumps(plan))
    (program.conf / "api-urls.json").write_text(json.dumps({"runpod": api.url}))


@pytest.mark.parametrize("how", ["refuse", "zero"])
def test_a_pod_whose_host_has_no_gpu_left_comes_back_on_a_new_pod_of_its_network_volume(program, how):
    """The Zero GPU Pods page: a stopped pod stays on its host; once its GPUs are rented by someone
    else, its start is refused, or (the console's way) it starts without them. The node then runs on
    a new pod of its network volume, in the volume's data centre, and the old pod is terminated;
    the next suspend and resume act on the new one."""
    with Standin("runpod") as api:
        machine = api.add("rp1", "NVIDIA RTX A5000", 1, 0.27)
        runpod_node(program, api, machine, volume="vol-e2e1")
        machine.env = {"HF_HOME": "/workspace/hf"}
        assert program("suspend", "rp1").returncode == 0 and machine.state == "stopped"
        machine.host_full = how
        done = program("resume", "rp1")
        assert done.returncode == 0, done.stderr + program.log.read_text()
        new = [m for m in api.backend.machines.values() if m.name == "rp1" and m.id != machine.id]
        assert len(new) == 1 and new[0].state == "running" and machine.state == "terminated", new
        created = [b for m, path, b in api.bodies if (m, path) == ("POST", "/v2/pods")]
        assert created == [{"name": "rp1", "image": "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404",
                            "gpu": {"id": "NVIDIA RTX A5000", "count": 1}, "cloud": "SECURE", "ports": ["22/tcp"],
                            "mounts": {"network": [{"volumeId": "vol-e2e1", "path": "/workspace"}]},
                            "args": "bash /workspace/.meshctl/rejoin", "env": {"HF_HOME": "/workspace/hf"},
                            "disk": 50, "dataCenterIds": ["EU-RO-1"]}]  # fmt: skip
        assert api.patched_running == []
        assert not program.calls.exists() or "state=down" not in program.calls.read_text()
        assert f"a new pod {new[0].id} on its network volume" in program.log.read_text()
        moved = json.loads((program.state / "rp1.moved").read_text())
        assert moved == {"from": machine.id, "to": new[0].id}
        assert program("suspend", "rp1").returncode == 0 and new[0].state == "stopped"
        assert program("resume", "rp1").returncode == 0 and new[0].state == "running"
        assert len([m for m in api.backend.machines.values() if m.name == "rp1"]) == 2  # no third pod


def test_a_new_pod_whose_create_fails_is_looked_up_and_a_refused_one_leaves_the_old_pod(program):
    """Never two pods for one node: a create answered 5xx after it was done is found by the node's
    name; a create refused (no capacity in the volume's data centre) leaves the stopped pod as it was
    and the node DOWN with the reason."""
    with Standin("runpod") as api:
        machine = api.add("rp1", "NVIDIA RTX A5000", 1, 0.27, state="stopped")
        runpod_node(program, api, machine, volume="vol-e2e1")
        machine.host_full = "refuse"
        api.backend.capacity = 1  # the start is refused for the host; one create is possible
        api.fail_create_after = 502
        assert program("resume", "rp1").returncode == 0, program.log.read_text()
        pods = [m for m in api.backend.machines.values() if m.name == "rp1"]
        assert [m.state for m in pods] == ["terminated", "running"], pods
        assert json.loads((program.state / "rp1.moved").read_text())["to"] == pods[1].id
        api.fail_create_after = None
        assert program("suspend", "rp1").returncode == 0 and pods[1].state == "stopped"
        pods[1].host_full = "refuse"  # and again: no capacity left for a new pod either
        assert program("resume", "rp1").returncode == 1
        assert pods[1].state == "stopped" and len([m for m in api.backend.machines.values() if m.name == "rp1"]) == 2
        calls = program.calls.read_text()
        assert "state=down reason=meshctl: runpod could not start it: pod " in calls and "nor could a new pod" in calls


def test_a_pod_with_a_host_bound_volume_whose_host_is_full_is_marked_down_and_kept(program):
    """Its data is on that host: it is never terminated for this; the reason says what to do."""
    with Standin("runpod") as api:
        machine = api.add("rp1", "NVIDIA RTX A5000", 1, 0.27, state="stopped")
        runpod_node(program, api, machine)
        machine.host_full = "zero"
        assert program("resume", "rp1").returncode == 1
        assert machine.state == "stopped" and [m.name for m in api.backend.machines.values()] == ["rp1"]
        calls = program.calls.read_text()
        assert "update nodename=rp1 state=down reason=meshctl: runpod could not start it" in calls, calls
        assert "started with 0 of 1 GPUs" in calls and "tied to that host" in calls


def test_a_start_answered_currently_starting_is_a_start_not_a_node_down(program):
    """Paperspace answers 409 "This machine is currently starting." to a start of a machine on its way
    (a resume asked twice, a start from the console): the node is not marked DOWN."""
    with Standin("paperspace") as api:
        machine = api.add("n1", "A4000", 1, 0.76, state="booting")
        plan = {"n1": {"instance": f"paperspace:{machine.id}", "provider": "paperspace", "id": machine.id,
                       "idle_stop": 60}}  # fmt: skip
        (program.conf / "nodes.json").write_text(json.dumps(plan))
        (program.conf / "api-urls.json").write_text(json.dumps({"paperspace": api.url}))
        done = program("resume", "n1")
        assert done.returncode == 0, done.stderr + program.log.read_text()
        assert ("PATCH", f"/v1/machines/{machine.id}/start", 409) in [a[:3] for a in api.answers]
        assert "state=down" not in (program.calls.read_text() if program.calls.exists() else "")


def test_a_refused_start_marks_the_node_down_with_the_providers_reason(program):
    with Standin("paperspace") as api:
        machine = api.add("n1", "A4000", 1, 0.76, state="stopped")
        api.backend.capacity = 0
        plan = {"n1": {"instance": f"paperspace:{machine.id}", "provider": "paperspace", "id": machine.id,
                       "idle_stop": 60}}  # fmt: skip
        (program.conf / "nodes.json").write_text(json.dumps(plan))
        (program.conf / "api-urls.json").write_text(json.dumps({"paperspace": api.url}))
        done = program("resume", "n1")
        assert done.returncode == 1
        calls = program.calls.read_text()
        assert "update nodename=n1 state=down reason=meshctl: paperspace could not start it" in calls
        assert "out of capacity" in calls and machine.state == "stopped"
        assert "FAILED" in program.log.read_text()


def test_a_providers_words_reach_the_log_and_slurms_reason_without_escape_sequences(program):
    """A refusal carrying OSC 52 (clipboard), CSI, a bidi mark and a line break: every job user reads
    the reason in `sinfo -R`, and the log is read in a terminal; neither gets them."""
    with Standin("paperspace") as api:
        machine = api.add("n1", "A4000", 1, 0.76, state="stopped")
        api.backend.capacity = 0
        api.backend.refusal = 'no capacity\x1b]52;c;cm0gLXJmIH4=\x07 \x1b[2J\x9b31m"quoted"\u061c\u202e\nnext line'
        plan = {"n1": {"instance": f"paperspace:{machine.id}", "provider": "paperspace", "id": machine.id,
                       "idle_stop": 60}}  # fmt: skip
        (program.conf / "nodes.json").write_text(json.dumps(plan))
        (program.conf / "api-urls.json").write_text(json.dumps({"paperspace": api.url}))
        assert program("resume", "n1").returncode == 1
    calls, log = program.calls.read_text(), program.log.read_text()
    for said in (calls, log):
        assert not set(said) & {"\x1b", "\x07", "\x9b", "\u061c", "\u202e"}, repr(said)
        assert "cm0gLXJmIH4" not in said and "no capacity" in said  # the sequence whole, payload too
    assert "reason=meshctl: paperspace could not start it" in calls and "'quoted'" in calls
    assert len(log.splitlines()) == 1 and "next line" in log  # one line each


def test_the_reason_meshctl_gives_slurm_is_one_clean_bounded_line():
    text = resources.plugin("module_utils.mesh_text")
    assert text.slurm_reason('a\x1b[31m "b"\t\n\u202ec' + "x" * 300).startswith("a 'b' c")
    assert len(text.slurm_reason("x" * 300)) == text.REASON_LIMIT


def test_a_node_it_does_not_know_is_left_alone_and_said(program):
    (program.conf / "nodes.json").write_text("{}")
    done = program("suspend", "head")
    assert done.returncode == 1 and "head: not a node meshctl stops" in program.log.read_text()
    done = program("fail", "head")
    assert done.returncode == 1


def test_a_resume_that_timed_out_is_marked_down_with_why(program):
    (program.conf / "nodes.json").write_text(json.dumps({"n1": {"instance": "paperspace:ps1", "provider": "paperspace",
                                                                "id": "ps1", "idle_stop": 60}}))  # fmt: skip
    done = program("fail", "n1")
    assert done.returncode == 0
    assert "reason=meshctl: paperspace:ps1 did not come back within ResumeTimeout" in program.calls.read_text()


def test_the_features_slurmctld_holds_are_updated_only_where_they_differ():
    update = resources.plugin("module_utils.mesh_slurm_nodes").features_to_update
    held = ["head|meshctl,meshctl_on,local", "head|meshctl,meshctl_on,local", "n1|meshctl,meshctl_on,paperspace",
            "n2|meshctl,gpu,meshctl_idle_1800,a4000,paperspace", "n4|(null)"]  # fmt: skip
    wanted = {"head": "meshctl,local,meshctl_on", "n1": "meshctl,meshctl_idle_1800,paperspace",
              "n3": "meshctl,meshctl_on", "n2": "meshctl,gpu,meshctl_idle_1800,a4000,paperspace",
              "n4": "meshctl"}  # fmt: skip
    assert update(held, wanted) == {"n1": "meshctl,meshctl_idle_1800,paperspace", "n4": "meshctl"}
    assert update([], wanted) == {}  # nodes slurmctld does not list register anew


def test_an_idle_stop_that_is_no_duration_is_refused_when_the_mesh_is_loaded(mesh):
    import yaml

    from meshctl.errors import InventoryError

    data = yaml.safe_load(mesh.inventory.read_text())
    data["all"]["hosts"]["head"]["idle_stop"] = "30 minutess"
    mesh.inventory.write_text(yaml.safe_dump(data))
    with pytest.raises(InventoryError) as caught:
        mesh.load()
    assert "node head: idle_stop '30 minutess' is not a duration" in caught.value.message
    assert caught.value.exit_code == 3 and "1h30m" in caught.value.hint
    data["all"]["hosts"]["head"]["idle_stop"] = "30 minutes"  # a duration, but the head is never stopped
    mesh.inventory.write_text(yaml.safe_dump(data))
    with pytest.raises(InventoryError, match="the head is never stopped"):  # as `meshctl autostop` refuses it
        mesh.load()
    data["all"]["hosts"]["head"]["idle_stop"] = False
    mesh.inventory.write_text(yaml.safe_dump(data))
    assert mesh.load()[0][0].extra["idle_stop"] is False
