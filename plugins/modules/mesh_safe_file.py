#!/usr/bin/python
# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Write one file into a folder another user may write, never following what they put there."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mesh_safe_file
short_description: One file in a folder others may write, no link followed
version_added: "0.12.0"
description:
  - Makes O(path) a plain file with O(content), owned O(owner):O(group) with O(mode), where its
    folder may be written by users other than root (the share, a user's folder).
  - The folder is opened without following a link. What lies at the file's name is read without
    following a link or waiting on a pipe; a new file is created beside it from the open folder and
    renamed over the name, so a link, a pipe or a hard link put there is replaced, never followed,
    written into or given away. A folder at the name is an error naming the fix.
  - In check mode it changes nothing and says whether it would.
options:
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
author:
  - meshctl contributors (@meshctl)
"""

EXAMPLES = r"""
- name: Mark the share as the head's
  meshctl.mesh.mesh_safe_file:
    path: /mnt/shared-slurm/.meshctl-share
    content: "{{ mesh_share_id }}\n"
"""

RETURN = r"""
path:
  description: The file's path.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_safe_write import SafeWriteError, ensure_file


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "content": {"type": "str", "required": True},
            "owner": {"type": "int", "default": 0},
            "group": {"type": "int", "default": 0},
            "mode": {"type": "str", "default": "0644"},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        mode = int(params["mode"], 8)
    except ValueError:
        module.fail_json(msg=f"mode {params['mode']!r} is not an octal mode such as 0644")
    try:
        changed = ensure_file(
            params["path"], params["content"].encode(), params["owner"], params["group"], mode, module.check_mode
        )
    except SafeWriteError as err:
        module.fail_json(msg=str(err), path=params["path"])
    module.exit_json(changed=changed, path=params["path"])


if __name__ == "__main__":
    main()
