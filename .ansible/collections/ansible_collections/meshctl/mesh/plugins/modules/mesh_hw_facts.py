#!/usr/bin/python
# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: hardware facts a Slurm node line is made from."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mesh_hw_facts
short_description: Gather CPU, memory, GPU, Slurm and container facts for a mesh node
description:
  - Runs C(lscpu), C(free -m), C(slurmd -C) and C(slurmd -V) (when slurmd is installed) and
    C(nvidia-smi) (when present), lists C(/dev/nvidia*), and reports one fact, C(mesh_hw).
  - Slurm's own view (C(slurmd -C)) wins over C(lscpu) for the CPU topology.
  - A failing C(nvidia-smi) (no driver) is reported as C(gpu_status=failed) with its message,
    not as a module failure.
  - Read-only; runs the same in check mode.
version_added: "0.1.0"
options:
  reserve_mb:
    description:
      - Memory (MiB) kept back from Slurm for the OS and daemons.
      - When unset, the larger of 5% of the total and 1024 MiB (never more than half).
    type: int
  nvidia_smi:
    description: Name or path of the nvidia-smi program.
    type: str
    default: nvidia-smi
author:
  - meshctl contributors (@meshctl)
"""

EXAMPLES = r"""
- name: Gather hardware facts
  mesh_hw_facts:
    reserve_mb: 2048

- name: Show the GPUs found
  ansible.builtin.debug:
    msg: "{{ mesh_hw.gpus | map(attribute='type') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to the host.
  returned: always
  type: dict
  contains:
    mesh_hw:
      description: Hardware facts of the node.
      type: dict
      returned: always
      contains:
        cpus: {description: Logical CPUs, type: int}
        sockets: {description: Sockets (NUMA nodes when Slurm counts them as sockets), type: int}
        cores_per_socket: {description: Cores per socket, type: int}
        threads_per_core: {description: Hardware threads per core, type: int}
        topology_source: {description: "C(slurmd -C) or C(lscpu)", type: str}
        memory_total_mb: {description: Total memory in MiB, type: int}
        real_memory_mb: {description: RealMemory for slurm.conf (total less the reserve), type: int}
        gpus:
          description: GPUs with index, model, type (GRES type name), uuid, memory_mb, file.
          type: list
          elements: dict
        gpu_status: {description: "C(ok), C(none), C(absent) (no nvidia-smi) or C(failed)", type: str}
        gpu_error: {description: The first line nvidia-smi printed when it failed, type: str}
        slurm_version: {description: Installed slurmd version or null, type: str}
        slurm_major: {description: "Major release, e.g. C(22.05)", type: str}
        in_container: {description: Whether the node is a container (no cgroup control there), type: bool}
        cgroup_version: {description: "1, 2 or null when unknown", type: int}
"""

import glob
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_hw import (
    GPU_QUERY_FIELDS,
    HwParseError,
    node_facts,
    parse_slurm_version,
)


def _run(module, args):
    """(rc, stdout, stderr) with a C locale; rc 127 when the program is missing."""
    path = module.get_bin_path(args[0])
    if path is None:
        return 127, "", ""
    return module.run_command([path, *args[1:]], environ_update={"LC_ALL": "C", "LANG": "C"})


def in_container():
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return True
    try:
        with open("/proc/1/environ", "rb") as handle:
            if b"container=" in handle.read():
                return True
    except OSError:
        pass
    return False


def cgroup_version():
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return 2
    if os.path.isdir("/sys/fs/cgroup/memory") or os.path.isdir("/sys/fs/cgroup/cpu,cpuacct"):
        return 1
    return None


def gpu_output(module):
    rc, out, err = _run(module, [module.params["nvidia_smi"], "--query-gpu=" + ",".join(GPU_QUERY_FIELDS),
                                 "--format=csv,noheader,nounits"])  # fmt: skip
    if rc == 127:
        return None
    if rc == 0:
        return out
    rc_l, out_l, err_l = _run(module, [module.params["nvidia_smi"], "-L"])
    if rc_l == 0:
        return out_l
    return out_l or err_l or out or err  # parse_nvidia_smi turns a driver failure into a fact


def main():
    module = AnsibleModule(
        argument_spec={"reserve_mb": {"type": "int"}, "nvidia_smi": {"type": "str", "default": "nvidia-smi"}},
        supports_check_mode=True,
    )
    rc, lscpu, err = _run(module, ["lscpu"])
    if rc != 0:
        module.fail_json(msg=f"lscpu failed (rc={rc}): {err.strip()}; install util-linux")
    rc, free, err = _run(module, ["free", "-m"])
    if rc != 0:
        module.fail_json(msg=f"free -m failed (rc={rc}): {err.strip()}; install procps")
    slurmd_c = None
    version = {"version": None, "major": None}
    rc, out, _err = _run(module, ["slurmd", "-V"])
    if rc == 0:
        version = parse_slurm_version(out)
        rc, out, _err = _run(module, ["slurmd", "-C"])
        slurmd_c = out if rc == 0 else None
    smi = gpu_output(module)
    devices = sorted(glob.glob("/dev/nvidia[0-9]*"))
    try:
        facts = node_facts(lscpu=lscpu, free=free, slurmd_c=slurmd_c, nvidia_smi=smi, device_files=devices,
                           reserve_mb=module.params["reserve_mb"])  # fmt: skip
    except HwParseError as exc:
        module.fail_json(msg=f"could not read this node's hardware: {exc}")
    facts.update(
        slurm_version=version["version"],
        slurm_major=version["major"],
        in_container=in_container(),
        cgroup_version=cgroup_version(),
    )
    module.exit_json(changed=False, ansible_facts={"mesh_hw": facts})


if __name__ == "__main__":
    main()
