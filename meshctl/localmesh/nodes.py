"""Start and stop the local mesh: systemd node containers on a tailnet-like network."""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import netaddr

from meshctl import resources
from meshctl.errors import EnvironmentProblem

NETWORK = "meshctl-demo"
SUBNET = "100.100.20.0/24"  # inside 100.64.0.0/10, like tailnet addresses
NODE_NAMES = ("head", "gpu1", "cpu1")


@dataclass(frozen=True)
class LocalMesh:
    network: str = NETWORK
    subnet: str = SUBNET
    names: tuple[str, ...] = NODE_NAMES


DEMO = LocalMesh()
# systemd as PID 1 without --privileged (which fails on our hosts): capabilities one by one.
CAPABILITIES = ("SYS_ADMIN", "NET_ADMIN", "MKNOD", "DAC_READ_SEARCH", "SYS_PTRACE")


@dataclass(frozen=True)
class Node:
    name: str
    address: str


def plan_nodes(names=NODE_NAMES, subnet: str = SUBNET) -> list[Node]:
    """Give each node a fixed address: the subnet's .10, .11, ... in order."""
    net = netaddr.IPNetwork(subnet)
    if not netaddr.IPNetwork("100.64.0.0/10").__contains__(net):
        raise EnvironmentProblem(f"{subnet} is not inside 100.64.0.0/10")
    return [Node(name, str(net[10 + i])) for i, name in enumerate(names)]


# Each node's /etc/hosts and /etc/resolv.conf, kept on this machine as a VM keeps them on its disk
# (Docker would write its own at every start): docs/testing.md, "A bed like real VMs".
VM_FILES = Path(os.environ.get("MESHCTL_BED_FILES", "/var/lib/meshctl-testbed/nodes"))


def cloud_hosts(name: str) -> str:
    """/etc/hosts as a fresh Debian or Ubuntu cloud VM has it: its own name on 127.0.1.1, no other node."""
    return (f"127.0.0.1\tlocalhost\n127.0.1.1\t{name}\n\n::1\tlocalhost ip6-localhost ip6-loopback\n"
            "ff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n")  # fmt: skip


def cloud_resolv(host_resolv: str) -> str | None:
    """A node's resolv.conf: this machine's name servers, not Docker's (which answers every
    container's name, as no cloud resolver answers a VM's neighbours). None when this machine has
    none a container can reach (a loopback one): the node keeps Docker's then."""
    servers = []
    for line in host_resolv.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "nameserver":
            try:
                address = ipaddress.ip_address(fields[1])
            except ValueError:
                continue
            if not address.is_loopback:
                servers.append(str(address))
    return "".join(f"nameserver {server}\n" for server in servers) if servers else None


def share_volume(network: str) -> str:
    """The bed's share: one Docker volume per network, mounted on every node at the share's path."""
    return f"{network}-share"


def vm_file_args(name: str) -> list[str]:
    """Mounts of a new node NAME's own /etc/hosts and /etc/resolv.conf, written here first as a
    fresh VM has them; a restart (`docker start`) keeps what the node made of them, as a VM's disk."""
    folder = VM_FILES / name
    folder.mkdir(parents=True, exist_ok=True)
    args = []
    hosts = folder / "hosts"
    hosts.write_text(cloud_hosts(name))
    args += ["-v", f"{hosts}:/etc/hosts"]
    try:
        resolv_text = cloud_resolv(Path("/etc/resolv.conf").read_text())
    except OSError:
        resolv_text = None
    if resolv_text:
        resolv = folder / "resolv.conf"
        resolv.write_text(resolv_text)
        args += ["-v", f"{resolv}:/etc/resolv.conf:ro"]
    return args


def forget_vm_files(name: str) -> None:
    shutil.rmtree(VM_FILES / name, ignore_errors=True)


def run_args(node: Node, image: str, network: str = NETWORK) -> list[str]:
    """`docker run` of NODE as a bed node: systemd, its address, names as a fresh cloud VM resolves
    them (vm_file_args; it writes their files), and the bed's share at the share's path: the
    honest stand-in for the kernel's NFS mount, which this kernel cannot make (docs/testing.md)."""
    args = ["docker", "run", "-d", "--name", node.name, "--hostname", node.name]
    args += ["--network", network, "--ip", node.address, "--cgroupns=host"]
    args += ["-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/run/lock"]
    # The shared folder is a named volume (NFS-Ganesha's VFS export needs a filesystem with file
    # handles), the same one on every node of the network.
    args += ["-v", f"{share_volume(network)}:{resources.role_defaults('mesh')['mesh_share_path']}"]
    args += vm_file_args(node.name)
    args += ["--label", "org.meshctl.localmesh=1"]
    for cap in CAPABILITIES:
        args += ["--cap-add", cap]
    if os.path.exists("/dev/net/tun"):  # Tailscale's kernel networking, as on a VM
        args += ["--device", "/dev/net/tun"]
    return [*args, image]


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise EnvironmentProblem(f"docker {' '.join(args[:3])} failed: {result.stderr.strip()}")
    return result


def system_state(name: str) -> str:
    result = _docker("exec", name, "systemctl", "is-system-running", check=False)
    return result.stdout.strip() or result.stderr.strip()


def wait_running(name: str, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    state = "unknown"
    while time.monotonic() < deadline:
        state = system_state(name)
        if state in ("running", "degraded"):
            return state
        time.sleep(1)
    return state


def failed_units(name: str) -> str:
    return _docker("exec", name, "systemctl", "--failed", "--no-legend", "--plain", check=False).stdout.strip()


def up(
    suite: str = "bookworm", say=print, spec: LocalMesh = DEMO, ready: bool = False, bare: tuple[str, ...] = ()
) -> list[Node]:
    """Start SPEC's nodes from the bare node image of SUITE, as the demo does; with READY, a test
    bed's nodes but those named in BARE start from the ready image when it is built for today's
    roles (:func:`meshctl.localmesh.ready.bed_image`): what the roles install is there already."""
    from meshctl.localmesh import ready as ready_images

    plain = f"meshctl-node:{suite}"
    prepared = ready_images.bed_image(suite) if ready else plain
    nodes = plan_nodes(spec.names, spec.subnet)
    if _docker("network", "inspect", spec.network, check=False).returncode != 0:
        _docker("network", "create", "--subnet", spec.subnet, spec.network)
        say(f"network {spec.network} ({spec.subnet}): created")
    for node in nodes:
        running = _docker("container", "inspect", "--format", "{{.State.Running}}", node.name, check=False)
        if running.returncode == 0:
            if running.stdout.strip() != "true":
                _docker("start", node.name)
                say(f"node {node.name}: existed stopped, started again")
            else:
                say(f"node {node.name}: already running, kept")
            continue
        image = plain if node.name in bare else prepared
        subprocess.run(run_args(node, image, spec.network), capture_output=True, text=True, check=True)
        say(f"node {node.name}: started at {node.address} from {image}")
    for node in nodes:
        state = wait_running(node.name)
        say(f"node {node.name}: systemd {state}")
        if state == "degraded":
            say(f"  failed units on {node.name}: {failed_units(node.name) or '(none listed)'}")
        elif state != "running":
            raise EnvironmentProblem(f"node {node.name} did not boot systemd (state {state!r})")
    return nodes


def down(say=print, spec: LocalMesh = DEMO) -> None:
    for name in spec.names:
        if _docker("rm", "-f", "-v", name, check=False).returncode == 0:
            say(f"node {name}: removed")
        forget_vm_files(name)
    _docker("network", "rm", spec.network, check=False)
    # Left while another container of the network still uses it (a test's own node): kept then.
    _docker("volume", "rm", share_volume(spec.network), check=False)


def authorize(name: str, public_key: str, user: str = "root") -> None:
    """Put an SSH public key into a node's authorized_keys (what a cloud provider does at boot)."""
    home = "/root" if user == "root" else f"/home/{user}"
    script = (
        f"set -e; id {user} >/dev/null 2>&1 || useradd -m -s /bin/bash {user}; "
        f"install -d -m 700 -o {user} -g {user} {home}/.ssh; "
        f"touch {home}/.ssh/authorized_keys; "
        f'grep -qxF "$KEY" {home}/.ssh/authorized_keys || printf \'%s\\n\' "$KEY" >> {home}/.ssh/authorized_keys; '
        f"chown {user}:{user} {home}/.ssh/authorized_keys; chmod 600 {home}/.ssh/authorized_keys"
    )
    _docker("exec", "-e", f"KEY={public_key.strip()}", name, "sh", "-c", script)
