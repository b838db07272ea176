"""The demo's simulated GPU node, built from the project's own files only.

`molecule/resources/simulate-gpus` is what `make demo` and molecule's prepare step run on gpu1: it
installs the stand-in nvidia-smi, the real 2-GPU outputs it prints (kept with their provenance in
`molecule/resources/simulated-gpu/`) and the /dev/nvidia* character devices. Here it runs on a
fresh node container, and the outputs are read back through the same parsers the roles use.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SIMULATE = REPO / "molecule" / "resources" / "simulate-gpus"
NODE = "e2e-simgpu"


def sh(command: str) -> str:
    return subprocess.run(["docker", "exec", NODE, "sh", "-c", command], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


@pytest.fixture(scope="module")
def node():
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode:
        pytest.skip("no Docker engine (run `make engine images`)")
    subprocess.run(["docker", "rm", "-f", NODE], capture_output=True, check=False)
    subprocess.run(["docker", "run", "-d", "--name", NODE, "--cap-add", "MKNOD", "meshctl-node:bookworm",
                    "sleep", "infinity"], capture_output=True, check=True)  # fmt: skip
    yield NODE
    subprocess.run(["docker", "rm", "-f", NODE], capture_output=True, check=False)


def test_simulated_gpu_node_from_the_projects_own_files(node, hw):
    for _ in range(2):  # the demo runs it again on an existing node: it must stay the same
        subprocess.run([str(SIMULATE), node], capture_output=True, text=True, check=True)
    listed = hw.parse_nvidia_smi(sh("nvidia-smi -L"))
    queried = hw.parse_nvidia_smi(sh("nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv"))
    assert listed["status"] == queried["status"] == "ok"
    assert [g["type"] for g in listed["gpus"]] == ["quadro_rtx_4000", "quadro_rtx_4000"]
    assert [g["type"] for g in queried["gpus"]] == ["rtx_a5000", "rtx_4500_ada_generation"]
    files = hw.parse_dev_listing(sh("ls -l /dev/nvidia*"))
    assert sorted(files) == ["/dev/nvidia0", "/dev/nvidia1"]
    assert [g["file"] for g in hw.match_device_files(listed["gpus"], files)] == ["/dev/nvidia0", "/dev/nvidia1"]
    assert sh("stat -c '%F %t' /dev/nvidia0 /dev/nvidiactl").split("\n")[:2] == [
        "character special file c3",  # major 195 = 0xc3
        "character special file c3",
    ]
    # The stand-in prints the capture without its provenance lines, byte for byte.
    capture = (REPO / "molecule/resources/simulated-gpu/nvidia-smi-L.txt").read_text()
    assert sh("nvidia-smi -L") == "".join(line for line in capture.splitlines(True) if not line.startswith("# "))
    # Anything else it was not built for fails loudly instead of inventing an answer.
    other = subprocess.run(["docker", "exec", node, "nvidia-smi", "topo", "-m"], capture_output=True, text=True)
    assert other.returncode == 2 and "not simulated" in other.stderr
