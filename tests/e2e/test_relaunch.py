"""Issue 29: a Lambda node (Lambda has no stop) that opts in is terminated when idle, and a job for
it has the head launch a new instance and set it up from scratch; the job runs there.

A Debian 12 head and the Lambda stand-in (tests/cloud_standin.py) on the nodes' network gateway,
whose launches are new Docker nodes from meshctl-node:bookworm with nothing of the mesh on them:
a user `ubuntu` with sudo and the launch's SSH key authorized, as a Lambda VM comes. `meshctl
launch lambda` adds gpu2 (the control machine's key is registered at Lambda as `laptop`); with
`idle_stop: 60s` and `idle_terminate: true`, `meshctl apply` gives the head its relaunch service
(meshctl itself, pip-installed there, on the head's copy of the mesh). Then, on real daemons:
idle, gpu2 is terminated (`idle~`, its container removed); a job for it has the head register
its own key at Lambda, launch a new instance named gpu2, authorize the control machine's key on
it and converge it (`apply --limit gpu2` on the head), and the job runs; the control machine's
next `meshctl apply` records the new instance (found by the node's name) and reaches it; idle
again, it is terminated again; a launch Lambda refuses (no capacity) leaves gpu2 DOWN with the
reason. Needs the Docker engine, the meshctl-node:bookworm image and the Python package index
(the head's pip, through the test bed's CA bundle).

A VM launched for the job boots after Slurm asked for it: slurmctld waits for that. A container
shares its host's uptime (booted long before), so each new instance's slurmd gets its own boot
clock, as in test_power_save.py: a time namespace whose boot time is slurmd's start, through a
wrapper laid where the package's alternative would link (CAP_SYS_TIME in those containers only).
That is the VM's boot, emulated; nothing of meshctl's is changed.
"""

import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from meshctl.localmesh import nodes
from tests.cloud_standin import KEY, DockerBackend, Standin
from tests.e2e import meshctl_in, on_container, slurm_job_state, wait_for

pytestmark = pytest.mark.e2e

SPEC = nodes.LocalMesh("meshctl-relaunch", "100.100.75.0/24", ("relaunch-head",))
HEAD = "100.100.75.10"
GATEWAY = "100.100.75.1"  # the control machine on the nodes' network: where the stand-in listens
IDLE = 60  # seconds: gpu2's idle_stop
CA = "PIP_CERT: /etc/ssl/certs/ca-certificates.crt"

# A new instance: Lambda's user with sudo, and slurmd (once Debian's package installs it as
# /usr/sbin/slurmd-wlm, which /usr/sbin/slurmd is an alternative for) under a boot clock that
# starts when it starts: /usr/sbin/slurmd is this wrapper, laid first (update-alternatives then
# leaves it in place).
VM = r"""set -e
id ubuntu >/dev/null 2>&1 || useradd -m -s /bin/bash ubuntu
echo 'ubuntu ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/90-cloud-init-users
chmod 440 /etc/sudoers.d/90-cloud-init-users
clock='--boottime=-$(cut -d. -f1 /proc/uptime)'
printf '%s\n' '#!/bin/sh' 'sleep 3' \
  "exec unshare --time --fork --kill-child=TERM $clock /usr/sbin/slurmd-wlm \"\$@\"" > /usr/sbin/slurmd
chmod 755 /usr/sbin/slurmd
"""


def meshctl(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return meshctl_in(root, *args, env=env, timeout=1200)


def on_head(command: str) -> str:
    return on_container("relaunch-head", command)


def node_state() -> str:
    return on_head("sinfo --noheader --Node --nodes=gpu2 --format=%T")


def job_state(job: str) -> str:
    return slurm_job_state("relaunch-head", job)


def held_on_gpu2() -> list[tuple[int, int]]:
    """(seconds, CPUs) of each of root's jobs on gpu2 today, from Slurm's accounting."""
    lines = on_head("sacct -X -n -P -u root -S today -o NodeList,ElapsedRaw,AllocTRES").split()
    return [(int(r.split("|")[1]), int(r.split("cpu=")[1].split(",")[0])) for r in lines if r.startswith("gpu2|")]


class Instances(DockerBackend):
    """Lambda's instances as Docker nodes: a launch is a new container at the next address."""

    def __init__(self):
        super().__init__(create=self.make)
        self.addresses = (f"100.100.75.{n}" for n in itertools.count(21))

    def make(self, machine) -> str:
        name, ip = f"relaunch-{machine.id[-4:]}", next(self.addresses)
        args = nodes.run_args(nodes.Node(name, ip), "meshctl-node:bookworm", SPEC.network)
        subprocess.run([*args[:-1], "--cap-add", "SYS_TIME", args[-1]], capture_output=True, check=True)
        assert nodes.wait_running(name) in ("running", "degraded")
        subprocess.run(["docker", "exec", "-i", name, "bash"], input=VM, text=True, check=True)
        for key in machine.public_keys:
            nodes.authorize(name, key, user="ubuntu")
        machine.ip = ip
        return name

    def gone(self) -> list[str]:
        return [i for i, m in self.machines.items() if m.state == "terminated"]


def diagnosis(job: str | None = None) -> str:
    parts = {
        "job": on_head(f"scontrol show job {job}") if job else "",
        "node gpu2": on_head("scontrol show node gpu2"),
        "power log": on_head("tail -n 20 /var/log/slurm/meshctl-power.log"),
        "relaunch service": on_head("journalctl --no-pager -u meshctl-relaunch -n 60"),
        "slurmctld on gpu2": on_head("grep -i -e gpu2 -e power -e resume /var/log/slurm/slurmctld.log | tail -n 30"),
    }
    return "\n".join(f"--- {name}:\n{text}" for name, text in parts.items())


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode:
        pytest.skip("no Docker engine (run `make engine images`)")
    if subprocess.run(["docker", "image", "inspect", "meshctl-node:bookworm"], capture_output=True).returncode:
        pytest.skip("no meshctl-node:bookworm image (make images)")
    root = tmp_path_factory.mktemp("relaunch")
    key = root / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    backend = Instances()
    stale = subprocess.run(["docker", "ps", "-aq", "--filter", "name=^relaunch-"], capture_output=True, text=True,
                           check=False).stdout.split()  # fmt: skip
    if stale:  # instances of a run that was cut short
        subprocess.run(["docker", "rm", "-f", "-v", *stale], capture_output=True, check=False)
    nodes.down(say=lambda _m: None, spec=SPEC)
    nodes.up("bookworm", say=lambda _m: None, spec=SPEC)
    nodes.authorize("relaunch-head", key.with_suffix(".pub").read_text())
    try:
        with Standin("lambda", backend, bind=GATEWAY) as api:
            api.ssh_keys["laptop"] = key.with_suffix(".pub").read_text().strip()  # registered in Lambda's console
            env = {"MESHCTL_LAMBDA_API_URL": api.url}
            made = meshctl(root, "init", "lab", "--head", f"root@{HEAD}", "--name", "head", "--ssh-key", str(key),
                           "--provider", "local", env=env)  # fmt: skip
            assert made.returncode == 0, made.stdout[-3000:] + made.stderr
            with (root / "lab" / "group_vars" / "all.yml").open("a") as handle:  # test-bed CA for pip; no PyTorch
                handle.write(f"mlflow_pip_environment:\n  {CA}\nmlflow_workers: 1\n")
                handle.write(f"job_env_pip_environment:\n  {CA}\njob_env_torch: ''\n")
                handle.write(f"power_save_pip_environment:\n  {CA}\n")
                # The global SuspendTime an hour: only gpu2's own idle time can stop it within the test.
                handle.write("slurm_suspend_timeout: 30\nslurm_suspend_time: 3600\n")
                handle.write("slurm_accounting: true\n")  # `meshctl usage`: cost per user on real accounting
            key_file = root / "lambda.key"
            key_file.write_text(KEY + "\n")
            key_file.chmod(0o600)
            stored = meshctl(root, "provider", "add", "lambda", "--key-file", str(key_file), env=env)
            assert stored.returncode == 0, stored.stdout + stored.stderr
            started = time.monotonic()
            launched = meshctl(root, "launch", "lambda", "--type", "gpu_1x_a10", "--name", "gpu2", "--region",
                               "us-east-1", "--ssh-key-name", "laptop", "--ssh-key", str(key), "-y",
                               env=env)  # fmt: skip
            assert launched.returncode == 0, launched.stdout[-4000:] + launched.stderr
            print(f"\nlaunch lambda (a new instance set up from nothing): {time.monotonic() - started:.0f} s")
            yield root, api, backend, env
    finally:
        for container in backend.containers.values():
            subprocess.run(["docker", "rm", "-f", "-v", container], capture_output=True, check=False)
        nodes.down(say=lambda _m: None, spec=SPEC)


def test_an_idle_lambda_node_is_terminated_and_a_job_has_the_head_launch_it_again(bed):
    root, api, backend, env = bed
    inventory = root / "lab" / "mesh.yml"
    data = yaml.safe_load(inventory.read_text())
    first = data["all"]["hosts"]["gpu2"]["meshctl_instance"]
    data["all"]["hosts"]["gpu2"].update({"idle_stop": f"{IDLE}s", "idle_terminate": True})
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    applied = meshctl(root, "apply", "--limit", "gpu2", env=env)
    assert applied.returncode == 0, applied.stdout[-4000:] + applied.stderr
    # The head's relaunch service: meshctl and its packages, the head's copy of the mesh (root only).
    assert on_head("systemctl is-active meshctl-relaunch.path") == "active"
    assert on_head("/opt/meshctl/control/venv/bin/python -c 'import ansible_runner, click; print(1)'") == "1"
    assert on_head("stat -c '%a %U' /var/lib/meshctl/control /var/lib/meshctl/control/secrets/munge.key") == \
        "700 root\n600 root"  # fmt: skip
    assert "ansible_connection: local" in on_head("cat /var/lib/meshctl/control/mesh.yml")
    assert KEY not in applied.stdout + applied.stderr
    again = meshctl(root, "apply", "--limit", "gpu2", env=env)  # nothing of it is done twice
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr
    # Idle for idle_stop: Slurm's suspend terminates the instance (Lambda has no stop).
    assert wait_for(lambda: node_state().endswith("~") and first.split(":")[1] in backend.gone(), IDLE + 180), (
        node_state(), diagnosis())  # fmt: skip
    assert "terminated (idle_terminate)" in on_head("cat /var/log/slurm/meshctl-power.log")
    # A job for it: the head launches a new instance and sets it up; slurmd registers; the job runs.
    submitted = time.monotonic()
    job = on_head("sbatch --parsable -w gpu2 --wrap 'hostname; sleep 10'")
    assert job.isdigit(), job
    ran = wait_for(lambda: job_state(job) in ("RUNNING", "COMPLETING", "COMPLETED") and time.monotonic(), 900, 3)
    if not ran:
        why = diagnosis(job)
        on_head(f"scancel {job}")
        pytest.fail(f"the job never started on the relaunched node:\n{why}")
    assert wait_for(lambda: job_state(job) == "COMPLETED", 120, 1), diagnosis(job)
    new = [m for m in backend.machines.values() if m.state == "running" and m.name == "gpu2"]
    assert len(new) == 1, [(m.id, m.name, m.state) for m in backend.machines.values()]
    head_key = on_head("cat /var/lib/meshctl/control/head_ed25519.pub")
    assert ("POST", "/api/v1/ssh-keys") in api.requests  # the head's own key, registered by the head
    assert new[0].public_keys == [head_key] and new[0].region == "us-east-1" and new[0].kind == "gpu_1x_a10"
    container = backend.containers[new[0].id]
    read = f"cat /root/slurm-{job}.out || cat /slurm-{job}.out"
    out = subprocess.run(["docker", "exec", container, "bash", "-c", read], capture_output=True, text=True,
                         check=False).stdout  # fmt: skip
    assert out.strip() == container, out
    print(f"\nsbatch to RUNNING on a terminated Lambda node (launch + full setup by the head): "
          f"{ran - submitted:.0f} s")  # fmt: skip
    # A job that holds gpu2 meanwhile: idle for idle_stop, it would be terminated under the run.
    hold = on_head("sbatch --parsable -w gpu2 --wrap 'sleep 900'")
    assert wait_for(lambda: job_state(hold) == "RUNNING", 60, 1), diagnosis(hold)
    # The control machine follows: the new instance, found by the node's name, reached with its own key.
    applied = meshctl(root, "apply", env=env)
    assert applied.returncode == 0, applied.stdout[-4000:] + applied.stderr
    assert f"gpu2: launched again by the head as lambda:{new[0].id}" in applied.stdout, applied.stdout[-3000:]
    host = yaml.safe_load(inventory.read_text())["all"]["hosts"]["gpu2"]
    assert host["meshctl_instance"] == f"lambda:{new[0].id}" and host["ansible_host"] == new[0].ip
    assert host["mesh_address"] == new[0].ip  # no tailnet in this bed: the mesh address is the SSH address
    assert f"NodeAddr={new[0].ip} " in on_head("scontrol show node gpu2")  # Slurm reaches the new machine
    status = meshctl(root, "status", "--json", env=env)
    rows = {r["name"]: r for r in json.loads(status.stdout)["nodes"]}
    assert rows["gpu2"]["healthy"] is True, rows["gpu2"]
    # Cost per user from Slurm's accounting: each job's share of gpu2 (its CPUs of gpu2's, no GPUs) at
    # the instance's price; an 8x H100's price here, so the cost is more than a rounding. The holding
    # job runs on: the cost lies between what accounting says before and after.
    new[0].price = 36.0
    before = held_on_gpu2()
    used = meshctl(root, "usage", "--json", env=env)
    after = held_on_gpu2()
    assert used.returncode == 0, used.stdout[-3000:] + used.stderr
    report = json.loads(used.stdout)
    mine = next(u for u in report["users"] if u["user"] == "root")
    cpus = int(on_head("scontrol show node gpu2 | grep -o 'CPUTot=[0-9]*' | cut -d= -f2"))
    low, high = (sum(36.0 * min(1.0, n / cpus) * secs / 3600 for secs, n in h) for h in (before, after))
    assert sum(secs for secs, _n in before) >= 10 and "gpu2" in mine["nodes"], (report, before)
    assert low - 0.011 <= mine["cost"] <= high + 0.011 and mine["cost"] > 0, (report, before, after, cpus)
    cpu_low, cpu_high = (sum(n * secs for secs, n in h) / 3600 for h in (before, after))
    assert cpu_low - 0.002 <= mine["cpu_hours"] <= cpu_high + 0.002, (report, before, after)
    assert mine["gpu_hours"] == 0 and mine["jobs"] >= len(before), report
    on_head(f"scancel {hold}")


def test_idle_again_it_is_terminated_again_and_a_launch_lambda_refuses_leaves_it_down_with_the_reason(bed):
    _root, _api, backend, _env = bed
    running = [i for i, m in backend.machines.items() if m.state == "running"]
    assert wait_for(lambda: node_state().endswith("~") and set(running) <= set(backend.gone()), IDLE + 180), (
        node_state(), diagnosis())  # fmt: skip
    backend.capacity = 0
    job = on_head("sbatch --parsable -w gpu2 --wrap 'hostname'")
    reason = lambda: on_head("scontrol show node gpu2 | grep -o 'Reason=.*'")  # noqa: E731
    assert wait_for(lambda: "capacity" in reason(), 300, 3), reason() + diagnosis(job)
    assert "meshctl: the head could not launch it again" in reason()
    assert "down" in node_state().lower() or "drain" in node_state().lower(), node_state()
    assert not [m for m in backend.machines.values() if m.state == "running"]
    on_head(f"scancel {job}")
