"""The test bed's wheel cache: the Python packages the meshes install, downloaded once per machine.

Every mesh the demo and the tests make installs MLflow on its head (role mlflow), MLflow's client
and NumPy on every node (role job_env) and, on a head that stops nodes, meshctl's own requirements
(role relaunch). From PyPI that is some 230 MB per mesh, and most of pip's time on a node is
asking PyPI's index through this machine's proxy (MLflow's install: 35 s with the index, 24 s from
a local folder alone, measured 2026-11-26). Here they cross the network once per machine:

- :func:`fill` downloads them with pip inside a container of each node image (Debian 12 and 13, so
  pip picks exactly the files those Pythons take) into :data:`DIR`, what to download read from the
  roles' own defaults (:func:`requirement_sets`); :data:`FILLED` records what was filled, written
  last, so a half-filled folder is never taken for a filled one;
- a small HTTP server serves the folder on :data:`PORT` (its PID recorded in
  :data:`STARTED_BY_US`; only a process this module started is ever stopped);
- :func:`pip_environment` gives a test bed the pip settings that send its nodes there
  (``PIP_FIND_LINKS``, ``PIP_NO_INDEX``, ``PIP_TRUSTED_HOST``), and ``{}`` unless the cache is
  filled with what the roles ask today and answers: a bed then goes to PyPI as a user's mesh does.

The settings are the test beds' (the roles' ``*_pip_environment`` variables in their
group_vars); a user's mesh never carries them. The address is this machine's on Docker's default
bridge, which containers on every Docker network reach.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from meshctl import headcopy, resources
from meshctl.errors import EnvironmentProblem
from meshctl.localmesh import cache, images

PORT = 3144  # beside the package cache's 3143
ROOT = Path("/var/lib/meshctl-testbed")
DIR = ROOT / "wheels"
FILLED = ROOT / "wheels.filled"  # what DIR was filled with (a digest), written when it is complete
LOCK = ROOT / "wheels.lock"
RUN_DIR = Path("/run/meshctl-wheels")
STARTED_BY_US = RUN_DIR / "pid"
LOG = RUN_DIR / "server.log"
SUITES = tuple(images.SUITES)  # every node image: each Python picks its own files
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# A test bed's pip writes no bytecode for what it installs: compiling every module of MLflow's
# server (its whole dependency tree) was three quarters of the install's CPU time (mlflow[auth]
# 41 -> 9 CPU-s in a bookworm node), while the server compiles only what it imports (about 2500
# modules: its start 6 -> 18 s on an idle machine), once: role mlflow gives a server whose
# virtualenv has no bytecode a cache folder of its own (mlflow_venv_bytecode, measured
# 2026-11-27). Not set where PyTorch is installed (Molecule's `default`): each training
# process imports torch, 2.5 s more each time without its bytecode; a test run without it had a
# verify 95 s longer and a converge 124 s shorter, one with it the other way round (one run
# each, to be measured again). pip reads `--compile`'s own variable: PIP_COMPILE=0
# (PIP_NO_COMPILE=1 compiles: pip inverts the values of its --no-* variables).
NO_COMPILE = {"PIP_COMPILE": "0"}
FILL_VERSION = "1"
SERVER_PYTHON = "/usr/bin/python3"  # the system's: nobody may not reach a checkout's virtualenv
NOBODY = 65534  # the server's user and group: it only reads DIR


# The test machines' CPU build of PyTorch for Python 3.11 (scripts/demo.sh, Molecule's `default`):
# the fill lays it in the cache with what it needs (``torch_requirements``), so that a bed whose
# jobs train installs it from there (tests/e2e: ``torch_settings``), on any node or rented machine.
TORCH_WHEELS = Path(os.environ.get("MESHCTL_WHEELS", "/opt/wheels"))


def torch_wheel(folder: Path = TORCH_WHEELS) -> Path | None:
    found = sorted(folder.glob("torch-*+cpu-cp311-*.whl")) if folder.is_dir() else []
    return found[0] if found else None


def torch_requirements(wheel: Path | None) -> list[str]:
    """What the PyTorch wheel WHEEL needs (its METADATA's Requires-Dist, extras left out): none
    without a wheel."""
    import zipfile

    if wheel is None:
        return []
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode("utf-8", "replace")
    return sorted(line.split(":", 1)[1].strip() for line in text.splitlines()
                  if line.startswith("Requires-Dist:") and ";" not in line)  # fmt: skip


def requirement_sets() -> dict[str, list[str]]:
    """What each role installs with pip, from the roles' defaults (one place knows each), and what
    the test machines' PyTorch wheel needs (a bed whose jobs train)."""
    job_env = resources.role_defaults("job_env")
    return {
        "mlflow": [mlflow_package()],
        "job_env": [str(p) for p in job_env.get("job_env_packages") or []],
        "relaunch": headcopy.requirements(),
        "relaunch_mitogen": headcopy.mitogen_requirements(),  # a head with relaunch_mitogen on
        "job_env_torch": torch_requirements(torch_wheel()),
    }


def mlflow_package() -> str:
    """The server's requirement as role mlflow writes it (vars/main.yml ``mlflow_package``), with
    its default version and the basic-auth extra on: what a bed's head installs (the extra's
    packages come on top of plain MLflow's, so a bed with auth off finds its files too)."""
    import jinja2

    text = (resources.roles_dir() / "mlflow" / "vars" / "main.yml").read_text(encoding="utf-8")
    template = yaml.safe_load(text)["mlflow_package"]
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
    environment.filters["bool"] = bool
    return environment.from_string(template).render(
        mlflow_auth=True, mlflow_version=resources.role_defaults("mlflow")["mlflow_version"]
    )


def digest(sets: dict[str, list[str]], suites: tuple[str, ...] = SUITES) -> str:
    """What a fill is of: the requirement sets, the images they were resolved for and the PyTorch
    wheel laid beside them."""
    wheel = torch_wheel()
    text = json.dumps({"version": FILL_VERSION, "sets": sets, "suites": list(suites),
                       "torch": wheel.name if wheel else None}, sort_keys=True)  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()


def fill_script(sets: dict[str, list[str]]) -> str:
    """The shell run in a node image's container: pip downloads every set into /wheels.

    Each set is resolved on its own, as each role's pip resolves it on a node."""
    downloads = "\n".join(
        f"/tmp/venv/bin/pip download -q --dest /wheels {' '.join(shlex.quote(r) for r in reqs)}"
        for reqs in sets.values()
        if reqs
    )
    return "\n".join(
        [
            "set -eu",
            "export DEBIAN_FRONTEND=noninteractive",
            "apt-get update -qq",
            "apt-get install -y -qq --no-install-recommends python3-venv >/dev/null",
            "python3 -m venv /tmp/venv",
            downloads,
        ]
    )


def is_filled(wanted: str) -> bool:
    try:
        return FILLED.read_text().strip() == wanted
    except OSError:
        return False


def answering(port: int = PORT) -> bool:
    return cache.answering(port)


def bridge_address() -> str | None:
    """This machine's address on Docker's default bridge (docker0), or None.

    Docker names it as the network's gateway; an engine that leaves the gateway out of the bridge's
    IPAM settings (seen with Docker 28 here: only the subnet) gives the bridge's first address,
    which Docker takes for docker0 by default."""
    result = subprocess.run(
        ["docker", "network", "inspect", "bridge", "--format",
         "{{range .IPAM.Config}}{{.Gateway}}|{{.Subnet}} {{end}}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return gateway_of(result.stdout) if result.returncode == 0 else None


def gateway_of(ipam: str) -> str | None:
    """The bridge's address from ``GATEWAY|SUBNET`` pairs: the first IPv4 gateway, else the first
    host of the first IPv4 subnet."""
    import ipaddress

    pairs = [item.partition("|")[::2] for item in ipam.split()]
    for gateway, _subnet in pairs:
        if gateway.count(".") == 3:
            return gateway
    for _gateway, subnet in pairs:
        with contextlib.suppress(ValueError):
            network = ipaddress.ip_network(subnet, strict=False)
            if network.version == 4 and network.num_addresses > 2:
                return str(network.network_address + 1)
    return None


def settings_for(address: str) -> dict[str, str]:
    """pip's settings that take every package from the cache at ADDRESS and nothing from an index."""
    return {
        "PIP_FIND_LINKS": f"http://{address}:{PORT}/",
        "PIP_NO_INDEX": "1",
        "PIP_TRUSTED_HOST": f"{address}:{PORT}",
    }


def pip_environment() -> dict[str, str]:
    """The settings for a test bed's pip: the cache's when it is filled with what the roles ask
    for today and answers, else {} (the bed's nodes go to PyPI)."""
    if not (is_filled(digest(requirement_sets())) and answering()):
        return {}
    address = bridge_address()
    return settings_for(address) if address else {}


def bed_pip_environment() -> dict[str, str]:
    """What a test bed gives pip on its nodes: the CA bundle of the node images (this machine's proxy
    may intercept TLS), no bytecode (:data:`NO_COMPILE`), and the cache's settings when it is ready
    (:func:`pip_environment`)."""
    return {"PIP_CERT": CA_BUNDLE, **NO_COMPILE, **pip_environment()}


@contextlib.contextmanager
def _locked():
    ROOT.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def fill(say=print) -> bool:
    """Download what the roles install into DIR, for every node image; False when it already was."""
    sets = requirement_sets()
    wanted = digest(sets)
    with _locked():
        if is_filled(wanted):
            say(f"wheel cache: filled ({len(list(DIR.glob('*')))} files in {DIR})")
            return False
        FILLED.unlink(missing_ok=True)
        DIR.mkdir(parents=True, exist_ok=True)
        DIR.chmod(0o755)
        for suite in SUITES:
            started = time.monotonic()
            tag = images.spec_for(suite).node_tag
            result = subprocess.run(
                ["docker", "run", "--rm", "--entrypoint", "sh", "-e", f"PIP_CERT={CA_BUNDLE}",
                 "-v", f"{DIR}:/wheels", tag, "-c", fill_script(sets)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if result.returncode != 0:
                raise EnvironmentProblem(
                    f"filling the wheel cache for {suite} failed: {(result.stderr or result.stdout).strip()[-600:]}",
                    hint="run `make images` first; the nodes then install from PyPI",
                )
            say(f"wheel cache: {suite} filled in {time.monotonic() - started:.0f}s")
        wheel = torch_wheel()
        if wheel is not None:  # served with the rest: a bed's nodes (and a head that rents) install it from here
            shutil.copy2(wheel, DIR / wheel.name)
        for path in DIR.iterdir():
            path.chmod(0o644)
        FILLED.write_text(wanted + "\n")
        say(f"wheel cache: {len(list(DIR.iterdir()))} files in {DIR}")
        return True


def serve(timeout: float = 10.0, say=print) -> bool:
    """Serve DIR on PORT (as nobody, no other group) unless something answers there; False when it already did."""
    if answering():
        say(f"wheel cache: already answering on port {PORT}")
        return False
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with LOG.open("ab") as log:
        server = subprocess.Popen(
            [SERVER_PYTHON, "-m", "http.server", str(PORT), "--bind", "0.0.0.0", "--directory", str(DIR)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            user=NOBODY, group=NOBODY, extra_groups=[],
        )  # fmt: skip
    STARTED_BY_US.write_text(f"{server.pid}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if answering():
            say(f"wheel cache: serving {DIR} on port {PORT}")
            return True
        if server.poll() is not None:
            break
        time.sleep(0.2)
    raise EnvironmentProblem(f"the wheel cache's server did not answer on port {PORT}", hint=f"read {LOG}")


def ensure(say=print) -> None:
    """Fill the cache (once per machine and requirement list) and serve it."""
    if os.geteuid() != 0:
        say("wheel cache: needs root; the nodes install from PyPI")
        return
    fill(say=say)
    serve(say=say)


def wait_ready(
    seconds: float, step: float = 2.0, say=print, ready=None, clock=time.monotonic, sleep=time.sleep
) -> bool:
    """Wait up to SECONDS for the cache a background fill is making to be filled and answering
    (:func:`pip_environment` not empty): a suite's lanes start together with the checks, and their
    first beds would otherwise go to PyPI. False when it is not ready by then (the beds then go to
    PyPI, as without the cache); at once when this is not root, which never fills it."""
    ready = ready or (lambda: bool(pip_environment()))
    if os.geteuid() != 0:
        return False
    started = clock()
    while not ready():
        if clock() - started >= seconds:
            say(f"wheel cache: not ready after {seconds:.0f}s; the beds go to PyPI")
            return False
        sleep(step)
    say(f"wheel cache: ready after {clock() - started:.0f}s")
    return True


def start_in_background(log: Path) -> None:
    """Fill and serve in a process of its own, for the suite to go on meanwhile (downloads are
    not the CPU's work): a bed made before it is done goes to PyPI."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        subprocess.Popen(  # failure ignored: a bed made before it serves goes to PyPI
            [sys.executable, "-m", "meshctl.localmesh", "wheels"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
        )  # fmt: skip


def stop(say=print) -> bool:
    """Stop the server only if this module started it."""
    try:
        pid = int(STARTED_BY_US.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        say("wheel cache: not started by meshctl, leaving it alone")
        return False
    if b"http.server" not in cmdline or str(PORT).encode() not in cmdline:
        return False
    os.kill(pid, 15)
    say(f"wheel cache: stopped its server {pid}")
    return True
