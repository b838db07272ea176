"""Slurm's power saving through the providers' APIs, on one head and real daemons.

One Debian 12 head (Slurm 22.05) and two rented nodes, each a stand-in provider's instance
(tests/cloud_standin.py, Docker backends, the stand-ins on the nodes' network gateway):

- n1, a "Paperspace machine" (stop = `docker stop`, start = `docker start`: a Paperspace machine
  keeps its disk). meshctl is told which instance it is (`meshctl_instance`) and `idle_stop: 60s`;
  idle for that long it is stopped (`idle~`, its container stopped); a job for it starts it again
  and runs.
- gpu2, a Lambda instance (Lambda has no stop): the stand-in's launches are new Docker nodes with
  nothing of the mesh on them (a user `ubuntu` with sudo and the launch's SSH key authorized, as a
  Lambda VM comes; from the ready image, as the bed's other nodes: the roles' packages are there,
  the demo and Molecule's `debian13` install them on bare machines). `meshctl launch lambda` adds it
  (the control machine's key is registered at Lambda as `laptop`); with `idle_stop: 60s` and
  `idle_terminate: true`, `meshctl apply` gives the head its relaunch service (meshctl itself,
  pip-installed there, on the head's copy of the mesh). Idle, gpu2 is terminated (`idle~`, its
  container removed); a job for it has the head register its own key at Lambda, launch a new
  instance named gpu2, authorize the control machine's key on it and converge it (`apply --limit
  gpu2` on the head), and the job runs; the control machine's next `meshctl apply` records the new
  instance (found by the node's name) and reaches it; idle again it is terminated again; a launch
  Lambda refuses (no capacity) leaves gpu2 DOWN with the reason.

One bed for both (one head converged once), and that head is the pods' head that test_pod.py
uses after this file, in the same lane (tests/e2e/rented.py: PODS, set up once, the mesh over the
Tailscale stand-in, which n1 and every Lambda instance carry as well; this file takes n1 and gpu2
out again at its end, and forgets its providers' keys): the global SuspendTime is an hour, so only
a node's own idle time (its partition's SuspendTime) stops it within the test. meshctl's runs here
are the opt-in Mitogen ones (tests/e2e/__init__.py). Needs the Docker engine, the
meshctl-node:bookworm image and the Python package index (the head's pip, through the test bed's
CA bundle). MESHCTL_E2E_POWER_SUITE=trixie runs it all on Debian 13 (Slurm 24.11).

A started VM has booted: Slurm waits for a resumed node's boot time to be after the start it asked
for ("Still waiting for boot of node"). A container shares the host's kernel and its uptime, so
the test bed gives each rented node's slurmd its own boot clock (a time namespace whose boot time
is slurmd's start: a time namespace with a boot time offset, which needs CAP_SYS_TIME in those
containers only; BOOT_CLOCK below),
3 seconds after it starts: Slurm compares whole seconds (its request's time against now minus the
uptime slurmd reports), and a machine "booted" within the second it was asked for can look booted
before it, which a VM never does. That is the VM's boot, emulated; nothing of meshctl's is changed.
"""

import hashlib
import json
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from meshctl.localmesh import nodes, ready
from tests.cloud_standin import KEY, DockerBackend, Standin
from tests.e2e import MITOGEN, meshctl_in, on_container, runs_said, slurm_job_state, wait_for
from tests.e2e.rented import (
    FRESH_BOOT,
    JOB_USER,
    NAME,
    PODS,
    SUITE,
    TS_KEY,
    Instances,
    forget_accounts,
    take_out,
)
from tests.e2e.standin import install_standin

pytestmark = pytest.mark.e2e

# The pods' head (tests/e2e/rented.py: PODS), after test_pod.py in the same lane: the rented
# machines' head is test_burst.py's, in a lane of its own (both files mostly wait on Slurm's timers).
SPEC, HEAD_CONTAINER, GATEWAY = PODS.spec, PODS.container, PODS.gateway
N1 = PODS.address(11)  # on the pods' head's network
IDLE = 60  # seconds: each rented node's idle_stop
LAUNCHED = "power-i"  # the prefix of the containers Lambda's stand-in launches


def meshctl(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return meshctl_in(root, *args, env={**MITOGEN, **(env or {})}, timeout=1200)  # the opt-in: tests/e2e/__init__.py


def on_head(command: str) -> str:
    return on_container(HEAD_CONTAINER, command)


def as_user(command: str) -> str:
    """COMMAND (sbatch) on the head as the bed's job user: root runs no job (DisableRootJobs)."""
    return on_head(f"cd /tmp && runuser -u {JOB_USER} -- {command}")


def node_state(name: str) -> str:
    return on_head(f"sinfo --noheader --Node --nodes={name} --format=%T")


def running(container: str) -> bool:
    out = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", container], capture_output=True,
                         text=True, check=False).stdout.strip()  # fmt: skip
    return out == "true"


def job_state(job: str) -> str:
    return slurm_job_state(HEAD_CONTAINER, job)


def on_node(command: str) -> str:
    done = subprocess.run(["docker", "exec", "power-n1", "bash", "-c", command], capture_output=True, text=True,
                          check=False)  # fmt: skip
    return (done.stdout + done.stderr).strip()


def held_on(nodes: dict | None) -> list[tuple[str, int, int]]:
    """(node, seconds, CPUs) of each of the job user's jobs today on one of NODES (None: on any node;
    the files before this one ran hers too), from Slurm's accounting."""
    lines = on_head(f"sacct -X -n -P -u {JOB_USER} -S today -o NodeList,ElapsedRaw,AllocTRES").split()
    rows = [r.split("|") for r in lines if len(r.split("|")) == 3 and "cpu=" in r.split("|")[2]]
    return [(r[0], int(r[1]), int(r[2].split("cpu=")[1].split(",")[0])) for r in rows
            if nodes is None or r[0] in nodes]  # fmt: skip


def gpu_seconds() -> int:
    """GPU-seconds of the job user's jobs today, from Slurm's accounting (gres/gpu of AllocTRES)."""
    lines = on_head(f"sacct -X -n -P -u {JOB_USER} -S today -o ElapsedRaw,AllocTRES").split()
    rows = [r.split("|") for r in lines if "gres/gpu=" in r]
    return sum(int(r[0]) * int(r[1].split("gres/gpu=")[1].split(",")[0]) for r in rows)


def diagnosis(node: str, job: str | None = None) -> str:
    """What the head and the node say, for a failed assertion: which daemon waited for what."""
    parts = {
        "job": on_head(f"scontrol show job {job}") if job else "",
        f"node {node}": on_head(f"scontrol show node {node}"),
        "power log": on_head("tail -n 20 /var/log/slurm/meshctl-power.log"),
        f"slurmctld on {node}": on_head(
            f"grep -i -e {node} -e power -e resume /var/log/slurm/slurmctld.log | tail -n 40"
        ),
    }
    if node == "gpu2":
        parts["relaunch service"] = on_head("journalctl --no-pager -u meshctl-relaunch -n 60")
        for name in stale_instances():  # the instance the head launched: what its slurmd says
            command = ("tail -n 30 /var/log/slurmd/slurmd.log; journalctl -b --no-pager -n 40 -u slurmd -u munge "
                       "-u tailscaled; systemctl --failed --no-legend; ss -ltnp | grep -e 6818 -e slurmd")  # fmt: skip
            parts[f"instance {name}"] = subprocess.run(
                ["docker", "exec", name, "bash", "-c", command], capture_output=True, text=True, check=False
            ).stdout
    elif running("power-n1"):
        parts["slurmd.log"] = on_node("tail -n 30 /var/log/slurmd/slurmd.log")
        parts["journal"] = on_node("journalctl -b --no-pager -n 30 -u slurmd -u munge -u tailscaled")
        parts["failed units"] = on_node("systemctl --failed --no-legend")
        parts["slurmd uptime"] = on_node("nsenter -t $(pgrep -xn slurmd) -T cat /proc/uptime; cat /proc/uptime")
    else:
        parts["container"] = "stopped"
    return "\n".join(f"--- {name}:\n{text}" for name, text in parts.items())


def stale_instances() -> list[str]:
    return subprocess.run(["docker", "ps", "-aq", "--filter", f"name=^{LAUNCHED}"], capture_output=True, text=True,
                          check=False).stdout.split()  # fmt: skip


@pytest.fixture(scope="module")
def bed(pods_head):
    """n1 and gpu2 added to the pods' head (tests/e2e/rented.py: PODS), and taken out again at the
    end: the head as this file found it."""
    rented = pods_head
    root, key = rented.root, rented.key
    if stale_instances():  # instances of a run that was cut short
        subprocess.run(["docker", "rm", "-f", "-v", *stale_instances()], capture_output=True, check=False)
    subprocess.run(["docker", "rm", "-f", "-v", "power-n1"], capture_output=True, check=False)
    args = nodes.run_args(nodes.Node("power-n1", N1), ready.bed_image(SUITE), SPEC.network)
    subprocess.run([*args[:-1], "--cap-add", "SYS_TIME", args[-1]], capture_output=True, check=True)
    machines, instances = DockerBackend(), Instances(LAUNCHED, 21, site=PODS)
    env = {}
    try:
        assert nodes.wait_running("power-n1") in ("running", "degraded")
        nodes.authorize("power-n1", key.with_suffix(".pub").read_text())
        install_standin("power-n1", [TS_KEY])  # the mesh runs over Tailscale (the stand-in)
        with Standin("paperspace", machines, bind=GATEWAY) as paperspace, \
                Standin("lambda", instances, bind=GATEWAY) as lambda_:  # fmt: skip
            lambda_.ssh_keys["laptop"] = key.with_suffix(".pub").read_text().strip()  # registered in Lambda's console
            machine = machines.attach("power-n1", "ps", "power-n1", "A4000", 1, 0.76, N1)
            env = {"MESHCTL_PAPERSPACE_API_URL": paperspace.url, "MESHCTL_LAMBDA_API_URL": lambda_.url}
            added = meshctl(root, "add-node", f"root@{N1}", "--name", "n1", "--ssh-key", str(key), "--provider",
                            "paperspace", env=env)  # fmt: skip
            assert added.returncode == 0, added.stdout[-3000:] + added.stderr
            assert runs_said(root / "lab")[-1] == "# meshctl: site.yml, Mitogen (MESHCTL_MITOGEN=1)"
            emulate_boot_clock()
            for provider in ("paperspace", "lambda"):
                key_file = root / f"{provider}.key"
                key_file.write_text(KEY + "\n")
                key_file.chmod(0o600)
                stored = meshctl(root, "provider", "add", provider, "--key-file", str(key_file), env=env)
                assert stored.returncode == 0, stored.stdout + stored.stderr
            started = time.monotonic()
            launched = meshctl(root, "launch", "lambda", "--type", "gpu_1x_a10", "--name", "gpu2", "--region",
                               "us-east-1", "--ssh-key-name", "laptop", "--ssh-key", str(key), "-y",
                               env=env)  # fmt: skip
            assert launched.returncode == 0, launched.stdout[-4000:] + launched.stderr
            print(f"\nlaunch lambda (a new instance, nothing of the mesh on it): {time.monotonic() - started:.0f} s")
            yield root, env, (paperspace, machine), (lambda_, instances)
            take_out(rented, "gpu2", "n1", env=env)
            forget_accounts(rented, "paperspace", "lambda")
    finally:
        for container in instances.containers.values():
            subprocess.run(["docker", "rm", "-f", "-v", container], capture_output=True, check=False)
        subprocess.run(["docker", "rm", "-f", "-v", "power-n1"], capture_output=True, check=False)


def emulate_boot_clock() -> None:
    """n1's slurmd sees a machine that booted when it started (see the docstring)."""
    probe = subprocess.run(["docker", "exec", "power-n1", "unshare", "--time", "--fork", "--boottime=-1", "true"],
                           capture_output=True, text=True, check=False)  # fmt: skip
    if probe.returncode != 0:  # a kernel before 5.6 has no time namespaces: a resumed node never looks booted
        pytest.skip(f"this kernel cannot give a container a boot clock of its own: {probe.stderr.strip()}")
    subprocess.run(["docker", "exec", "-i", "power-n1", "bash"], input=FRESH_BOOT, text=True, check=True)
    probe = "sleep 5; nsenter -t $(pgrep -xn slurmd) -T cat /proc/uptime"  # after the wrapper's 3 s
    uptime = subprocess.run(["docker", "exec", "power-n1", "bash", "-c", probe], capture_output=True, text=True,
                            check=False).stdout.split()  # fmt: skip
    assert uptime and float(uptime[0]) < 60, uptime


def test_idle_both_rented_nodes_are_stopped_through_their_providers(bed):
    """n1 (Paperspace) and gpu2 (Lambda, idle_terminate) get idle_stop in one apply; both rest at once."""
    root, env, (paperspace, machine), (_lambda, instances) = bed
    inventory = root / "lab" / "mesh.yml"
    data = yaml.safe_load(inventory.read_text())
    first = data["all"]["hosts"]["gpu2"]["meshctl_instance"]
    # Idle since the bed was made: Slurm acts on IDLE at once, at the apply's last step (their
    # features). That nothing of it is done twice is shown by a second apply while jobs hold both
    # (the next test): here Slurm would stop them in the middle of it.
    data["all"]["hosts"]["n1"].update({"meshctl_instance": f"paperspace:{machine.id}", "idle_stop": f"{IDLE}s"})
    data["all"]["hosts"]["gpu2"].update({"idle_stop": f"{IDLE}s", "idle_terminate": True})
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    applied = meshctl(root, "apply", "--limit", "n1,gpu2", env=env)
    assert applied.returncode == 0, applied.stdout[-4000:] + applied.stderr
    assert KEY not in applied.stdout + applied.stderr
    # The head's relaunch service (gpu2's provider has no stop): meshctl and its packages, the
    # head's copy of the mesh (root only).
    assert on_head("systemctl is-active meshctl-relaunch.path") == "active"
    assert on_head("/opt/meshctl/control/venv/bin/python -c 'import ansible_runner, click; print(1)'") == "1"
    assert on_head("stat -c '%a %U' /var/lib/meshctl/control /var/lib/meshctl/control/secrets/munge.key") == \
        "700 root\n600 root"  # fmt: skip
    assert "ansible_connection: local" in on_head("cat /var/lib/meshctl/control/mesh.yml")
    conf = on_head("cat /etc/slurm/slurm.conf")
    assert "SuspendTime=3600" in conf and "SuspendExcParts=meshctl_on" in conf
    assert f"PartitionName=meshctl_idle_{IDLE} Nodes=meshctl_idle_{IDLE} Hidden=YES State=INACTIVE " \
           f"SuspendTime={IDLE}" in conf  # fmt: skip
    for name in ("n1", "gpu2"):
        assert f"meshctl_idle_{IDLE}" in on_head(f"scontrol show node {name} | grep -o 'AvailableFeatures=.*'")
        assert "meshctl_on" not in on_head(f"sinfo --noheader --Node --nodes={name} --format=%P")  # only main
    assert "meshctl_on" in on_head(f"scontrol show node {NAME} | grep -o 'AvailableFeatures=.*'")
    # Idle for longer than idle_stop: Slurm runs the head's program, which stops n1's machine and,
    # Lambda having no stop, terminates gpu2's instance.
    n1_rests = lambda: node_state("n1").endswith("~") and not running("power-n1")  # noqa: E731
    gpu2_rests = lambda: node_state("gpu2").endswith("~") and first.split(":")[1] in instances.gone()  # noqa: E731
    # Asked every 5 s: each question is two `docker exec`s (a tenth of a CPU-second each) for minutes.
    assert wait_for(lambda: n1_rests() and gpu2_rests(), IDLE + 180, 5), (
        node_state("n1"), node_state("gpu2"), diagnosis("n1"), diagnosis("gpu2"))  # fmt: skip
    assert ("PATCH", f"/v1/machines/{machine.id}/stop") in paperspace.requests
    log = on_head("cat /var/log/slurm/meshctl-power.log")
    assert "suspend n1 (paperspace:" in log and "terminated (idle_terminate)" in log
    assert on_head("stat -c '%U %a' /var/log/slurm/meshctl-power.log") == "slurm 640"  # the program's own
    assert running(HEAD_CONTAINER)  # the head is never stopped
    # A change to the mesh while they rest: the others converge, they are skipped and named (exit 0).
    applied = meshctl(root, "apply", env=env)
    assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr
    assert "n1: stopped while idle (idle_stop); not changed" in applied.stdout, applied.stdout[-3000:]
    assert n1_rests()


def test_a_job_for_each_starts_n1_again_and_has_the_head_launch_gpu2_again(bed):
    root, env, (paperspace, machine), (lambda_, instances) = bed
    inventory = root / "lab" / "mesh.yml"
    # Slurm runs the program again: it starts n1's machine (slurmd registers by itself) and asks the
    # head's relaunch service for gpu2, which launches a new instance and sets it up from nothing.
    on_head("scontrol setdebug debug")  # "Still waiting for boot of node" and its like, for a diagnosis
    submitted = time.monotonic()
    jobs = {"n1": as_user("sbatch --parsable -w n1 --wrap 'hostname'"),
            "gpu2": as_user("sbatch --parsable -w gpu2 --wrap 'hostname; sleep 10'")}  # fmt: skip
    assert all(job.isdigit() for job in jobs.values()), jobs
    # Each, once its job is done, gets a job that holds it while the other comes back and the
    # control machine's apply runs: idle for idle_stop, it would be stopped again under them.
    began, holds = {}, {}
    for name, seconds in (("n1", 300), ("gpu2", 900)):
        began[name] = wait_for(lambda j=jobs[name]: job_state(j) in ("RUNNING", "COMPLETING", "COMPLETED")
                               and time.monotonic(), seconds, 2)  # fmt: skip
        if not began[name]:
            why = diagnosis(name, jobs[name])
            on_head(f"scancel {' '.join([*jobs.values(), *holds.values()])}")
            pytest.fail(f"the job never started on {name}, brought back:\n{why}")
        assert wait_for(lambda j=jobs[name]: job_state(j) == "COMPLETED", 120, 1), diagnosis(name, jobs[name])
        holds[name] = as_user(f"sbatch --parsable -w {name} --wrap 'sleep 900'")
        assert wait_for(lambda h=holds[name]: job_state(h) == "RUNNING", 60, 1), diagnosis(name, holds[name])
    on_head("scontrol setdebug info")
    assert ("PATCH", f"/v1/machines/{machine.id}/start") in paperspace.requests and running("power-n1")
    new = [m for m in instances.machines.values() if m.state == "running" and m.name == "gpu2"]
    assert len(new) == 1, [(m.id, m.name, m.state) for m in instances.machines.values()]
    head_key = on_head("cat /var/lib/meshctl/control/head_ed25519.pub")
    assert ("POST", "/api/v1/ssh-keys") in lambda_.requests  # the head's own key, registered by the head
    assert new[0].public_keys == [head_key] and new[0].region == "us-east-1" and new[0].kind == "gpu_1x_a10"
    container = instances.containers[new[0].id]
    read = f"cat /tmp/slurm-{jobs['gpu2']}.out"  # submitted from /tmp
    out = subprocess.run(["docker", "exec", container, "bash", "-c", read], capture_output=True, text=True,
                         check=False).stdout  # fmt: skip
    assert out.strip() == container, out
    print(f"\nsbatch to RUNNING on a stopped Paperspace node: {began['n1'] - submitted:.0f} s (a container starts "
          f"in about 1 s); on a terminated Lambda node (launch + full setup by the head): "
          f"{began['gpu2'] - submitted:.0f} s")  # fmt: skip
    # The control machine follows: the new instance, found by the node's name, reached with its own key.
    applied = meshctl(root, "apply", env=env)
    assert applied.returncode == 0, applied.stdout[-4000:] + applied.stderr
    assert f"gpu2: launched again by the head as lambda:{new[0].id}" in applied.stdout, applied.stdout[-3000:]
    # Taken for gpu2 on the head's record of launching it, with the host key the head met
    # there: the same key the machine shows, recorded before the control machine ever reached it.
    assert "with the host key(s) the head met on it" in applied.stdout
    record = json.loads(on_head("cat /var/lib/meshctl/control/relaunched/gpu2.json"))
    # The head's setup of it was plain Ansible (relaunch_mitogen off: the default; test_burst.py's
    # head runs Mitogen), as its run log's first line says.
    ways = on_head("head -qn1 /var/lib/meshctl/control/logs/*.log").splitlines()
    assert "# meshctl: site.yml, plain Ansible" in ways and not [w for w in ways if "Mitogen" in w], ways
    assert record["instance"] == f"lambda:{new[0].id}" and record["host_keys"]
    shown = subprocess.run(["docker", "exec", container, "cat", "/etc/ssh/ssh_host_ed25519_key.pub"],
                           capture_output=True, text=True, check=True).stdout.split()[:2]  # fmt: skip
    assert " ".join(shown) in record["host_keys"]
    assert " ".join(shown) in (root / "lab" / "known_hosts").read_text()
    host = yaml.safe_load(inventory.read_text())["all"]["hosts"]["gpu2"]
    assert host["meshctl_instance"] == f"lambda:{new[0].id}" and host["ansible_host"] == new[0].ip
    assert host["mesh_address"] == new[0].ip  # the stand-in's tailnet address: the machine's own
    assert f"NodeAddr={new[0].ip} " in on_head("scontrol show node gpu2")  # Slurm reaches the new machine
    # Nothing of the power plan is done twice (the relaunch service, the power program, the nodes'
    # features): a second apply, while the jobs hold both nodes, changes nothing on them.
    again = meshctl(root, "apply", "--limit", "n1,gpu2", env=env)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr
    lines = again.stdout.splitlines()
    recap = {line.split()[0]: line.split()[1:] for line in lines[lines.index("Recap") + 2 :] if line.startswith("  ")}
    assert recap["n1"][1] == "0" and recap["gpu2"][1] == "0", again.stdout[-2500:]  # ok, changed, ...
    status = meshctl(root, "status", "--json", env=env)
    rows = {r["name"]: r for r in json.loads(status.stdout)["nodes"]}
    assert rows["gpu2"]["healthy"] is True and rows["n1"]["healthy"] is True, rows
    # A rotation refreshes the head's copy of the secrets in the same run: a later
    # relaunch (apply --limit NODE on the head) would otherwise put the old munge key back.
    old_key = on_head("sha256sum < /var/lib/meshctl/control/secrets/munge.key")
    rotated = meshctl(root, "rotate-munge-key", env=env)
    assert rotated.returncode == 0, rotated.stdout[-3000:] + rotated.stderr
    new_key = hashlib.sha256((root / "lab" / "secrets" / "munge.key").read_bytes()).hexdigest()
    assert on_head("sha256sum < /var/lib/meshctl/control/secrets/munge.key").split()[0] == new_key != old_key.split()[0]
    assert on_head("sha256sum < /etc/munge/munge.key").split()[0] == new_key
    assert subprocess.run(["docker", "exec", container, "sha256sum", "/etc/munge/munge.key"], capture_output=True,
                          text=True, check=True).stdout.split()[0] == new_key  # fmt: skip
    # Cost per user from Slurm's accounting: each job's share of its node (its CPUs of the node's, no
    # GPUs) at the instance's price; gpu2 at an 8x H100's price here, so the cost is more than a
    # rounding. The holding jobs run on: the cost lies between what accounting says before and after.
    new[0].price = 36.0
    prices = {"n1": machine.price, "gpu2": 36.0}
    cpus = {name: int(on_head(f"scontrol show node {name} | grep -o 'CPUTot=[0-9]*' | cut -d= -f2"))
            for name in prices}  # fmt: skip
    before, every_before = held_on(prices), held_on(None)
    used = meshctl(root, "usage", "--json", env=env)
    after, every_after = held_on(prices), held_on(None)
    assert used.returncode == 0, used.stdout[-3000:] + used.stderr
    report = json.loads(used.stdout)
    mine = next(u for u in report["users"] if u["user"] == JOB_USER)
    cost = lambda rows: sum(prices[n] * min(1.0, c / cpus[n]) * s / 3600 for n, s, c in rows)  # noqa: E731
    # n1's share is a few hundredths at most: whether Paperspace's listing gave its price or not
    low, high = cost([r for r in before if r[0] == "gpu2"]), cost(after)
    assert sum(s for n, s, _c in before if n == "gpu2") >= 10 and {"n1", "gpu2"} <= set(mine["nodes"]), (
        report, before)  # fmt: skip
    assert low - 0.011 <= mine["cost"] <= high + 0.011 and mine["cost"] > 0, (report, before, after, cpus)
    cpu_low, cpu_high = (sum(c * s for _n, s, c in h) / 3600 for h in (every_before, every_after))
    assert cpu_low - 0.002 <= mine["cpu_hours"] <= cpu_high + 0.002, (report, every_before, every_after)
    # GPU-hours: none here (n1 and gpu2 have no GPU devices); a burst pool's job before may have some.
    assert abs(mine["gpu_hours"] - gpu_seconds() / 3600) <= 0.002 and mine["jobs"] >= len(before), report
    on_head(f"scancel {' '.join(holds.values())}")


def test_idle_again_both_rest_again_and_a_launch_lambda_refuses_leaves_gpu2_down_with_the_reason(bed):
    _root, _env, _paperspace, (_lambda, instances) = bed
    done = time.monotonic()
    running_now = [i for i, m in instances.machines.items() if m.state == "running"]
    assert wait_for(lambda: node_state("n1").endswith("~") and not running("power-n1")
                    and node_state("gpu2").endswith("~") and set(running_now) <= set(instances.gone()),
                    IDLE + 180, 5), (node_state("n1"), node_state("gpu2"), diagnosis("n1"),
                                     diagnosis("gpu2"))  # fmt: skip
    print(f"\nidle again: both resting {time.monotonic() - done:.0f} s after their jobs ended (idle_stop {IDLE} s)")
    instances.capacity = 0
    job = as_user("sbatch --parsable -w gpu2 --wrap 'hostname'")
    reason = lambda: on_head("scontrol show node gpu2 | grep -o 'Reason=.*'")  # noqa: E731
    assert wait_for(lambda: "capacity" in reason(), 300, 3), reason() + diagnosis("gpu2", job)
    assert "meshctl: the head could not launch it again" in reason()
    assert "down" in node_state("gpu2").lower() or "drain" in node_state("gpu2").lower(), node_state("gpu2")
    assert not [m for m in instances.machines.values() if m.state == "running"]
    on_head(f"scancel {job}")


# A start the provider refuses (no capacity) leaves the node DOWN with the provider's reason: the
# program's part (`scontrol update ... state=down reason=meshctl: paperspace could not start it: ...
# out of capacity`) is tests/unit/collection/test_power_save.py::test_a_refused_start_marks_the_node_down_with_the_
# providers_reason; Slurm showing such a reason on real daemons is test_idle_again_both_rest_again_... above
# (Lambda).


def as_slurm(command: str) -> str:
    """COMMAND run on the head as the slurm user (what slurmctld's programs run as), and its exit code."""
    return on_head(f"runuser -u slurm -- sh -c {shlex.quote(command)} 2>&1; echo rc=$?")


def test_the_slurm_user_cannot_make_root_follow_or_swap_the_heads_meshctl_folders(bed):
    """meshctl's folder on the head is root's; root follows no link the slurm user lays in
    its folders (the program's log, its state folders): one in place of a folder is removed."""
    root, env, _paperspace, _lambda = bed
    assert on_head("stat -c '%U %a' /var/lib/meshctl /var/lib/meshctl/control") == "root 755\nroot 700"
    swapped = as_slurm("mv /var/lib/meshctl/control /var/lib/meshctl/gone")
    assert "Permission denied" in swapped and not swapped.endswith("rc=0"), swapped
    # Witnesses only root may own; the slurm user points its log and its request folder at them.
    on_head("install -m 600 /dev/null /root/witness && install -d -m 700 /root/witness.d")
    planted = as_slurm(
        "mv /var/log/slurm/meshctl-power.log /var/log/slurm/meshctl-power.old && "
        "ln -s /root/witness /var/log/slurm/meshctl-power.log && "
        "rm -rf /var/lib/meshctl/power/relaunch && ln -s /root/witness.d /var/lib/meshctl/power/relaunch"
    )
    assert planted.endswith("rc=0"), planted
    shown = False
    try:
        applied = meshctl(root, "apply", "--limit", NAME, env=env)
        assert on_head("stat -c '%U %G %a' /root/witness /root/witness.d") == "root root 600\nroot root 700"
        # The link in place of the spool is removed, never followed, and the run goes on.
        assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr
        assert on_head("stat -c '%F %U %a' /var/lib/meshctl/power/relaunch") == "directory slurm 750"
        shown = True
    finally:  # the bed as it was: the slurm user's own files back (and the head converged again if not shown)
        as_slurm("rm -f /var/log/slurm/meshctl-power.log && "
                 "mv /var/log/slurm/meshctl-power.old /var/log/slurm/meshctl-power.log")  # fmt: skip
        on_head("rm -rf /root/witness /root/witness.d")
        if not shown:  # for test_pod.py, which uses this head next
            meshctl(root, "apply", "--limit", NAME, env=env)


def relaunch_state() -> str:
    """The head's relaunch service as systemd says it: activating while it runs (a oneshot)."""
    return on_head("systemctl is-active meshctl-relaunch.service || true")


def test_the_relaunch_service_reads_no_fifo_or_link_the_slurm_user_lays_as_a_launch_spec(bed):
    """The head's relaunch service (root) reads a node's launch spec from the slurm user's
    folder only as a plain file: a FIFO there (which would hang root's read for up to an hour) and a
    link to a root-only file are refused at once; the node is marked down with why; root's file is
    neither read nor changed, and the service is not left running."""
    on_head("install -m 600 /dev/null /root/witness")
    spec = "/var/lib/meshctl/power/gpu2.json"
    try:
        for plant, said in ((f"mkfifo {spec}", "is not a regular file"),
                            (f"ln -s /root/witness {spec}", "Too many levels of symbolic links")):  # fmt: skip
            seen = int(on_head("journalctl -u meshctl-relaunch --no-pager -o cat | wc -l"))
            planted = as_slurm(f"rm -f {spec} && {plant} && touch /var/lib/meshctl/power/relaunch/gpu2")
            assert planted.endswith("rc=0"), planted
            journal = lambda s=seen: on_head(f"journalctl -u meshctl-relaunch --no-pager -o cat | tail -n +{s + 1}")  # noqa: E731
            assert wait_for(lambda j=journal, w=said: w in j(), 90, 1), journal()
            assert wait_for(lambda: relaunch_state() not in ("active", "activating"), 60, 1), relaunch_state()
            reason = on_head("scontrol show node gpu2 | grep -o 'Reason=.*'")
            assert "the head could not launch it again: cannot read the launch spec" in reason, reason
            assert on_head("ls /var/lib/meshctl/power/relaunch") == ""  # the request is done with
        assert on_head("stat -c '%U %G %a %s' /root/witness") == "root root 600 0"
    finally:
        as_slurm(f"rm -f {spec}")
        on_head("rm -f /root/witness")
