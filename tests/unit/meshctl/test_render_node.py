"""meshctl render-node end to end through click, on real outputs."""

import json

from click.testing import CliRunner

from meshctl.cli import cli
from tests.conftest import FIXTURES

F = str(FIXTURES)


def run(*args, input=None):
    return CliRunner().invoke(cli, ["render-node", *args], input=input)


def test_gpu_node_line_and_gres_lines():
    result = run(
        "--lscpu", f"{F}/lscpu/desktop-amd-ryzen9-5950x-smt.txt",
        "--free", f"{F}/free/procps4-64gb-workstation-no-swap.txt",
        "--nvidia-smi", f"{F}/nvidia-smi-L/2x-quadro-rtx-4000-no-nvidia-prefix.txt",
        "--name", "desk", "--addr", "100.101.1.10", "--provider", "local",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1] == (
        "NodeName=desk NodeAddr=100.101.1.10 CPUs=32 Sockets=1 CoresPerSocket=16 ThreadsPerCore=2 "
        "RealMemory=60964 Gres=gpu:quadro_rtx_4000:2 Feature=quadro_rtx_4000,local State=UNKNOWN"
    )
    assert lines[3:] == [
        "NodeName=desk Name=gpu Type=quadro_rtx_4000 File=/dev/nvidia0",
        "NodeName=desk Name=gpu Type=quadro_rtx_4000 File=/dev/nvidia1",
    ]


def test_json_has_the_documented_keys():
    result = run(
        "--lscpu", f"{F}/lscpu/intel-xeon-silver-4314-2socket-ht.txt",
        "--free", f"{F}/free/procps4-32gb-proxmox.txt",
        "--nvidia-smi", f"{F}/nvidia-smi-query/2x-mixed-rtx-a5000-rtx4500ada-index-name-uuid-mem-driver-powerlimit.txt",
        "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["sockets"], out["cores_per_socket"], out["threads_per_core"], out["cpus"]) == (2, 16, 2, 64)
    assert out["real_memory_mb"] == 31966 - 1598
    assert [(g["index"], g["type"], g["file"]) for g in out["gpus"]] == [
        (0, "rtx_a5000", "/dev/nvidia0"),
        (1, "rtx_4500_ada_generation", "/dev/nvidia1"),
    ]
    assert "Gres=gpu:rtx_4500_ada_generation:1,gpu:rtx_a5000:1" in out["node_line"]
    assert len(out["gres_lines"]) == 2


def test_slurmd_c_from_stdin_names_the_node():
    text = (FIXTURES / "slurmd-C/vm-8sockets-1core-nosmt-slurm25.05.txt").read_text()
    result = run("--slurmd-c", "-", "--free", f"{F}/free/procps4-32gb-proxmox.txt", "--lscpu",
                 f"{F}/lscpu/gcp-n1-standard-4-kvm-vm-util-linux-2.34.txt", input=text)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].startswith(
        "NodeName=server4 CPUs=8 Sockets=8 CoresPerSocket=1 ThreadsPerCore=1"
    )
    assert "Gres=" not in result.output


def test_pod_device_file_is_used():
    result = run(
        "--lscpu", f"{F}/lscpu/gcp-n1-standard-4-kvm-vm-util-linux-2.34.txt",
        "--free", f"{F}/free/procps4-32gb-proxmox.txt",
        "--nvidia-smi", f"{F}/nvidia-smi-L/1x-rtx-a6000-epyc-node.txt",
        "--dev-nvidia", f"{F}/dev-nvidia/1of8-h100-k8s-dra-pod-only-nvidia7.txt",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "NodeName=node Name=gpu Type=rtx_a6000 File=/dev/nvidia7" in result.output


def test_bad_name_exits_2_with_a_fix():
    result = run("--lscpu", f"{F}/lscpu/gcp-n1-standard-4-kvm-vm-util-linux-2.34.txt",
                 "--free", f"{F}/free/procps4-32gb-proxmox.txt", "--name", "GPU_1")  # fmt: skip
    assert result.exit_code == 2
    assert "lowercase letters" in result.output


def test_swapped_files_are_a_parse_error():
    result = run("--lscpu", f"{F}/free/procps4-32gb-proxmox.txt", "--free", f"{F}/free/procps4-32gb-proxmox.txt")
    assert result.exit_code == 2
    assert "lscpu" in result.output


def test_bad_address_is_refused():
    result = run("--lscpu", f"{F}/lscpu/gcp-n1-standard-4-kvm-vm-util-linux-2.34.txt",
                 "--free", f"{F}/free/procps4-32gb-proxmox.txt", "--addr", "100.300.1.1")  # fmt: skip
    assert result.exit_code == 2


def test_the_installed_entry_point_exits_with_the_error_code():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "meshctl", "render-node", "--lscpu", "/dev/null", "--free", "/dev/null"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("error: lscpu:") and "fix:" in done.stderr
    assert "Traceback" not in done.stderr
