"""meshctl doctor: iperf3's output read on the node (module mesh_netprobe), the tailnet path of a
link, and what meshctl accepts of the nodes' reports (meshctl/ops/doctor.py)."""

import json
import os
import subprocess
import sys
import time

import pytest

from meshctl import resources
from meshctl.ops import doctor
from tests.conftest import fixture_text

NAMES = {"head", "gpu1", "cpu1"}


@pytest.fixture
def probe():
    return resources.plugin("module_utils.mesh_iperf")


def test_a_measured_link_gives_throughput_and_round_trip(probe):
    result = probe.iperf_result(fixture_text("iperf3/client-loopback-3.12.txt"))
    assert result["error"] == "" and result["mean_rtt_us"] == 64
    assert round(result["bits_per_second"]) == 21818929817  # end.sum_received: what arrived


def test_a_refused_connection_is_said_in_iperf3s_words(probe):
    result = probe.iperf_result(fixture_text("iperf3/client-refused-3.12.txt"))
    assert result == {"bits_per_second": None, "mean_rtt_us": None,
                      "error": "unable to connect to server: Connection refused"}  # fmt: skip


@pytest.mark.parametrize("text", ["", "iperf3: error - unable to connect", "[1, 2]", '{"end": {}}'])
def test_output_that_is_not_a_measurement_is_an_error_not_a_number(probe, text):
    result = probe.iperf_result(text)
    assert result["bits_per_second"] is None and result["error"]


def test_the_server_listens_on_the_mesh_address_and_ends_by_itself(probe):
    """Bound to the mesh address (every address only when that is none of the node's own),
    wrapped in timeout so a server an interrupted run left ends by itself."""
    assert probe.server_argv(5201, "100.64.0.2", 900) == [
        "timeout", "900", "iperf3", "--server", "--port", "5201", "--bind", "100.64.0.2"]  # fmt: skip
    assert "--bind" not in probe.server_argv(5201, "*", 900)
    assert probe.local_address("127.0.0.1") is True
    assert probe.local_address("192.0.2.77") is False  # TEST-NET-1: no address of this machine


def test_stop_signals_only_a_server_of_its_own(probe, tmp_path):
    """A PID file naming another process (reused PID, a planted file) is removed, nothing signalled."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        pidfile = tmp_path / "iperf3.pid"
        pidfile.write_text(f"{other.pid}\n")
        assert probe.ours(other.pid) is False
        assert probe.stop(str(pidfile)) is True and not pidfile.exists()
        assert other.poll() is None  # still running: not ours, not signalled
        notours = subprocess.Popen(["timeout", "30", "sleep", "30"], start_new_session=True)
        assert probe.ours(notours.pid) is False  # timeout, but not iperf3
        notours.kill()
        notours.wait()
        # A server of ours (a stand-in iperf3 that only sleeps): its whole process group is ended.
        fake = tmp_path / "iperf3"
        fake.write_text("#!/bin/sh\nsleep 30\n")
        fake.chmod(0o755)
        server = subprocess.Popen(["timeout", "30", str(fake), "--server"], start_new_session=True)
        pidfile.write_text(f"{server.pid}\n")
        time.sleep(0.2)
        assert probe.ours(server.pid) is True
        assert probe.stop(str(pidfile)) is True
        assert server.wait(timeout=5) is not None and not pidfile.exists()
        assert not os.path.exists(f"/proc/{server.pid}")
    finally:
        other.kill()
        other.wait()


def status(peers, tun=True):
    """`tailscale status --json` in its documented shape (ipnstate.Status: TUN, Peer's TailscaleIPs, CurAddr, Relay)."""
    peer = {f"nodekey:{i}": {"HostName": f"n{i}", "TailscaleIPs": [ip, "fd7a::1"], "CurAddr": cur, "Relay": relay}
            for i, (ip, cur, relay) in enumerate(peers)}  # fmt: skip
    return json.dumps({"BackendState": "Running", "TUN": tun, "Peer": peer,
                       "Self": {"HostName": "head", "TailscaleIPs": ["100.64.0.1"]}})  # fmt: skip


def test_the_path_of_a_link_is_direct_relayed_or_idle_and_says_userspace():
    path = resources.plugin("module_utils.mesh_tailscale_status").tailscale_peer_path
    text = status([("100.64.0.2", "203.0.113.7:41641", "fra"), ("100.64.0.3", "", "nue"), ("100.64.0.4", "", "")])
    assert path(text, "100.64.0.2") == "direct"
    assert path(text, "100.64.0.3") == "relayed (DERP nue)"
    assert path(text, "100.64.0.4") == "idle"
    assert path(text, "100.64.0.9") == "not a peer"
    assert path(status([("100.64.0.2", "203.0.113.7:41641", "fra")], tun=False), "100.64.0.2") == "userspace, direct"
    assert path("tailscaled is not running", "100.64.0.2").startswith("unknown")


def test_links_are_checked_before_they_are_shown():
    report = {"links": [
        {"name": "gpu1", "address": "100.64.0.2", "bits_per_second": 9.4e8, "mean_rtt_us": 1800, "error": ""},
        {"name": "cpu1", "address": "100.64.0.3", "bits_per_second": None, "mean_rtt_us": None,
         "error": "unable to connect to server: Connection refused"},
        {"name": "attacker", "address": "1.2.3.4", "bits_per_second": 1.0},  # no node of the mesh
        {"name": "head", "address": "100.64.0.1", "bits_per_second": 1.0},  # itself
        {"name": "cpu1", "bits_per_second": "fast", "mean_rtt_us": float("nan"), "error": "\x1b[31mred\x1b[0m"},
    ], "tailscale": None}  # fmt: skip
    links, refused = doctor.links_of("head", report, NAMES, on_tailnet=False)
    assert [(k.target, k.mbps, k.rtt_ms, k.path) for k in links] == [
        ("gpu1", 940.0, 1.8, "lan"), ("cpu1", None, None, "lan"), ("cpu1", None, None, "lan")]  # fmt: skip
    assert links[1].error == "unable to connect to server: Connection refused"
    assert "\x1b" not in links[2].error  # no control character reaches the terminal
    assert refused == "a link to no node of the mesh"
    assert doctor.links_of("head", {"links": "nope"}, NAMES, False) == ([], "no list of links")


def test_the_tailnet_path_comes_from_the_measuring_nodes_status():
    report = {"links": [{"name": "gpu1", "address": "100.64.0.2", "bits_per_second": 1e8, "mean_rtt_us": 900}],
              "tailscale": status([("100.64.0.2", "", "fra")])}  # fmt: skip
    (link,), _ = doctor.links_of("head", report, NAMES, on_tailnet=True)
    assert link.path == "relayed (DERP fra)" and link.mbps == 100.0 and link.rtt_ms == 0.9


def test_the_allreduce_report_is_checked():
    line = json.dumps({"world_size": 3, "backend": "gloo", "results": [
        {"megabytes": 1, "seconds": 0.012, "algbw_gbps": 0.699, "busbw_gbps": 0.932},
        {"megabytes": 16, "seconds": "slow", "algbw_gbps": 1, "busbw_gbps": 1}]})  # fmt: skip
    result = doctor.allreduce_of({"allreduce": {"rc": 0, "lines": ["warming up", line], "error": ""}})
    assert result.world_size == 3 and result.error == "" and len(result.results) == 1  # the malformed row dropped
    assert result.results[0]["busbw_gbps"] == 0.932
    no_torch = json.dumps({"error": "no PyTorch in the job environment (job_env_torch)"})
    assert doctor.allreduce_of({"allreduce": {"rc": 0, "lines": [no_torch]}}).error.startswith("no PyTorch")
    failed = doctor.allreduce_of({"allreduce": {"rc": 1, "lines": [], "error": "srun: error: Unable to allocate"}})
    assert failed.error == "srun failed: srun: error: Unable to allocate"
    assert doctor.allreduce_of(None).error.startswith("not run")


def test_doctor_on_one_node_says_two_are_needed_before_running_anything(mesh, monkeypatch):
    from click.testing import CliRunner

    from meshctl import runner
    from meshctl.cli import cli

    ran = []
    monkeypatch.setattr(runner, "run_playbook", lambda *a, **kw: ran.append(a))
    out = CliRunner().invoke(cli, ["doctor", "--mesh", str(mesh.path)])
    assert out.exit_code == 2 and "measures the links between two nodes or more; the mesh has 1 active" in out.output
    assert "meshctl add-node" in out.output and ran == []


def test_the_allreduce_not_run_says_what_stopped_the_head():
    from meshctl.ops import doctor

    assert doctor.allreduce_of(None).error == "not run (the head could not be reached)"
    said = doctor.allreduce_of(None, "Start iperf3: iperf3: command not found").error
    assert said == "not run (Start iperf3: iperf3: command not found)"
