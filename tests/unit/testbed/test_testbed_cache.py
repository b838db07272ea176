"""The test bed's package cache (meshctl/localmesh/cache.py) and the suite's profile report
(scripts/ansible_profile.py): pure parts."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from meshctl.errors import EnvironmentProblem
from meshctl.localmesh import cache, images

REPO = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("ansible_profile", REPO / "scripts" / "ansible_profile.py")
ansible_profile = importlib.util.module_from_spec(spec)
sys.modules["ansible_profile"] = ansible_profile  # dataclasses look their module up
spec.loader.exec_module(ansible_profile)


def state(**changes) -> cache.CacheState:
    base = {"answering": False, "installed": True, "configured": True, "is_root": True}
    return cache.CacheState(**{**base, **changes})


def test_a_cache_that_answers_is_left_alone():
    assert cache.plan(state(answering=True)) == []
    assert cache.plan(state(answering=True, is_root=False, installed=False)) == []


def test_a_missing_cache_is_installed_configured_started_and_waited_for():
    assert cache.plan(state(installed=False, configured=False)) == ["install", "configure", "start", "wait"]
    assert cache.plan(state(configured=False)) == ["configure", "start", "wait"]
    assert cache.plan(state()) == ["start", "wait"]


def test_starting_one_without_root_says_what_to_do():
    with pytest.raises(EnvironmentProblem) as caught:
        cache.plan(state(is_root=False))
    assert str(cache.PORT) in str(caught.value) and "root" in caught.value.hint


def test_the_configuration_asks_the_nodes_own_mirror_on_our_port():
    files = cache.config_text("http://mirror.example/debian")
    assert files["backends_debian"] == "http://mirror.example/debian/\n"
    assert f"Port: {cache.PORT}" in files["acng.conf"].splitlines()
    assert cache.PORT != 3142  # beside a machine's own apt-cacher-ng, never instead of it


def test_traffic_reads_the_transfer_log():
    log = "\n".join(
        [
            "1795644408|I|140632|127.0.0.1|debrep/dists/trixie/InRelease",
            "1795644408|O|140636|127.0.0.1|debrep/dists/trixie/InRelease",
            "1795644409|O|1000|172.17.0.2|debrep/pool/main/m/munge/munge.deb",
            "garbage line",
            "1795644409|E|2512|172.17.0.2|debrep/dists/bookworm/InRelease [HTTP error, code: 503]",
        ]
    )
    assert cache.traffic(log) == (140632, 141636)


def test_the_node_image_names_the_cache_only_through_its_auto_detect_script():
    script = images.LAYER_SCRIPT.format(packages="python3", cache_port=cache.PORT)
    assert 'Acquire::http::Proxy-Auto-Detect "/usr/local/lib/meshctl-testbed/apt-proxy"' in script
    assert f"/dev/tcp/$ip/{cache.PORT}" in script and "echo DIRECT" in script


def test_the_auto_detect_script_names_the_gateway_or_direct(tmp_path):
    """The script run by bash against a copied route table: the gateway's address when a port
    answers there, DIRECT when nothing does (here: a port nothing listens on)."""
    script = images.LAYER_SCRIPT.format(packages="x", cache_port=1)
    body = script.split("<<'SCRIPT'\n", 1)[1].split("\nSCRIPT\n", 1)[0]
    routes = tmp_path / "route"
    routes.write_text(
        "Iface\tDestination\tGateway \tFlags\n"
        "eth0\t00000000\t0100A8C0\t0003\n"  # default via 192.168.0.1
        "eth0\t0000A8C0\t00000000\t0001\n"
    )
    runnable = tmp_path / "apt-proxy"
    runnable.write_text(body.replace("/proc/net/route", str(routes)).replace('$ip/1"', '$ip/1" && false'))
    out = subprocess.run(["bash", str(runnable)], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "DIRECT"
    probe = body.replace("/proc/net/route", str(routes)).replace(
        'timeout 1 bash -c "exec 3<>/dev/tcp/$ip/1"', '[ "$ip" = 192.168.0.1 ]'
    )
    runnable.write_text(probe)
    out = subprocess.run(["bash", str(runnable)], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "http://192.168.0.1:1"


LOG = """\
2026-11-25 21:57:50,973 p=3143 u=root n=ansible INFO| PLAY [Validate the inventory] ****
2026-11-25 21:57:50,980 p=3143 u=root n=ansible INFO| TASK [Check there is exactly one head] ****
2026-11-25 21:57:51,010 p=3143 u=root n=ansible INFO| ok: [localhost]
2026-11-25 21:57:51,010 p=4000 u=root n=ansible INFO| TASK [meshctl.mesh.slurm : Install the Slurm packages] ****
2026-11-25 21:57:52,000 p=3143 u=root n=ansible INFO| TASK [meshctl.mesh.mlflow : Wait for MLflow to answer] ****
2026-11-25 21:57:55,010 p=4000 u=root n=ansible INFO| RUNNING HANDLER [meshctl.mesh.slurm : Restart slurmd] ****
2026-11-25 21:57:56,010 p=4000 u=root n=ansible INFO| PLAY RECAP ****
2026-11-25 21:57:59,000 p=3143 u=root n=ansible INFO| PLAY RECAP ****
"""


def test_each_task_lasts_until_the_next_entry_of_its_own_run():
    found = ansible_profile.steps(LOG.splitlines())
    got = {(s.run, s.name): round(s.seconds, 2) for s in found}
    assert got == {
        ("3143", "Check there is exactly one head"): 1.02,
        ("3143", "meshctl.mesh.mlflow : Wait for MLflow to answer"): 7.0,
        ("4000", "meshctl.mesh.slurm : Install the Slurm packages"): 4.0,
        ("4000", "meshctl.mesh.slurm : Restart slurmd"): 1.0,
    }
    kinds = {s.name: s.category for s in found}
    assert kinds["meshctl.mesh.slurm : Install the Slurm packages"] == "install and download"
    assert kinds["meshctl.mesh.mlflow : Wait for MLflow to answer"] == "wait on daemons and timers"
    assert kinds["meshctl.mesh.slurm : Restart slurmd"] == "roles' other tasks"
    assert kinds["Check there is exactly one head"].startswith("the tests' own steps")


def test_the_report_sums_by_kind_and_role():
    text = ansible_profile.report(ansible_profile.steps(LOG.splitlines()))
    assert text.splitlines()[0] == "2 Ansible runs, 4 task runs, 13 s of task time in all"
    assert "        7 s  53.8 %      1x  mlflow" in text
    assert "        5 s  38.4 %      2x  slurm" in text


spec = importlib.util.spec_from_file_location("test_seconds", REPO / "scripts" / "test_seconds.py")
test_seconds = importlib.util.module_from_spec(spec)
sys.modules["test_seconds"] = test_seconds
spec.loader.exec_module(test_seconds)


def test_seconds_are_summed_by_file_with_a_fixtures_setup():
    lines = [
        "[e2e 47:30] 375.01s call     tests/e2e/test_power_save.py::test_an_idle_rented_node_is_stopped",
        "[e2e 47:30] 312.49s setup    tests/e2e/test_power_save.py::test_an_idle_rented_node_is_stopped",
        "223.84s call     tests/e2e/test_cli_ssh.py::test_add_node_makes_it_idle",
        "[e2e 47:30] 0.50s teardown tests/e2e/test_cli_ssh.py::test_add_node_makes_it_idle",
        "[e2e 47:31] 45 passed, 770 deselected in 2883.93s (0:48:03)",
    ]
    found = test_seconds.by_file(lines)
    assert found == {
        "tests/e2e/test_power_save.py": {"setup": 312.49, "call": 375.01, "teardown": 0.0},
        "tests/e2e/test_cli_ssh.py": {"setup": 0.0, "call": 223.84, "teardown": 0.5},
    }
    text = test_seconds.table(found).splitlines()
    assert text[1].split() == ["688", "312", "375", "tests/e2e/test_power_save.py"]
    assert text[-1].split() == ["912", "in", "all"]
