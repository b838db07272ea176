import pytest

from meshctl.errors import EnvironmentProblem
from meshctl.localmesh import nodes


def test_nodes_get_fixed_addresses_in_order():
    planned = nodes.plan_nodes(("head", "gpu1", "cpu1"), "100.100.20.0/24")
    assert [(n.name, n.address) for n in planned] == [
        ("head", "100.100.20.10"),
        ("gpu1", "100.100.20.11"),
        ("cpu1", "100.100.20.12"),
    ]


def test_subnet_must_look_like_a_tailnet():
    with pytest.raises(EnvironmentProblem, match=r"100\.64\.0\.0/10"):
        nodes.plan_nodes(("head",), "10.0.0.0/24")


def test_containers_run_systemd_without_privileged():
    args = nodes.run_args(nodes.Node("head", "100.100.20.10"), "meshctl-node:bookworm")
    assert "--privileged" not in args
    assert "--cgroupns=host" in args
    assert args[args.index("--cap-add") + 1] == "SYS_ADMIN"
    assert args[-1] == "meshctl-node:bookworm"


def test_bed_nodes_resolve_names_as_fresh_cloud_vms_and_share_the_heads_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(nodes, "VM_FILES", tmp_path)
    args = nodes.run_args(nodes.Node("gpu1", "100.100.20.11"), "meshctl-node:bookworm", "meshctl-demo")
    mounts = [args[i + 1] for i, arg in enumerate(args) if arg == "-v"]
    assert "meshctl-demo-share:/mnt/shared-slurm" in mounts
    assert f"{tmp_path}/gpu1/hosts:/etc/hosts" in mounts
    hosts = (tmp_path / "gpu1" / "hosts").read_text()
    assert "127.0.1.1\tgpu1\n" in hosts and "100.100" not in hosts


def test_the_nodes_resolver_is_this_machines_never_dockers_nor_a_loopback_one():
    assert nodes.cloud_resolv("# x\nnameserver 10.255.255.53\nnameserver 127.0.0.53\nsearch lan\n") == (
        "nameserver 10.255.255.53\n"
    )
    assert nodes.cloud_resolv("nameserver 127.0.0.53\n") is None
