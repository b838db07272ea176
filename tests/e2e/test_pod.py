"""A Runpod-like pod joins the mesh over real SSH: no systemd, no TUN, out only through Tailscale.

The pod is a container whose PID 1 is a plain process (docker's init, then a shell that started
sshd), with no /dev/net/tun, no NET_ADMIN and RUNPOD_POD_ID in its environment. A firewall set up
from the host side in the pod's network namespace (nsenter + iptables) lets the pod's processes
open connections to the head only as the user the stand-in tailscaled's SOCKS5 proxy runs as
(`ts-standin`), as only tailscaled's netstack can on a real pod; replies to the head's own
connections (slurmctld to slurmd, Ansible's SSH) pass. The rule counters then show whether
anything on the pod tried the head directly.

The pod has a network volume at /workspace (a Docker volume) and is also a Runpod pod of the
Runpod stand-in API (listening on the network's gateway, so the head's power saving program
reaches it): stopped, it is a stopped container; started again, a new container from the pod's
image (the container disk wiped) with the same volume and address, running the pod's start
command, as Runpod does; a new pod of that network volume is a new container of it too. The
pod's image is meshctl-node:bookworm with the Tailscale stand-in in it.

Needs the Docker engine, the meshctl-node:bookworm image, and iptables and nsenter on the host
(Docker's engine brings them). Nodes: a rented machines' head of its own (tests/e2e/rented.py:
PODS, `pods-head`) and pod-rp1, on network meshctl-pods.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from meshctl.localmesh import nodes
from tests.cloud_standin import KEY as API_KEY
from tests.cloud_standin import PodBackend, Standin
from tests.e2e import MITOGEN, TESTBED_ENV, runs_said, wait_for, wait_for_ssh
from tests.e2e.rented import JOB_USER, PODS
from tests.e2e.rented import TS_KEY as KEY
from tests.e2e.standin import install_standin

pytestmark = pytest.mark.e2e

# The pods' head of its own (tests/e2e/rented.py: PODS), so that this file runs in another lane than
# the other rented machines' files.
SPEC, HEAD_CONTAINER, HEAD, GATEWAY = PODS.spec, PODS.container, PODS.head, PODS.gateway
POD = PODS.address(12)
POD_NAME = "pod-rp1"
SOCKS_UID = 1990  # the stand-in's SOCKS5 proxy runs as this user on the pod (ts-standin)
POD_IMAGE = "meshctl-e2e-pod:bookworm"  # the pod's image: Debian 12 with the Tailscale stand-in
VOLUME = "meshctl-e2e-pod-volume"  # the pod's network volume, at /workspace
NETWORK_VOLUME = {"volumeId": "vol-e2e-rp1", "path": "/workspace"}  # VOLUME at the Runpod stand-in
# docker's init as PID 1 runs the pod's start command (sshd, then sleep), as Runpod's images do;
# it also calls meshctl-pod-start once meshctl installed it (README: pods).
# PUBLIC_KEY (given at launch) is authorized, as Runpod's images do.
START = [
    "/bin/sh",
    "-c",
    '{ [ -z "${PUBLIC_KEY:-}" ] || { mkdir -p /root/.ssh && '
    'printf "%s\\n" "$PUBLIC_KEY" >> /root/.ssh/authorized_keys; }; } '
    "&& ssh-keygen -A >/dev/null && mkdir -p /run/sshd && /usr/sbin/sshd && "
    "{ [ ! -x /usr/local/sbin/meshctl-pod-start ] || /usr/local/sbin/meshctl-pod-start; }; exec sleep infinity",
]
LAUNCHED = ("pod-rp2", PODS.address(13), f"{VOLUME}-rp2")  # the pod `meshctl launch` rents: container, address, volume


def sh(*argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout)


def on(container: str, command: str, check: bool = True) -> str:
    return sh("docker", "exec", container, "sh", "-c", command, check=check).stdout


def as_user(command: str, check: bool = True) -> str:
    """COMMAND (srun, sbatch) on the head as the bed's job user: root runs no job (DisableRootJobs)."""
    return on(HEAD_CONTAINER, f"cd /tmp && runuser -u {JOB_USER} -- {command}", check=check)


def firewall(*rule: str) -> str:
    pid = sh("docker", "inspect", "--format", "{{.State.Pid}}", POD_NAME).stdout.strip()
    return sh("nsenter", "-t", pid, "-n", "iptables", *rule).stdout


def counters() -> dict[str, int]:
    """Packets of the pod's two rules towards the head: through the proxy, and direct (refused)."""
    out = firewall("-L", "OUTPUT", "-v", "-x", "-n")
    got = {"direct": 0}
    for line in out.splitlines():
        fields = line.split()
        if HEAD in fields and "REJECT" in fields:
            got["direct"] += int(fields[0])
        elif HEAD in fields and f"owner UID match {SOCKS_UID}" in line:
            got["via_tailscaled"] = int(fields[0])
    return got


def install_firewall() -> None:
    """Only the stand-in's proxy may open connections to the head; everything else is refused and
    counted. Replies to connections the head opened (SSH, slurmctld to slurmd) pass."""
    firewall("-A", "OUTPUT", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT")
    firewall("-A", "OUTPUT", "-d", HEAD, "-m", "owner", "--uid-owner", str(SOCKS_UID), "-j", "ACCEPT")
    firewall("-A", "OUTPUT", "-d", HEAD, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset")
    firewall("-A", "OUTPUT", "-d", HEAD, "-j", "REJECT")


class PodBed:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.mesh = root / "lab"  # the pods' head's mesh (tests/e2e/rented.py)
        self.key = root / "id_ed25519"

        self.api: Standin | None = None

    def meshctl(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        # MITOGEN: the opt-in (tests/e2e/__init__.py)
        env = {**os.environ, **TESTBED_ENV, "MESHCTL_MESH": str(self.mesh), **MITOGEN}
        if self.api is not None:
            env["MESHCTL_RUNPOD_API_URL"] = self.api.url
        return subprocess.run([sys.executable, "-m", "meshctl", *args], cwd=self.root, capture_output=True, text=True,
                              timeout=timeout, check=False, env=env)  # fmt: skip

    def sinfo(self, name: str) -> str:
        # one line per partition (a node kept up is also in the hidden meshctl_on one)
        return on(HEAD_CONTAINER, f"sinfo --noheader --Node --nodes={name} --format=%T | sort -u", check=False).strip()

    def wait_idle(self, name: str, seconds: float = 120) -> str:
        deadline = time.monotonic() + seconds
        state = ""
        while time.monotonic() < deadline:
            state = self.sinfo(name)
            if state == "idle":
                return state
            time.sleep(2)
        return state


@pytest.fixture(scope="module")
def bed(pods_head):
    """The pod beside its head (tests/e2e/rented.py: PODS). The head is this file's alone and goes
    at the session's end with its pods: nothing is taken out of its mesh first (a pod's removal is
    test_launch_rents_a_pod_that_joins_and_remove_node_terminate_gives_it_back's)."""
    if shutil.which("nsenter") is None or shutil.which("iptables") is None:
        pytest.skip("no nsenter or iptables on this machine for the pod's firewall")
    sh("docker", "rm", "-f", "-v", POD_NAME, LAUNCHED[0], check=False)
    sh("docker", "volume", "rm", "-f", VOLUME, LAUNCHED[2], check=False)
    bed = PodBed(pods_head.root)
    try:
        build_pod_image()
        run_pod(START)
        wait_for_ssh(POD)  # docker run returns before the start command has made host keys and started sshd
        nodes.authorize(POD_NAME, bed.key.with_suffix(".pub").read_text())
        install_firewall()
        with Standin("runpod", PodBackend(recreate_pod, create_pod), bind=GATEWAY) as api:
            bed.api = api
            bed.machine = api.backend.attach(POD_NAME, "pod", POD_NAME, "NVIDIA RTX A5000", 1, 0.27, POD)
            bed.machine.mounts = {"network": [NETWORK_VOLUME]}
            api.add_volume(NETWORK_VOLUME["volumeId"], bed.machine.data_center)
            yield bed
    finally:
        sh("docker", "rm", "-f", "-v", POD_NAME, LAUNCHED[0], check=False)
        sh("docker", "volume", "rm", "-f", VOLUME, LAUNCHED[2], check=False)
        sh("docker", "image", "rm", "-f", POD_IMAGE, check=False)


def build_pod_image() -> None:
    """The pod's image: Debian 12 with the Tailscale stand-in laid out as its package would be, and
    the user its SOCKS5 proxy runs as (what the pod's container disk holds before meshctl)."""
    sh("docker", "rm", "-f", "meshctl-e2e-pod-build", check=False)
    sh("docker", "run", "-d", "--name", "meshctl-e2e-pod-build", "meshctl-node:bookworm", "sleep", "infinity")
    install_standin("meshctl-e2e-pod-build", [KEY], unit=False)
    on("meshctl-e2e-pod-build", f"useradd --system --uid {SOCKS_UID} --no-create-home --shell /usr/sbin/nologin "
       "ts-standin")  # fmt: skip
    sh("docker", "commit", "--change", 'CMD ["sleep", "infinity"]', "meshctl-e2e-pod-build", POD_IMAGE)
    sh("docker", "rm", "-f", "meshctl-e2e-pod-build")


def run_pod(command: list[str], name: str = POD_NAME, ip: str = POD, volume: str = VOLUME,
            env: dict | None = None) -> None:  # fmt: skip
    """A pod's container: no TUN device, no NET_ADMIN, no cgroup mount, RUNPOD_POD_ID set, its
    volume at /workspace; ``command`` is its start command (the pod's args)."""
    environment = [f"--env={k}={v}" for k, v in {"RUNPOD_POD_ID": f"e2e0{name}", **(env or {})}.items()]
    sh("docker", "run", "-d", "--name", name, "--hostname", name, "--network", SPEC.network, "--ip", ip,
       "--init", "--label", "org.meshctl.localmesh=1", *environment, "-v", f"{volume}:/workspace", POD_IMAGE,
       *command)  # fmt: skip


def create_pod(machine) -> str:
    """Runpod creating a pod: the one `meshctl launch` asked for (its first container, PUBLIC_KEY
    authorized), or rp1 on a new pod of its network volume (the head's power program, when rp1's
    host had no GPU left): a new container of VOLUME at rp1's address (the old pod is stopped, its
    container gone with it), running the start command given, on a new public SSH port."""
    if machine.name != "rp1":
        name, ip, volume = LAUNCHED
        machine.ip = ip
        run_pod(START, name, ip, volume, machine.env)
        return name
    machine.ip, machine.port = POD, 10122
    sh("docker", "rm", "-f", POD_NAME)
    run_pod(machine.start_cmd or START)
    install_firewall()
    firewall("-t", "nat", "-A", "PREROUTING", "-p", "tcp", "--dport", str(machine.port), "-j", "REDIRECT",
             "--to-ports", "22")  # fmt: skip
    return POD_NAME


def recreate_pod(machine) -> None:
    """Runpod starting a stopped pod (or resetting an updated one): a new container from the pod's
    image, the container disk wiped, the volume kept, running the pod's start command."""
    sh("docker", "rm", "-f", POD_NAME)
    run_pod(machine.start_cmd or START)
    install_firewall()  # a new container has a new network namespace
    if machine.port != 22:  # the pod's new public SSH port, mapped to its sshd as Runpod's proxy does
        firewall("-t", "nat", "-A", "PREROUTING", "-p", "tcp", "--dport", str(machine.port), "-j", "REDIRECT",
                 "--to-ports", "22")  # fmt: skip


def test_the_firewall_keeps_the_pod_from_the_head(bed):
    direct = on(POD_NAME, f"timeout 5 bash -c 'echo > /dev/tcp/{HEAD}/22' && echo open || echo refused", check=False)
    assert direct.strip() == "refused"
    assert counters()["direct"] >= 1
    firewall("-Z", "OUTPUT")  # from here on the counters count meshctl's and Slurm's traffic


def test_add_node_of_a_pod_gives_an_idle_node_that_runs_jobs(bed):
    # The rented machines' head (tests/e2e/rented.py: init with --authkey-file, the bed's settings).
    result = bed.meshctl("add-node", f"root@{POD}", "--name", "rp1", "--ssh-key", str(bed.key))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr
    assert runs_said(bed.mesh)[-1] == "# meshctl: site.yml, Mitogen (MESHCTL_MITOGEN=1)"
    # The preflight saw a pod (RUNPOD_* in PID 1's environment) and said what pod mode means.
    assert re.search(r"pod mode\s.*yes", result.stdout) and "supervisor" in result.stdout
    assert "mesh_pod: true" in (bed.mesh / "mesh.yml").read_text()
    assert "runpod" in (bed.mesh / "mesh.yml").read_text()
    assert bed.wait_idle("rp1") == "idle"
    # Its daemons run under supervisor; slurmd goes out through tailscaled's SOCKS5 proxy.
    programs = on(POD_NAME, "supervisorctl status")
    for name in ("munge", "slurmd", "tailscaled"):
        assert re.search(rf"^{name}\s+RUNNING", programs, re.M), programs
    assert "libproxychains" in on(POD_NAME, "tr '\\0' '\\n' < /proc/$(supervisorctl pid slurmd)/environ")
    assert on(POD_NAME, "cat /proc/1/comm").strip() != "systemd"
    # The proxy is not on 127.0.0.1, where tailscaled's netstack hands tailnet peers' connections.
    probe = "import socket; print([socket.socket().connect_ex((a, 1055)) == 0 for a in ('127.0.0.2', '127.0.0.1')])"
    assert on(POD_NAME, f'python3 -c "{probe}"').strip() == "[True, False]"


def test_batch_and_srun_jobs_run_on_the_pod(bed):
    out = as_user("srun -w rp1 -N1 hostname")
    assert out.strip() == POD_NAME
    job = as_user("sbatch --parsable -w rp1 --wrap 'hostname; id -un'").strip()
    deadline = time.monotonic() + 90
    state = ""
    while time.monotonic() < deadline:
        state = on(HEAD_CONTAINER, f"scontrol show job {job} | grep -o 'JobState=[A-Z]*'", check=False).strip()
        if state in ("JobState=COMPLETED", "JobState=FAILED"):
            break
        time.sleep(2)
    assert state == "JobState=COMPLETED"
    assert on(POD_NAME, f"cat /tmp/slurm-{job}.out").split() == [POD_NAME, JOB_USER]  # submitted from /tmp
    # A step that talks back to srun for a while (its output streams to the head through the proxy).
    out = as_user("srun -w rp1 -N1 bash -c 'for i in 1 2 3; do echo step$i; sleep 1; done'")
    assert out.split() == ["step1", "step2", "step3"]


def test_a_mesh_with_a_rented_machine_runs_no_job_on_its_head(bed):
    """Role slurm's slurm_head_runs_jobs (auto): the head keeps slurmd, in a hidden partition no job
    may use, from the first rented node on; a job asking for it is refused at submission."""
    partitions = on(HEAD_CONTAINER, "sinfo --noheader --Node --nodes=ctl --format='%P|%T'", check=False).split()
    assert "meshctl_controller|idle" in partitions, partitions
    assert not [p for p in partitions if p.partition("|")[0].rstrip("*") in ("main", "gpu")], partitions
    assert "ctl" not in on(HEAD_CONTAINER, "sinfo --noheader --Node --partition=main --format=%N", check=False).split()
    refused = sh("docker", "exec", "-w", "/tmp", HEAD_CONTAINER, "runuser", "-u", JOB_USER, "--", "srun", "-w", "ctl",
                 "-N1", "--immediate=10", "hostname", check=False, timeout=60)  # fmt: skip
    assert refused.returncode != 0 and refused.stdout.strip() == "", refused
    assert "not available" in refused.stderr or "Invalid" in refused.stderr, refused.stderr
    assert as_user("srun -N1 hostname").strip() == POD_NAME  # a job that names no node goes to the pod


def test_status_shows_the_pod_in_userspace(bed):
    result = bed.meshctl("status", "--json", "--timeout", "5")
    rows = {r["name"]: r for r in json.loads(result.stdout)["nodes"]}
    assert rows["rp1"]["tailnet"] == f"Running {POD} userspace", rows["rp1"]
    assert rows["rp1"]["healthy"] is True and "pod" in rows["rp1"]["error"], rows["rp1"]
    assert result.returncode == 0, result.stdout + result.stderr


def test_slurmd_killed_on_the_pod_comes_back(bed):
    before = on(POD_NAME, "supervisorctl pid slurmd").strip()
    on(POD_NAME, "kill -9 $(supervisorctl pid slurmd)")
    deadline = time.monotonic() + 60
    after = before
    while time.monotonic() < deadline and after in (before, "0", ""):
        time.sleep(1)
        after = on(POD_NAME, "supervisorctl pid slurmd", check=False).strip()
    assert after not in (before, "0", "")
    assert bed.wait_idle("rp1") == "idle"
    assert as_user("srun -w rp1 -N1 hostname").strip() == POD_NAME


def test_a_restarted_pod_comes_back_by_itself(bed):
    before = on(POD_NAME, "supervisorctl pid slurmd").strip()
    sh("docker", "restart", "--time", "2", POD_NAME)
    install_firewall()  # a restarted container has a new network namespace
    deadline = time.monotonic() + 180
    ran = None
    while time.monotonic() < deadline:  # no meshctl run: the start command's meshctl-pod-start
        ran = subprocess.run(["docker", "exec", "-w", "/tmp", HEAD_CONTAINER, "runuser", "-u", JOB_USER, "--", "srun",
                              "-w", "rp1", "-N1", "--immediate=10", "hostname"],
                             capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
        if ran.returncode == 0:
            break
        time.sleep(3)
    assert ran is not None and ran.stdout.strip() == POD_NAME, ran
    programs = on(POD_NAME, "supervisorctl status")
    for name in ("munge", "slurmd", "tailscaled"):
        assert re.search(rf"^{name}\s+RUNNING", programs, re.M), programs
    assert on(POD_NAME, "supervisorctl pid slurmd").strip() != before
    assert bed.wait_idle("rp1") == "idle"


def test_a_second_converge_changes_nothing_on_the_pod(bed):
    # The first run after the tests above may write the volume's copy of what the pod's daemons
    # and jobs changed since (role pod: keep); the one after it changes nothing.
    result = bed.meshctl("apply")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr
    print("\nkept on the pod's volume, run by run:\n" + on(POD_NAME, "cat /workspace/.meshctl/keep.log", check=False))
    result = bed.meshctl("apply")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr
    lines = result.stdout.splitlines()
    recap = {line.split()[0]: line.split()[1:] for line in lines[lines.index("Recap") + 2 :] if line.startswith("  ")}
    assert recap["rp1"][1] == "0", result.stdout[-2500:]  # ok, changed, ...: changed is 0
    assert recap["ctl"][1] == "0", result.stdout[-2500:]


def test_nothing_on_the_pod_reached_the_head_directly(bed):
    got = counters()
    assert got["direct"] == 0, got  # every connection to the head went through tailscaled's proxy
    assert got["via_tailscaled"] > 0, got


def pod_running() -> bool:
    out = sh("docker", "inspect", "-f", "{{.State.Running}}", POD_NAME, check=False).stdout.strip()
    return out == "true"


def pod_diagnosis(job: str = "") -> str:
    parts = {
        "job": on(HEAD_CONTAINER, f"scontrol show job {job}", check=False) if job else "",
        "node": on(HEAD_CONTAINER, "scontrol show node rp1", check=False),
        "power log": on(HEAD_CONTAINER, "tail -n 20 /var/log/slurm/meshctl-power.log", check=False),
        "slurmctld": on(HEAD_CONTAINER, "grep -e rp1 -e power /var/log/slurm/slurmctld.log | tail -n 30", check=False),
        "container": "running" if pod_running() else "stopped",
    }
    if pod_running():
        parts["rejoin.log"] = on(POD_NAME, "tail -n 30 /workspace/.meshctl/rejoin.log", check=False)
        parts["programs"] = on(POD_NAME, "supervisorctl status", check=False)
        parts["slurmd log"] = on(POD_NAME, "tail -n 20 /var/log/meshctl/slurmd.log", check=False)
    return "\n".join(f"--- {name}:\n{text}" for name, text in parts.items())


def test_an_idle_pod_is_stopped_and_a_job_brings_it_back_from_its_volume_though_its_host_is_full(bed):
    """Runpod power saving: idle for idle_stop, the head stops the pod as it is (its container disk is
    then gone); meanwhile its host's GPU is rented by someone else (Runpod's Zero GPU Pods page: a
    stopped pod stays tied to its host). A job for it has the head give the stopped pod the volume's
    rejoin script as its start command (never an edit of a running pod, which resets it) and start
    it; Runpod refuses (no free GPU on the host), so the head creates a new pod of the network
    volume in its data centre, running that script, and terminates the old one; the new container
    restores the node's setup from the volume, and the job runs there."""
    idle = 60
    key_file = bed.root / "runpod.key"
    key_file.write_text(API_KEY + "\n")
    key_file.chmod(0o600)
    stored = bed.meshctl("provider", "add", "runpod", "--key-file", str(key_file))
    assert stored.returncode == 0, stored.stdout + stored.stderr
    inventory = bed.mesh / "mesh.yml"
    data = yaml.safe_load(inventory.read_text())
    data["all"]["hosts"]["rp1"].update({"meshctl_instance": f"runpod:{bed.machine.id}", "idle_stop": f"{idle}s"})
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    on(POD_NAME, "touch /root/on-the-container-disk")
    applied = bed.meshctl("apply", "--limit", "rp1")
    assert applied.returncode == 0, applied.stdout[-4000:] + applied.stderr
    # The setup is on the volume: packages installed since the image, folders, the pod's own start.
    # (Read from the volume itself: idle for long already, the pod may be stopping by now.)
    kept = sh("docker", "run", "--rm", "-v", f"{VOLUME}:/workspace", POD_IMAGE, "sh", "-c",
              "cd /workspace/.meshctl && wc -l < debs.list && ls files && tr '\\0' ' ' < start-command && echo "
              "&& tar -xOf files/etc.tar etc/supervisor/conf.d/slurmd.conf").stdout  # fmt: skip
    assert "etc.tar" in kept and "var_lib_tailscale.tar" in kept and START[-1] in kept, kept
    assert int(kept.splitlines()[0]) > 5, kept  # packages since the image: slurmd, munge, supervisor and theirs
    assert re.search(r"slurmd -D -s -b ", kept), kept  # the pod's slurmd reports its start as its boot
    # Idle: the head's program gives the pod its rejoin start command and stops it.
    assert wait_for(lambda: on(HEAD_CONTAINER, "sinfo -hN -n rp1 -o %T").strip().endswith("~") and not pod_running(),
                    idle + 180), pod_diagnosis()  # fmt: skip
    assert bed.machine.state == "stopped" and bed.api.patched_running == []  # stopped as it was: no edit
    # Its host's GPU is taken while it rests. A job for it: a new pod of its volume restores the node.
    bed.machine.host_full = "refuse"
    submitted = time.monotonic()
    job = as_user("sbatch --parsable -w rp1 --wrap 'hostname'").strip()
    assert job.isdigit(), job
    ended = wait_for(lambda: on(HEAD_CONTAINER, f"scontrol show job {job}", check=False).count("JobState=COMPLETED"),
                     600, 3)  # fmt: skip
    if not ended:
        why = pod_diagnosis(job)
        on(HEAD_CONTAINER, f"scancel {job}", check=False)
        pytest.fail(f"the job never completed on the pod started again:\n{why}")
    took = time.monotonic() - submitted
    print(f"\nsbatch to COMPLETED on a stopped pod whose host was full (a new pod of its volume): {took:.0f} s")
    # The rejoin start command was given to the stopped pod before its start, never to a running one
    # ("Editing a running Pod resets it completely").
    assert ("PATCH", f"/v2/pods/{bed.machine.id}", {"args": "bash /workspace/.meshctl/rejoin"}) in bed.api.bodies
    assert bed.machine.start_cmd == ["bash", "/workspace/.meshctl/rejoin"] and bed.api.patched_running == []
    started = ("POST", f"/v2/pods/{bed.machine.id}/action", {"action": "start"})
    assert started in bed.api.bodies and [a[2] for a in bed.api.answers if a[:2] == started[:2]][-1] == 400
    # One new pod of the same network volume, in its data centre, running the rejoin script; the
    # old pod terminated (the volume only detached).
    new = [m for m in bed.api.backend.machines.values() if m.name == "rp1" and m.id != bed.machine.id]
    assert len(new) == 1 and new[0].state == "running" and bed.machine.state == "terminated", new
    created = [b for m, path, b in bed.api.bodies if (m, path) == ("POST", "/v2/pods")][-1]
    assert created["mounts"] == {"network": [NETWORK_VOLUME]} and created["dataCenterIds"] == ["US-KS-2"], created
    assert created["args"] == "bash /workspace/.meshctl/rejoin", created
    assert ("DELETE", f"/v2/pods/{bed.machine.id}") in bed.api.requests
    assert "its host had no GPU left for it" in on(HEAD_CONTAINER, "cat /var/log/slurm/meshctl-power.log")
    # The volume went on with the node: the new pod mounts it, and nothing is left billing unused.
    listed = bed.meshctl("machines", "--json")
    assert listed.returncode == 0, listed.stdout[-3000:] + listed.stderr
    volumes = json.loads(listed.stdout)["volumes"]
    assert [(v["id"], v["used_by"]) for v in volumes] == [(NETWORK_VOLUME["volumeId"], ["rp1"])], volumes
    assert "is used by no instance" not in bed.meshctl("machines").stdout
    out = on(POD_NAME, f"cat /tmp/slurm-{job}.out").split()
    assert out == [POD_NAME], out
    assert "on-the-container-disk" not in on(POD_NAME, "ls /root").split()  # a new container disk
    log = on(POD_NAME, "cat /workspace/.meshctl/rejoin.log")
    assert "restoring the node's setup" in log and "WARNING" not in log, log
    programs = on(POD_NAME, "supervisorctl status")
    for name in ("munge", "slurmd", "tailscaled"):
        assert re.search(rf"^{name}\s+RUNNING", programs, re.M), programs
    # The node runs as another pod on another SSH port now: apply records it there (its host key
    # carried over: the pod kept its host keys on the volume, so SSH accepts it) and reaches it.
    assert new[0].port != 22
    hold = as_user("sbatch --parsable -w rp1 --wrap 'sleep 600'").strip()  # not stopped under the run
    assert wait_for(lambda: "JobState=RUNNING" in on(HEAD_CONTAINER, f"scontrol show job {hold}", check=False), 60, 1)
    applied = bed.meshctl("apply", "--limit", "rp1")
    on(HEAD_CONTAINER, f"scancel {hold}", check=False)
    assert applied.returncode == 0, applied.stdout[-4000:] + applied.stderr
    assert (f"rp1: runpod runs it as runpod:{new[0].id} at {POD}:{new[0].port} now, a new instance of its volume "
            f"(recorded runpod:{bed.machine.id} at {POD}:22)") in applied.stdout, applied.stdout  # fmt: skip
    host = yaml.safe_load(inventory.read_text())["all"]["hosts"]["rp1"]
    assert host["ansible_port"] == new[0].port and host["meshctl_instance"] == f"runpod:{new[0].id}", host
    bed.machine = new[0]


def test_launch_rents_a_pod_that_joins_and_remove_node_terminate_gives_it_back(bed):
    """`meshctl offers` and `meshctl launch --gpu` on real daemons: the stand-in's catalog (Runpod v2)
    has the GPU in Community Cloud and, dearer, Secure Cloud; the cheapest has no capacity when the
    create asks, so the next offer is rented (one pod in all); the stand-in creates a pod (a new
    container that authorizes the key given as PUBLIC_KEY), meshctl waits for its SSH and adds it (pod
    mode), it runs jobs; `remove-node --terminate -y` takes it out and deletes the pod at the provider.
    Before it, a launch whose candidates are all refused (a 403 pool refusal, then no capacity) skips
    each and rents nothing."""
    offers = bed.meshctl("offers", "--gpu", "RTX A5000", "--json")
    assert offers.returncode == 0, offers.stdout + offers.stderr
    listed = json.loads(offers.stdout)["offers"]
    assert [(o["cloud"], o["price_per_hour"]) for o in listed] == [("COMMUNITY", 0.16), ("SECURE", 0.27)], listed
    # The account may not rent from the cheapest's pool (403) and the next has no capacity: both
    # skipped, each said, nothing rented, and the command says so.
    bed.api.refuse({"cloud": "COMMUNITY"}, "pool")
    bed.api.refuse({"cloud": "SECURE"}, "capacity")
    refused = bed.meshctl("launch", "--gpu", "RTX A5000", "--provider", "runpod", "--name", "rp2", "--ssh-key",
                          str(bed.key), "-y")  # fmt: skip
    assert refused.returncode != 0, refused.stdout[-3000:]
    said = refused.stdout + refused.stderr
    assert "skipped runpod (NVIDIA RTX A5000, COMMUNITY) at $0.16/h: " in said and "no offer could be rented" in said
    assert "skipped runpod (NVIDIA RTX A5000, SECURE) at $0.27/h: " in said, said[-3000:]
    assert [m for m in bed.api.backend.machines.values() if m.name == "rp2"] == []
    assert "rp2" not in (bed.mesh / "mesh.yml").read_text()
    asked = len(bed.api.bodies)
    # The cheapest (Community Cloud) has no capacity when asked: the next offer is rented, one pod in all.
    bed.api.refuse({"cloud": "COMMUNITY"}, "capacity")
    launched = bed.meshctl("launch", "--gpu", "RTX A5000", "--provider", "runpod", "--name", "rp2", "--ssh-key",
                           str(bed.key), "-y")  # fmt: skip
    assert launched.returncode == 0, launched.stdout[-4000:] + launched.stderr
    assert "cheapest available RTX A5000: 1 x RTX A5000 at runpod (NVIDIA RTX A5000, COMMUNITY), $0.16/h" in (
        launched.stdout), launched.stdout[-4000:]  # fmt: skip
    assert "skipped runpod (NVIDIA RTX A5000, COMMUNITY) at $0.16/h: " in launched.stdout, launched.stdout[-4000:]
    assert "rented 1 x RTX A5000 at runpod (SECURE), $0.27/h" in launched.stdout, launched.stdout[-4000:]
    pods = [m for m in bed.api.backend.machines.values() if m.name == "rp2"]
    assert len(pods) == 1, pods  # one machine for one request
    pod = pods[0]
    created = [body for method, path, body in bed.api.bodies[asked:] if (method, path) == ("POST", "/v2/pods")]
    assert [body["cloud"] for body in created] == ["COMMUNITY", "SECURE"], created
    assert created[-1]["gpu"] == {"id": "NVIDIA RTX A5000", "count": 1}, created
    assert pod.env["PUBLIC_KEY"].startswith("ssh-ed25519 ")
    host = yaml.safe_load((bed.mesh / "mesh.yml").read_text())["all"]["hosts"]["rp2"]
    assert host["meshctl_instance"] == f"runpod:{pod.id}" and host["mesh_pod"] is True, host
    assert bed.wait_idle("rp2") == "idle"
    assert as_user("srun -w rp2 -N1 hostname").strip() == LAUNCHED[0]
    removed = bed.meshctl("remove-node", "rp2", "--terminate", "-y")
    assert removed.returncode == 0, removed.stdout[-4000:] + removed.stderr
    assert ("DELETE", f"/v2/pods/{pod.id}") in bed.api.requests and pod.state == "terminated"
    bed.api.backend.settle()  # its DELETE answered at once, the container goes after (tests/cloud_standin.py)
    assert sh("docker", "inspect", LAUNCHED[0], check=False).returncode != 0  # the pod is gone
    assert "rp2" not in (bed.mesh / "mesh.yml").read_text()
    assert on(HEAD_CONTAINER, "sinfo -hN -n rp2 -o %T", check=False).strip() == ""
