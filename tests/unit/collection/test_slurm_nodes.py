"""How the mesh describes one node to Slurm (plugins/module_utils/mesh_slurm_nodes.py): the one place
slurm_controller's nodes.conf and gres.conf, slurm_node's slurmd command line and `meshctl
render-node` take a node's NodeName= parameters and gres.conf lines from."""

from meshctl import resources

NODES = resources.plugin("module_utils.mesh_slurm_nodes")
HW = {"cpus": 16, "sockets": 1, "cores_per_socket": 8, "threads_per_core": 2, "real_memory_mb": 60000}


def test_params_count_each_gpu_type_in_sorted_order_and_list_features_in_order():
    gpus = [{"type": "rtx_a5000", "file": "/dev/nvidia0"}, {"type": "a100", "file": "/dev/nvidia1"},
            {"type": "rtx_a5000", "file": "/dev/nvidia2"}]  # fmt: skip
    node = {"name": "g", "provider": "lambda", "hw": {**HW, "gpus": gpus}, "features": ["meshctl", "gpu"]}
    assert NODES.slurm_node_params(node) == (
        "CPUs=16 Sockets=1 CoresPerSocket=8 ThreadsPerCore=2 RealMemory=60000"
        " Gres=gpu:a100:1,gpu:rtx_a5000:2 Feature=meshctl,gpu,rtx_a5000,a100,lambda"
    )


def test_a_gpu_without_its_device_file_is_not_given_to_slurm():
    node = {"name": "g", "hw": {**HW, "gpus": [{"type": "a100", "file": ""}, {"type": "t4", "file": "/dev/nvidia1"}]}}
    assert NODES.slurm_node_params(node).endswith("RealMemory=60000 Gres=gpu:t4:1 Feature=t4")
    assert NODES.slurm_gres_lines(node) == ["NodeName=g Name=gpu Type=t4 File=/dev/nvidia1"]


def test_a_node_without_gpus_features_or_provider_has_only_its_cpus_and_memory():
    node = {"name": "c", "hw": {**HW, "gpus": []}}
    assert NODES.slurm_node_params(node) == "CPUs=16 Sockets=1 CoresPerSocket=8 ThreadsPerCore=2 RealMemory=60000"
    assert NODES.slurm_gres_lines(node) == []
    assert NODES.slurm_node_line({**node, "addr": "100.64.0.9"}) == (
        "NodeName=c NodeAddr=100.64.0.9 CPUs=16 Sockets=1 CoresPerSocket=8 ThreadsPerCore=2 RealMemory=60000"
        " State=UNKNOWN"
    )
    assert NODES.slurm_node_line(node).startswith("NodeName=c CPUs=16 ")  # no address: none named


def test_the_filters_are_the_collections_thin_adapters_of_the_core():
    filters = resources.plugin("filter.slurm_nodes").FilterModule().filters()
    assert {"slurm_node_params", "slurm_node_line", "slurm_gres_lines"} <= set(filters)
    assert filters["slurm_node_line"] is NODES.slurm_node_line


def test_every_filter_plugin_is_a_thin_adapter_of_the_shared_core():
    """The logic the roles and meshctl share lives in plugins/module_utils/ (meshctl imports it
    through meshctl/core.py); a filter plugin only adapts it for Jinja: each function it defines is
    one statement (a docstring aside), and it imports nothing of the collection but module_utils."""
    import ast
    from pathlib import Path

    folder = Path(resources.data_dir()) / "plugins" / "filter"
    thick = []
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name != "filters":
                body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                if len(body) > 1:
                    thick.append(f"{path.name}: {node.name} ({len(body)} statements)")
            module = getattr(node, "module", None) or "" if isinstance(node, ast.ImportFrom) else ""
            if module.startswith("ansible_collections") and ".plugins.module_utils" not in module:
                thick.append(f"{path.name}: imports {module}")
    assert thick == [], "logic belongs in plugins/module_utils/: " + "; ".join(thick)
