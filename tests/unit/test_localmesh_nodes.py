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
