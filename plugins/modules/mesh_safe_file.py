#!/usr/bin/python
# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Write files, never following what another user put at their names: one module run for many."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mesh_safe_file
short_description: Files written without following a link, one module run for many
version_added: "0.12.0"
description:
  - Makes O(path) a plain file with O(content), owned O(owner):O(group) with O(mode), where its
    folder may be written by users other than root (the share, a user's folder).
  - Or makes each of O(files) so, in one module run, a role's configuration files rendered on the
    control machine (the template lookup) and written together, instead of a template task per file
    (each two module runs on the node even when nothing changed). Give files that notify the same
    handlers in one task, so a handler still runs only when one of its files changed.
  - The folder is opened without following a link. What lies at the file's name is read without
    following a link or waiting on a pipe; a new file is created beside it from the open folder and
    renamed over the name, so a link, a pipe or a hard link put there is replaced, never followed,
    written into or given away. A folder at the name is an error naming the fix.
  - In check mode it changes nothing and says whether it would. With C(--diff) it shows each changed
    file's lines before and after (not with C(no_log)).
options:
  path:
    description: The file's absolute path (one file; or O(files)).
    type: path
  content:
    description: What the file holds (with O(path)).
    type: str
  files:
    description: Several files, each written as O(path) would be.
    type: list
    elements: dict
    suboptions:
      path:
        description: The file's absolute path.
        type: path
        required: true
      content:
        description: What the file holds.
        type: str
        required: true
      owner:
        description: The file's owner, a UID.
        type: int
        default: 0
      group:
        description: The file's group, a GID.
        type: int
        default: 0
      mode:
        description: The file's mode, as an octal string.
        type: str
        default: "0644"
      write:
        description: False leaves this file as it is (one the run's settings do not use).
        type: bool
        default: true
  owner:
    description: The file's owner, a UID.
    type: int
    default: 0
  group:
    description: The file's group, a GID.
    type: int
    default: 0
  mode:
    description: The file's mode, as an octal string.
    type: str
    default: "0644"
author:
  - meshctl contributors (@meshctl)
"""

EXAMPLES = r"""
- name: Write slurmd's start script and unit override (one module run)
  meshctl.mesh.mesh_safe_file:
    files:
      - path: /usr/local/sbin/meshctl-slurmd-start
        content: "{{ lookup('ansible.builtin.template', 'slurmd_start.sh.j2') }}"
        mode: "0755"
      - path: /etc/systemd/system/slurmd.service.d/meshctl.conf
        content: "{{ lookup('ansible.builtin.template', 'slurmd.service.conf.j2') }}"
  notify: Slurmd unit changed

- name: Mark the share as the head's
  meshctl.mesh.mesh_safe_file:
    path: /mnt/shared-slurm/.meshctl-share
    content: "{{ mesh_share_id }}\n"
"""

RETURN = r"""
path:
  description: The file's path.
  returned: with O(path)
  type: str
changed_paths:
  description: The files that changed (in check mode, that would).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_safe_write import (
    SafeWriteError,
    ensure_file,
    read_plain,
)

FILE_SPEC = {
    "path": {"type": "path", "required": True},
    "content": {"type": "str", "required": True},
    "owner": {"type": "int", "default": 0},
    "group": {"type": "int", "default": 0},
    "mode": {"type": "str", "default": "0644"},
    "write": {"type": "bool", "default": True},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path"},
            "content": {"type": "str"},
            "owner": {"type": "int", "default": 0},
            "group": {"type": "int", "default": 0},
            "mode": {"type": "str", "default": "0644"},
            "files": {"type": "list", "elements": "dict", "options": FILE_SPEC},
        },
        mutually_exclusive=[("path", "files"), ("content", "files")],
        required_one_of=[("path", "files")],
        required_together=[("path", "content")],
        supports_check_mode=True,
    )
    params = module.params
    single = params["files"] is None
    wanted = [dict(params, write=True)] if single else [f for f in params["files"] if f["write"]]
    changed_paths: list[str] = []
    diffs: list[dict] = []
    for spec in wanted:
        try:
            mode = int(spec["mode"], 8)
        except ValueError:
            module.fail_json(msg=f"{spec['path']}: mode {spec['mode']!r} is not an octal mode such as 0644")
        before = read_plain(spec["path"]) if module._diff else None
        try:
            changed = ensure_file(
                spec["path"], spec["content"].encode(), spec["owner"], spec["group"], mode, module.check_mode
            )
        except SafeWriteError as err:
            module.fail_json(msg=str(err), path=spec["path"], changed_paths=changed_paths)
        if changed:
            changed_paths.append(spec["path"])
            if module._diff:
                diffs.append({
                    "before_header": spec["path"], "after_header": spec["path"],
                    "before": before or "", "after": spec["content"],
                })  # fmt: skip
    result = {"changed": bool(changed_paths), "changed_paths": changed_paths}
    if single:
        result["path"] = params["path"]
    if diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
