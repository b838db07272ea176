"""The node health check (roles/slurm_node/templates/node_health.sh.j2) run for real, with sinfo,
scontrol, munge and unmunge replaced by recorders on PATH: what it decides, and what it tells Slurm."""

import os
import stat
import subprocess
from pathlib import Path

import jinja2
import pytest

from meshctl import resources

TEMPLATES = Path(__file__).resolve().parents[3] / "roles" / "slurm_node" / "templates"


def quote(value):  # Ansible's `quote` filter (shlex.quote)
    import shlex

    return shlex.quote(str(value))


SHARE_ID = "ab" * 32


def program(tmp_path: Path, gpus: int, min_free_mb: int = 1, wrapper=None, share: str = "/mnt/x") -> Path:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined)
    env.filters["comment"] = lambda text: "\n".join(f"# {line}" for line in text.splitlines())
    env.filters["quote"] = quote
    env.filters["meshctl.mesh.slurm_power_flags"] = resources.plugin("filter.slurm_states").slurm_power_flags
    text = env.get_template("node_health.sh.j2").render(
        ansible_managed="Ansible managed", inventory_hostname="gpu1", slurm_controller="head", mesh_pod=False,
        mesh_hw={"gpus": [{"file": f"/dev/nvidia{i}"} for i in range(gpus)]}, slurm_health_share_path=share,
        mesh_share_id=SHARE_ID, mesh_share_marker=".meshctl-share",
        slurm_health_share_seen=str(tmp_path / "seen" / "share-seen"),
        slurm_health_max_clock_skew=120, slurm_health_min_free_mb=min_free_mb, slurm_spool_dir=str(tmp_path),
        slurm_degraded_conf_dir=str(tmp_path / "degraded"),
        **({"tailscale_outbound_wrapper": wrapper} if wrapper else {}),
    )  # fmt: skip
    path = tmp_path / "node-health"
    path.write_text(text)
    path.chmod(0o755)
    return path


def stubs(tmp_path: Path, state: str, reason: str, munge_ok: bool = True) -> Path:
    """sinfo answering STATE and REASON; scontrol recording its arguments; munge working or not."""
    folder = tmp_path / "bin"
    folder.mkdir(parents=True)
    scripts = {
        "sinfo": f'case "$*" in *%E*) echo {quote(reason)} ;; *%T*) echo {quote(state)} ;; esac',
        "scontrol": f'printf "%s\\n" "$*" >> {tmp_path}/scontrol.log',
        "systemctl": f'printf "systemctl %s\\n" "$*" >> {tmp_path}/scontrol.log',
        "munge": "echo credential" if munge_ok else "exit 1",
        "unmunge": "cat >/dev/null",
    }
    for name, body in scripts.items():
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(stat.S_IRWXU)
    return folder


def run(tmp_path, gpus, state="idle", reason="none", munge_ok=True, min_free_mb=1, wrapper=None, share="/mnt/x"):
    if any(Path("/dev").glob("nvidia[0-9]*")):
        pytest.skip("this machine has NVIDIA devices: the GPU count would not be the test's")
    path = f"{stubs(tmp_path, state, reason, munge_ok)}:{os.environ['PATH']}"
    done = subprocess.run([str(program(tmp_path, gpus, min_free_mb, wrapper, share))], capture_output=True, text=True,
                          check=False,
                          env={**os.environ, "PATH": path})  # fmt: skip
    log = tmp_path / "scontrol.log"
    return done, log.read_text().splitlines() if log.exists() else []


def test_a_healthy_node_is_left_alone(tmp_path):
    done, told = run(tmp_path, gpus=0)
    assert done.returncode == 0 and told == [] and done.stderr == ""


LOST = "update nodename=gpu1 state=drain reason=meshctl health: GPUs seen 0 of 2, missing /dev/nvidia0 /dev/nvidia1"


def test_a_lost_gpu_drains_the_node_with_the_reason(tmp_path):
    done, told = run(tmp_path, gpus=2)  # this machine has no /dev/nvidia*: 0 of 2 seen
    assert told == [LOST]  # the reason names the devices that are missing
    assert "GPUs seen 0 of 2" in done.stderr and done.returncode == 0


def test_a_node_slurmd_registered_without_its_gpus_is_drained_once(tmp_path):
    """slurmd-start without a GPU device: Slurm calls the registration invalid (fewer GPUs than the
    node's record), the health check's drain stays, with its reason, and is not said again."""
    assert run(tmp_path / "a", gpus=2, state="inval")[1] == [LOST]
    assert run(tmp_path / "b", gpus=2, state="inval", reason=LOST.split("reason=")[1])[1] == []


def test_gpus_back_under_a_slurmd_started_without_them_start_it_again(tmp_path):
    """slurmd-start left its folder: slurmd runs without the GPUs. Once they are back, slurmd starts
    again with them (configless); that start's check resumes the node."""
    (tmp_path / "degraded").mkdir()
    done, told = run(tmp_path, gpus=0, state="inval", reason="meshctl health: GPUs seen 1 of 2, missing /dev/nvidia1")
    assert told == ["systemctl restart --no-block slurmd"] and "GPU devices back" in done.stderr
    (tmp_path / "b" / "degraded").mkdir(parents=True)
    assert run(tmp_path / "b", gpus=2, state="inval")[1] == [LOST]  # still missing: drained, not restarted


def test_every_problem_is_named_in_one_reason(tmp_path):
    _done, told = run(tmp_path, gpus=1, munge_ok=False, min_free_mb=10**9)
    assert len(told) == 1 and told[0].startswith("update nodename=gpu1 state=drain reason=meshctl health: GPUs seen 0")
    assert "munge does not work" in told[0] and "MB free on /" in told[0]


def test_the_same_reason_is_not_said_again(tmp_path):
    _done, told = run(tmp_path, gpus=2, state="drained", reason=LOST.split("reason=")[1])
    assert told == []  # a new reason would restamp the node every interval


def test_a_node_it_drained_is_resumed_once_healthy(tmp_path):
    _done, told = run(tmp_path, gpus=0, state="drained", reason="meshctl health: GPUs seen 1 of 2")
    assert told == ["update nodename=gpu1 state=resume"]


def test_slurms_own_drain_for_fewer_gpus_is_resumed_once_they_are_all_there(tmp_path):
    """Slurm 24.11 puts its own reason over slurmd-start's when a node registers fewer GPUs: once
    slurmd started again with every GPU, the node is resumed (seen on CI, scenario debian13)."""
    slurms = "gres/gpu count reported lower than configured (1 < 2) [slurm@2026-11-26T07:20:01]"
    assert run(tmp_path / "a", gpus=0, state="drained", reason=slurms)[1] == ["update nodename=gpu1 state=resume"]
    assert run(tmp_path / "b", gpus=2, state="drained", reason=slurms)[1] == [LOST]  # still missing: ours now


def test_a_reason_slurm_kept_after_a_resume_is_history(tmp_path):
    """Slurm 24.11 keeps a resumed node's reason (idle|meshctl health: ...): it is neither resumed
    again nor taken for a drain that is already there when the GPU goes again."""
    kept = "meshctl health: GPUs seen 1 of 2"
    assert run(tmp_path / "a", gpus=0, state="idle", reason=kept)[1] == []
    _done, told = run(tmp_path / "b", gpus=2, state="idle", reason=LOST.split("reason=")[1])
    assert told == [LOST]
    assert run(tmp_path / "c", gpus=2, state="idle", reason="disk replaced [admin@2026-11-24T10:00]")[1] == [LOST]


OTHERS = [("drained", "disk replaced [admin@2026-11-24T10:00]"), ("down*", "Not responding"), ("idle~", "none"),
          ("idle#", "none"), ("idle%", "none"), ("mixed!", "none")]  # fmt: skip


@pytest.mark.parametrize(("state", "reason"), OTHERS)
@pytest.mark.parametrize("gpus", [2, 0])  # failing, then passing, the checks
def test_a_node_taken_out_by_someone_else_is_left_to_them(tmp_path, state, reason, gpus):
    assert run(tmp_path, gpus=gpus, state=state, reason=reason)[1] == []  # neither drained over it nor resumed


def test_on_a_node_without_tun_slurm_is_asked_through_tailscaleds_proxy(tmp_path):
    """slurmd gives the program a bare environment: the wrapper slurmd itself runs under is named."""
    wrap = tmp_path / "proxychains4"
    wrap.write_text(f'#!/bin/sh\nshift 3\nprintf "%s\\n" "$1" >> {tmp_path}/through-proxy.log\nexec "$@"\n')
    wrap.chmod(0o755)
    _done, told = run(tmp_path, gpus=2, wrapper=[str(wrap), "-q", "-f", "/etc/proxychains4.conf"])
    assert told == [LOST]
    assert (tmp_path / "through-proxy.log").read_text().split() == ["sinfo", "sinfo", "scontrol"]


def test_a_share_that_was_the_heads_and_is_a_local_folder_now_drains_the_node(tmp_path):
    """The classic silent failure: the mount went and left the local folder. Once a node has seen
    the head's marker, a folder without it drains the node with the fix; the marker back resumes it."""
    share = tmp_path / "share"
    share.mkdir()
    (share / ".meshctl-share").write_text(SHARE_ID + "\n")
    assert run(tmp_path, gpus=0, share=str(share))[1] == []
    assert (tmp_path / "seen" / "share-seen").exists()
    (share / ".meshctl-share").unlink()  # the local folder under a mount that failed: no marker
    (tmp_path / "scontrol.log").unlink(missing_ok=True)
    import shutil

    shutil.rmtree(tmp_path / "bin")
    done, told = run(tmp_path, gpus=0, share=str(share))
    wanted = f"meshctl health: share {share} is not the head's (mount it: mount {share})"
    assert told == [f"update nodename=gpu1 state=drain reason={wanted}"] and "not the head's" in done.stderr
    (share / ".meshctl-share").symlink_to(tmp_path / "elsewhere")  # a link is never read through
    (tmp_path / "elsewhere").write_text(SHARE_ID + "\n")
    shutil.rmtree(tmp_path / "bin")
    (tmp_path / "scontrol.log").unlink()
    assert run(tmp_path, gpus=0, share=str(share))[1][0].startswith("update nodename=gpu1 state=drain")


def test_a_node_that_never_saw_the_share_and_cannot_mount_nfs_is_not_drained_for_it(tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    _done, told = run(tmp_path, gpus=0, share=str(share))
    assert told == [] and not (tmp_path / "seen").exists()
