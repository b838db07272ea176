#!/usr/bin/python
# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Folders root makes where other users may write, in one call, never following what they put there."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mesh_safe_folders
short_description: Folders owned and moded as asked, no link followed, in one call
version_added: "0.13.0"
description:
  - Makes each of O(folders) a folder of its own with its owner, group and mode, in the order given
    (a parent first), where a folder on the way or at the name may be written by a user other than
    root (the slurm user's /var/lib/slurm, the share, a job user's folder).
  - Each path is walked from / one name at a time, each folder opened without following a link; a
    link on the way is followed only when only root could have laid it (root's, in a folder of
    root's no one else may write). A link at the folder's own name is removed, never followed; a
    file there is moved aside (C(.NAME.meshctl-moved-TIME)). A folder there owned by a user other
    than the one asked or root is taken over in place (O(folders[].foreign=keep), a package's folder)
    or moved aside (V(move), a folder another user made where someone else's goes).
  - Owner and mode are set on the open folder (fchown, fchmod), never by a path.
  - O(absent) names files to remove the same way (a link goes itself, never what it names).
  - In check mode it changes nothing and says what it would do.
options:
  folders:
    description: The folders, parents first.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The folder's absolute path.
        type: path
        required: true
      owner:
        description: Its owner, a user name or UID.
        type: str
        default: root
      group:
        description: Its group, a group name or GID; the owner's primary group when left out.
        type: str
      mode:
        description: Its mode, as an octal string.
        type: str
        default: "0755"
      foreign:
        description: What to do with a folder at the name owned by someone other than O(folders[].owner) or root.
        type: str
        choices: [keep, move]
        default: keep
  absent:
    description: Files to remove (not folders), no link followed.
    type: list
    elements: path
    default: []
author:
  - meshctl contributors (@meshctl)
"""

EXAMPLES = r"""
- name: Lay out Slurm's folders
  meshctl.mesh.mesh_safe_folders:
    folders:
      - { path: /var/lib/slurm, owner: root }
      - { path: /var/lib/slurm/slurmctld, owner: slurm }
    absent: [/etc/default/slurmd]

- name: Give each job user a folder on the share
  meshctl.mesh.mesh_safe_folders:
    folders:
      - { path: /mnt/shared-slurm/users, owner: root, foreign: move }
      - { path: /mnt/shared-slurm/users/alice, owner: alice, group: meshjobs, mode: "0700", foreign: move }
"""

RETURN = r"""
done:
  description: What was done (or would be, in check mode), a line per change.
  returned: always
  type: list
  elements: str
"""

import grp
import pwd

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_safe_write import (
    SafeWriteError,
    ensure_folder,
    remove_file,
)


def ids(owner: str, group: str | None) -> tuple[int, int]:
    """(uid, gid) of OWNER and GROUP (names or numbers); GROUP none: the owner's primary group."""
    entry = pwd.getpwuid(int(owner)) if owner.isdigit() else pwd.getpwnam(owner)
    if group is None:
        return entry.pw_uid, entry.pw_gid
    return entry.pw_uid, (int(group) if group.isdigit() else grp.getgrnam(group).gr_gid)


def main() -> None:
    folder_spec = {
        "path": {"type": "path", "required": True},
        "owner": {"type": "str", "default": "root"},
        "group": {"type": "str"},
        "mode": {"type": "str", "default": "0755"},
        "foreign": {"type": "str", "choices": ["keep", "move"], "default": "keep"},
    }
    module = AnsibleModule(
        argument_spec={
            "folders": {"type": "list", "elements": "dict", "options": folder_spec, "default": []},
            "absent": {"type": "list", "elements": "path", "default": []},
        },
        supports_check_mode=True,
    )
    done: list[str] = []
    try:
        for folder in module.params["folders"]:
            try:
                uid, gid = ids(folder["owner"], folder["group"])
                mode = int(folder["mode"], 8)
            except (KeyError, ValueError):
                module.fail_json(msg=f"{folder['path']}: no user {folder['owner']!r} or group {folder['group']!r}, "
                                 f"or mode {folder['mode']!r} is no octal mode", done=done)  # fmt: skip
            done += ensure_folder(folder["path"], uid, gid, mode, folder["foreign"], module.check_mode)
        for path in module.params["absent"]:
            if remove_file(path, module.check_mode):
                done.append(f"{path}: removed")
    except SafeWriteError as err:
        module.fail_json(msg=str(err), done=done)
    module.exit_json(changed=bool(done), done=done)


if __name__ == "__main__":
    main()
