#!/usr/bin/python
# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""One daemon of the mesh under supervisor, on a machine without systemd (a pod)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mesh_supervisor_program
short_description: A daemon run by supervisor, restarted only when its program changed
version_added: "0.13.0"
description:
  - For the roles that run daemons (tailscale, munge, slurm_node) on a pod, where supervisor runs them.
  - With O(state=present), writes the program file O(program_dir)/O(name).conf (never through a link),
    then C(supervisorctl update NAME), which starts a new program and restarts one whose file changed
    and nothing else; a program that is then neither running nor starting is started.
  - With O(state=absent), removes the program file and runs C(supervisorctl update), which stops it.
  - The program restarts without limit (it keeps trying while the head is away), and stops alone
    (slurmd's job steps outlive a restart of slurmd).
  - In check mode it changes nothing and says whether it would.
options:
  name:
    description: The program's name (letters, digits, V(_), V(.), V(-)).
    type: str
    required: true
  command:
    description: Its command line, one line. Required with O(state=present).
    type: str
  comment:
    description: What it is, written above it in the file.
    type: str
    default: A daemon of the mesh
  log_dir:
    description: The folder of its log, O(name).log. Required with O(state=present).
    type: path
  program_dir:
    description: Supervisor's folder of program files.
    type: path
    default: /etc/supervisor/conf.d
  state:
    description: Whether the program runs (V(present)) or is gone for good (V(absent)).
    type: str
    choices: [present, absent]
    default: present
author:
  - meshctl contributors (@meshctl)
"""

EXAMPLES = r"""
- name: Run slurmd under supervisor
  meshctl.mesh.mesh_supervisor_program:
    name: slurmd
    comment: Slurm's node daemon
    command: /usr/sbin/slurmd -D -s
    log_dir: /var/log/meshctl

- name: Stop munged for good (remove-node)
  meshctl.mesh.mesh_supervisor_program:
    name: munge
    state: absent
"""

RETURN = r"""
file_changed:
  description: Whether the program file was (or would be) written or removed.
  returned: always
  type: bool
started:
  description: Whether the program was (or would be) started because it was not running.
  returned: always
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_safe_write import (
    SafeWriteError,
    ensure_file,
    remove_file,
)
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_supervisor import (
    UP,
    ProgramError,
    program_conf,
    state,
)


def supervisorctl(module: AnsibleModule, *args: str, check: bool = True) -> str:
    rc, out, err = module.run_command(["supervisorctl", *args])
    if check and rc != 0:
        module.fail_json(msg=f"supervisorctl {' '.join(args)} failed ({rc}): {(err or out).strip()}")
    return out


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "command": {"type": "str"},
            "comment": {"type": "str", "default": "A daemon of the mesh"},
            "log_dir": {"type": "path"},
            "program_dir": {"type": "path", "default": "/etc/supervisor/conf.d"},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        },
        required_if=[("state", "present", ("command", "log_dir"))],
        supports_check_mode=True,
    )
    p = module.params
    path = os.path.join(p["program_dir"], f"{p['name']}.conf")
    try:
        if p["state"] == "absent":
            removed = remove_file(path, module.check_mode)
            if removed and not module.check_mode:
                supervisorctl(module, "update")
            module.exit_json(changed=removed, file_changed=removed, started=False)
        content = program_conf(p["name"], p["command"], p["comment"], p["log_dir"])
        written = ensure_file(path, content.encode(), 0, 0, 0o644, module.check_mode)
    except (ProgramError, SafeWriteError) as err:
        module.fail_json(msg=str(err))
    if written and not module.check_mode:
        supervisorctl(module, "update", p["name"])
    # `status` exits non-zero for a program that is not running: its output says the state.
    now = state(supervisorctl(module, "status", p["name"], check=False), p["name"])
    start = now not in UP
    if start and not module.check_mode:
        supervisorctl(module, "start", p["name"])
    module.exit_json(changed=written or start, file_changed=written, started=start)


if __name__ == "__main__":
    main()
