"""Parsers of plugins/module_utils/mesh_hw.py on every real output in tests/fixtures."""

import pytest

from tests.conftest import fixture_text, fixtures_in

LSCPU = {
    # fixture: (cpus, sockets, cores_per_socket, threads_per_core, adjusted)
    "arm64-azure-ampere-altra-neoverse-n1-64c-vm.txt": (64, 1, 64, 1, False),
    "arm64-grace-gh200-neoverse-v2-9numa.txt": (72, 1, 72, 1, False),
    "desktop-amd-ryzen9-5950x-smt.txt": (32, 1, 16, 2, False),
    "desktop-intel-i9-12900kf-hybrid-hierarchical-wrapped.txt": (24, 1, 12, 2, True),
    "gcp-n1-standard-4-kvm-vm-util-linux-2.34.txt": (4, 1, 2, 2, False),
    "gcp-tpu-vm-amd-epyc-9b14-kvm-smt.txt": (44, 1, 22, 2, False),
    "intel-xeon-e5-2670v2-2socket-ht.txt": (40, 2, 10, 2, False),
    "intel-xeon-gold-6126-2socket-smt-off.txt": (24, 2, 12, 1, False),
    "intel-xeon-gold-6330-2socket-ht-4numa-snc-rhel8.txt": (112, 2, 28, 2, False),
    "intel-xeon-silver-4314-2socket-ht.txt": (64, 2, 16, 2, False),
}


@pytest.mark.parametrize("name", sorted(LSCPU))
def test_lscpu(hw, name):
    got = hw.parse_lscpu(fixture_text(f"lscpu/{name}"))
    cpus, sockets, cores, threads, adjusted = LSCPU[name]
    assert (got["cpus"], got["sockets"], got["cores_per_socket"], got["threads_per_core"]) == (
        cpus,
        sockets,
        cores,
        threads,
    )
    assert got["topology_adjusted"] is adjusted
    assert got["sockets"] * got["cores_per_socket"] * got["threads_per_core"] == got["cpus"]


def test_lscpu_arm_clusters_without_sockets(hw):
    # Synthetic, not a real capture: the shape util-linux prints on ARM SoCs that have no
    # socket information (`Socket(s): -` with `Cluster(s)` and `Core(s) per cluster`).
    text = (
        "Architecture: aarch64\nCPU(s): 8\nThread(s) per core: 1\nCore(s) per cluster: 4\nSocket(s): -\nCluster(s): 2\n"
    )
    got = hw.parse_lscpu(text)
    assert (got["cpus"], got["sockets"], got["cores_per_socket"], got["threads_per_core"]) == (8, 2, 4, 1)


def test_lscpu_garbage_is_a_clear_error(hw):
    with pytest.raises(hw.HwParseError, match="CPU"):
        hw.parse_lscpu("total used free\n")


FREE = {
    "centos7-procps-ng-3.3-small-vm.txt": 1839,
    "old-procps-buffers-cache-line-32gb.txt": 32205,
    "procps4-32gb-proxmox.txt": 31966,
    "procps4-64gb-workstation-no-swap.txt": 64172,
    "workstation-32gb-i9-12900kf-rtx4090.txt": 31946,
}


@pytest.mark.parametrize("name", sorted(FREE))
def test_free(hw, name):
    assert hw.parse_free(fixture_text(f"free/{name}"))["memory_total_mb"] == FREE[name]


def test_free_with_trailing_spaces(hw):
    text = fixture_text("free/procps4-32gb-proxmox.txt").replace("\n", "   \n")
    assert hw.parse_free(text)["memory_total_mb"] == 31966


def test_real_memory_reserve(hw):
    assert hw.real_memory(64172) == 64172 - 3208  # 5 %
    assert hw.real_memory(1839) == 1839 - 919  # never more than half
    assert hw.real_memory(16000) == 16000 - 1024  # at least 1 GiB
    assert hw.real_memory(16000, reserve_mb=2000) == 14000


SLURMD_C = {
    "1socket-12c-ht-docker-slurm19.05.txt": (24, 1, 12, 2, 56153, "slurmnode6"),
    "2socket-24c-ht-2x-l40s-gres-slurm25.05.txt": (96, 2, 24, 2, 515711, "server3"),
    "2socket-8c-ht-centos7-slurm19.05.7.txt": (32, 2, 8, 2, 128693, "E1-051569"),
    "2socket-snc-numa-as-socket-nosmt-abridged.txt": (40, 4, 10, 1, 385380, None),
    "vm-8sockets-1core-nosmt-slurm25.05.txt": (8, 8, 1, 1, 15988, "server4"),
}


@pytest.mark.parametrize("name", sorted(SLURMD_C))
def test_slurmd_c(hw, name):
    got = hw.parse_slurmd_c(fixture_text(f"slurmd-C/{name}"))
    cpus, sockets, cores, threads, memory, node = SLURMD_C[name]
    assert (got["cpus"], got["sockets"], got["cores_per_socket"], got["threads_per_core"]) == (
        cpus,
        sockets,
        cores,
        threads,
    )
    assert got["memory_total_mb"] == memory
    assert got.get("node_name") == node


def test_slurmd_c_wins_over_lscpu(hw):
    facts = hw.node_facts(
        lscpu=fixture_text("lscpu/intel-xeon-gold-6126-2socket-smt-off.txt"),
        free=fixture_text("free/procps4-32gb-proxmox.txt"),
        slurmd_c=fixture_text("slurmd-C/2socket-snc-numa-as-socket-nosmt-abridged.txt"),
    )
    assert (facts["sockets"], facts["cores_per_socket"], facts["topology_source"]) == (4, 10, "slurmd -C")
    assert facts["memory_total_mb"] == 31966  # free -m given: it is the memory source


def test_slurm_version(hw):
    assert hw.parse_slurm_version("slurm 22.05.8\n") == {"version": "22.05.8", "major": "22.05"}
    assert hw.parse_slurm_version("slurm-wlm 24.11.5") == {"version": "24.11.5", "major": "24.11"}
    with pytest.raises(hw.HwParseError):
        hw.parse_slurm_version("slurmd: command not found")


NVIDIA_L = {
    # fixture: (gpu count, first model, first type, MIG slices on GPU 0)
    "1x-gh200-480gb-mig-mixed-profiles.txt": (1, "NVIDIA GH200 480GB", "gh200_480gb", 3),
    "1x-rtx-4090-workstation.txt": (1, "NVIDIA GeForce RTX 4090", "geforce_rtx_4090", 0),
    "1x-rtx-a6000-epyc-node.txt": (1, "NVIDIA RTX A6000", "rtx_a6000", 0),
    "2x-quadro-rtx-4000-no-nvidia-prefix.txt": (2, "Quadro RTX 4000", "quadro_rtx_4000", 0),
    "4x-rtx-3090.txt": (4, "NVIDIA GeForce RTX 3090", "geforce_rtx_3090", 0),
    "8x-a100-sxm4-80gb-gpu0-mig-4g.40gb.txt": (8, "NVIDIA A100-SXM4-80GB", "a100_sxm4_80gb", 1),
    "8x-a100-sxm4-80gb-plain.txt": (8, "NVIDIA A100-SXM4-80GB", "a100_sxm4_80gb", 0),
    "8x-rtx-pro-6000-blackwell-all-mig-4x1g.24gb.txt": (
        8,
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "rtx_pro_6000_blackwell_server_edition",
        4,
    ),
}


@pytest.mark.parametrize("name", sorted(NVIDIA_L))
def test_nvidia_smi_list(hw, name):
    got = hw.parse_nvidia_smi(fixture_text(f"nvidia-smi-L/{name}"))
    count, model, gtype, mig = NVIDIA_L[name]
    assert got["status"] == "ok"
    assert len(got["gpus"]) == count
    assert [g["index"] for g in got["gpus"]] == list(range(count))
    assert (got["gpus"][0]["model"], got["gpus"][0]["type"], got["gpus"][0]["mig_devices"]) == (model, gtype, mig)
    assert all(g["uuid"].startswith("GPU-") for g in got["gpus"])


NVIDIA_QUERY = {
    # fixture: [(index, type, memory_mb)] or the columns to read a header-less file with
    "1x-gtx1660super-windows-mig-na.txt": [(0, "geforce_gtx_1660_super", 6144)],
    "1x-rtx-pro-6000-index-name-migmode-i0.txt": [(0, "rtx_pro_6000_blackwell_server_edition", None)],
    "2x-mixed-rtx-a5000-rtx4500ada-index-name-uuid-mem-driver-powerlimit.txt": [
        (0, "rtx_a5000", 24564),
        (1, "rtx_4500_ada_generation", 24570),
    ],
    "8x-a100-sxm4-80gb-name-memtotal-driver.txt": [(i, "a100_sxm4_80gb", 81920) for i in range(8)],
}


@pytest.mark.parametrize("name", sorted(NVIDIA_QUERY))
def test_nvidia_smi_query_with_header(hw, name):
    got = hw.parse_nvidia_smi(fixture_text(f"nvidia-smi-query/{name}"))
    assert [(g["index"], g["type"], g["memory_mb"]) for g in got["gpus"]] == NVIDIA_QUERY[name]


def test_nvidia_smi_query_without_header_uses_named_columns(hw):
    text = fixture_text("nvidia-smi-query/1x-h100-nvl-name-pcidevid-noheader.txt")
    gpus = hw.parse_nvidia_smi_query(text, fields=("name", "pci.device_id"))
    assert [(g["index"], g["model"], g["type"]) for g in gpus] == [(0, "NVIDIA H100 NVL", "h100_nvl")]


def test_nvidia_smi_query_without_header_and_wrong_columns_fails_cleanly(hw):
    text = fixture_text("nvidia-smi-query/1x-h100-nvl-name-pcidevid-noheader.txt")
    with pytest.raises(hw.HwParseError, match="columns"):
        hw.parse_nvidia_smi_query(text)  # our default query has 4 columns, this file 2


def test_nvidia_smi_query_mig_mode_only_has_no_name(hw):
    with pytest.raises(hw.HwParseError, match="name"):
        hw.parse_nvidia_smi(fixture_text("nvidia-smi-query/8x-rtx-pro-6000-index-migmode.txt"))


def test_nvidia_smi_driver_failure_is_a_fact(hw):
    text = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n"
    )
    got = hw.parse_nvidia_smi(text)
    assert got["status"] == "failed"
    assert got["gpus"] == []
    assert "NVIDIA-SMI has failed" in got["error"]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("NVIDIA RTX A6000", "rtx_a6000"),
        ("NVIDIA H100 80GB HBM3", "h100_80gb_hbm3"),
        ("NVIDIA A100-SXM4-80GB", "a100_sxm4_80gb"),
        ("Quadro RTX 4000", "quadro_rtx_4000"),
        ("NVIDIA GeForce RTX 4090", "geforce_rtx_4090"),
    ],
)
def test_gres_type_names(hw, model, expected):
    assert hw.gres_type(model) == expected


DEV = {
    "10gpu-zh-cn-locale-dates-ls-dev-nv-star.txt": 10,
    "1gpu-a100-with-nvswitchctl-fabricmanager-ls-dev-nv-star.txt": 1,
    "1gpu-proxmox-host-ls-al-en-locale-sort.txt": 1,
    "1gpu-proxmox-host-mercury-ls-dev-nv-star-includes-nvram.txt": 1,
    "1gpu-tesla-t4-k8s-dra-pod-ls-la.txt": 1,
    "1gpu-workstation-fr-course.txt": 1,
    "1of8-h100-k8s-dra-pod-only-nvidia7.txt": 1,
    "8gpu-c-locale-sort-with-nvidia-caps.txt": 8,
    "8gpu-proxmox-host-iso-time-style-truncated.txt": 8,
}


@pytest.mark.parametrize("name", sorted(DEV))
def test_dev_listing(hw, name):
    files = hw.parse_dev_listing(fixture_text(f"dev-nvidia/{name}"))
    assert len(files) == DEV[name]
    assert all(f.startswith("/dev/nvidia") and f[len("/dev/nvidia") :].isdigit() for f in files)


def test_pod_with_one_gpu_of_eight_maps_index_0_to_nvidia7(hw):
    gpus = hw.parse_nvidia_smi("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n")["gpus"]
    files = hw.parse_dev_listing(fixture_text("dev-nvidia/1of8-h100-k8s-dra-pod-only-nvidia7.txt"))
    assert [g["file"] for g in hw.match_device_files(gpus, files)] == ["/dev/nvidia7"]


def test_gpus_without_device_files_get_none(hw):
    gpus = hw.parse_nvidia_smi(fixture_text("nvidia-smi-L/4x-rtx-3090.txt"))["gpus"]
    assert [g["file"] for g in hw.match_device_files(gpus, ["/dev/nvidia0"])] == [None] * 4


@pytest.mark.parametrize(
    ("folder", "expected"),
    [("lscpu", LSCPU), ("free", FREE), ("slurmd-C", SLURMD_C), ("nvidia-smi-L", NVIDIA_L), ("dev-nvidia", DEV)],
)
def test_every_fixture_has_an_expectation(folder, expected):
    assert sorted(f"{folder}/{name}" for name in expected) == fixtures_in(folder)


def test_every_query_fixture_has_an_expectation():
    # The header-less and the name-less captures have tests of their own above.
    others = {"1x-h100-nvl-name-pcidevid-noheader.txt", "8x-rtx-pro-6000-index-migmode.txt"}
    covered = sorted(f"nvidia-smi-query/{name}" for name in set(NVIDIA_QUERY) | others)
    assert covered == fixtures_in("nvidia-smi-query")
