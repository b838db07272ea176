"""Build systemd node images without a registry, and skip builds whose inputs did not change.

Two stages per Debian suite:

``meshctl-base:<suite>``
    ``debootstrap --variant=minbase`` into a temporary folder, then ``docker import``.
``meshctl-node:<suite>``
    the base plus a thin layer (python3, systemd, openssh-server, sudo, ...) made by
    running the layer script in a container and ``docker commit``-ing it.

Every image carries the label ``org.meshctl.inputs`` with a hash of everything it was
built from (:func:`base_key`, :func:`node_key`); a build whose image already carries
the same hash is skipped. Test images only: when the host has a CA bundle
(``/etc/ssl/certs/ca-certificates.crt``, or the file named by ``MESHCTL_EXTRA_CA``),
the node layer trusts it too, so that pip inside a node works behind a
TLS-intercepting proxy. Set ``MESHCTL_EXTRA_CA=none`` to leave it out.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from meshctl.errors import EnvironmentProblem
from meshctl.localmesh import cache

LABEL = "org.meshctl.inputs"
BUILDER_VERSION = "1"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
SUITES = {"bookworm": "Debian 12", "trixie": "Debian 13"}
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
LAYER_PACKAGES = (
    "python3",
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "sudo",
    "iproute2",
    "procps",
    "ca-certificates",
    # The tests' userspace NFS client (nfs-cat, nfs-ls: a container cannot mount NFS), ready on every
    # node instead of installed by each scenario's prepare and each test that reads the share.
    "libnfs-utils",
)

# Runs inside a container of the base image. /tmp/meshctl-extra-ca.crt is copied in when used.
LAYER_SCRIPT = r"""
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends {packages} >/dev/null
if [ -f /tmp/meshctl-extra-ca.crt ]; then
  cp /tmp/meshctl-extra-ca.crt /usr/local/share/ca-certificates/meshctl-test-extra-ca.crt
  rm /tmp/meshctl-extra-ca.crt
  update-ca-certificates >/dev/null
fi
# Test bed only: apt goes through the package cache on this machine (meshctl/localmesh/cache.py)
# when one answers on the node's default gateway, and straight to the mirror when none does.
mkdir -p /usr/local/lib/meshctl-testbed
cat > /usr/local/lib/meshctl-testbed/apt-proxy <<'SCRIPT'
#!/bin/bash
gw=$(awk '$2 == "00000000" {{ print $3; exit }}' /proc/net/route)
if [ ${{#gw}} -eq 8 ]; then
  ip=$(printf '%d.%d.%d.%d' "0x${{gw:6:2}}" "0x${{gw:4:2}}" "0x${{gw:2:2}}" "0x${{gw:0:2}}")
  if timeout 1 bash -c "exec 3<>/dev/tcp/$ip/{cache_port}" 2>/dev/null; then
    echo "http://$ip:{cache_port}"
    exit 0
  fi
fi
echo DIRECT
SCRIPT
chmod 755 /usr/local/lib/meshctl-testbed/apt-proxy
echo 'Acquire::http::Proxy-Auto-Detect "/usr/local/lib/meshctl-testbed/apt-proxy";' \
  > /etc/apt/apt.conf.d/00meshctl-testbed-proxy
# Units that make no sense in a container (no consoles, no kernel to tune).
systemctl mask getty@tty1.service console-getty.service serial-getty@ttyS0.service \
  systemd-remount-fs.service sys-kernel-config.mount sys-kernel-debug.mount \
  systemd-sysctl.service systemd-modules-load.service >/dev/null 2>&1 || true
# Each container gets its own machine id and SSH host keys at first boot.
: > /etc/machine-id
rm -f /etc/ssh/ssh_host_*
mkdir -p /etc/systemd/system/ssh.service.d
printf '[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n' \
  > /etc/systemd/system/ssh.service.d/meshctl-hostkeys.conf
systemctl enable ssh.service >/dev/null 2>&1
apt-get clean
rm -rf /var/lib/apt/lists/*
"""


@dataclass(frozen=True)
class ImageSpec:
    suite: str
    mirror: str = DEFAULT_MIRROR
    extra_ca_sha256: str | None = None

    @property
    def base_tag(self) -> str:
        return f"meshctl-base:{self.suite}"

    @property
    def node_tag(self) -> str:
        return f"meshctl-node:{self.suite}"


def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def base_key(spec: ImageSpec) -> str:
    """Hash of the inputs of the debootstrap stage."""
    return _digest({"builder": BUILDER_VERSION, "suite": spec.suite, "mirror": spec.mirror, "variant": "minbase"})


def node_key(spec: ImageSpec) -> str:
    """Hash of the inputs of the node layer; changes whenever the base's does."""
    return _digest(
        {
            "base": base_key(spec),
            "packages": sorted(LAYER_PACKAGES),
            "script": LAYER_SCRIPT,
            "extra_ca": spec.extra_ca_sha256,
        }
    )


def extra_ca_path(environ: dict[str, str] | None = None) -> Path | None:
    """The CA bundle to trust inside test images, or None."""
    environ = os.environ if environ is None else environ
    chosen = environ.get("MESHCTL_EXTRA_CA")
    if chosen == "none":
        return None
    path = Path(chosen) if chosen else HOST_CA_BUNDLE
    return path if path.is_file() else None


def spec_for(suite: str, environ: dict[str, str] | None = None) -> ImageSpec:
    if suite not in SUITES:
        raise EnvironmentProblem(f"unknown suite {suite!r}", hint=f"use one of {', '.join(SUITES)}")
    environ = os.environ if environ is None else environ
    ca = extra_ca_path(environ)
    ca_hash = hashlib.sha256(ca.read_bytes()).hexdigest() if ca else None
    return ImageSpec(suite=suite, mirror=environ.get("MESHCTL_DEBIAN_MIRROR", DEFAULT_MIRROR), extra_ca_sha256=ca_hash)


def needs_build(current_label: str | None, wanted: str) -> bool:
    return current_label != wanted


def image_label(tag: str) -> str | None:
    result = subprocess.run(
        ["docker", "image", "inspect", "--format", f'{{{{ index .Config.Labels "{LABEL}" }}}}', tag],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        return None
    return result.stdout.strip() or None


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    if result.returncode != 0:
        raise EnvironmentProblem(f"{' '.join(cmd[:4])} ... failed: {(result.stderr or result.stdout).strip()[-800:]}")
    return result


def _build_base(spec: ImageSpec, key: str) -> None:
    if shutil.which("debootstrap") is None:
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "debootstrap"], check=False, capture_output=True
        )  # failure ignored: judged by which() below
        if shutil.which("debootstrap") is None:
            raise EnvironmentProblem("debootstrap is missing", hint="apt-get install debootstrap")
    with tempfile.TemporaryDirectory(prefix=f"meshctl-rootfs-{spec.suite}-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        _run(["debootstrap", "--variant=minbase", spec.suite, str(rootfs), spec.mirror])
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["docker", "import", "-c", f"LABEL {LABEL}={key}", "-", spec.base_tag],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
            check=False,
        )
        tar.wait()
        if imported.returncode != 0 or tar.returncode != 0:
            raise EnvironmentProblem(f"docker import of {spec.base_tag} failed: {imported.stderr.strip()}")


def _build_node(spec: ImageSpec, key: str, ca: Path | None) -> None:
    name = f"meshctl-build-{spec.suite}-{os.getpid()}"
    _run(["docker", "run", "-d", "--name", name, spec.base_tag, "sleep", "3600"])
    try:
        if ca is not None:
            _run(["docker", "cp", str(ca), f"{name}:/tmp/meshctl-extra-ca.crt"])
        script = LAYER_SCRIPT.format(packages=" ".join(LAYER_PACKAGES), cache_port=cache.PORT)
        _run(["docker", "exec", name, "sh", "-c", script])
        _run(
            [
                "docker",
                "commit",
                "-c",
                'CMD ["/lib/systemd/systemd"]',
                "-c",
                f"LABEL {LABEL}={key}",
                name,
                spec.node_tag,
            ]
        )
    finally:
        subprocess.run(
            ["docker", "rm", "-f", name], capture_output=True, check=False
        )  # failure ignored: removing the build container is a cleanup


def build(suite: str, say=print) -> dict[str, str]:
    """Build (or reuse) the base and node images of one suite. Return what happened to each."""
    spec = spec_for(suite)
    ca = extra_ca_path()
    outcome = {}
    for tag, key, builder in (
        (spec.base_tag, base_key(spec), lambda k: _build_base(spec, k)),
        (spec.node_tag, node_key(spec), lambda k: _build_node(spec, k, ca)),
    ):
        started = time.monotonic()
        if needs_build(image_label(tag), key):
            say(f"image {tag}: building (inputs {key[:12]})")
            builder(key)
            outcome[tag] = "built"
        else:
            outcome[tag] = "cached"
        say(f"image {tag}: {outcome[tag]} in {time.monotonic() - started:.1f}s")
    return outcome
