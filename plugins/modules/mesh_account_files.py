#!/usr/bin/python
# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Give each account holder a folder only they may read and their account file in it, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mesh_account_files
short_description: Each account holder's private folder and read-only account file, in one call
version_added: "0.11.0"
description:
  - Under O(path) (created root's, 0755; never a link), gives each user named in O(files) a folder
    of their own (the user's, group root, 0700) and in it O(filename) with the given content (the
    user's, group root, 0400). A file whose content, owner and mode are already right is left alone.
  - The user's folder is theirs, so what lies in it is never trusted. The file is read without
    following a link or waiting on a pipe, and a new file is written beside it (from the open
    folder, never by a path) and renamed over it, so a link, a pipe or a hard link the user put
    there is replaced, never followed, written into or given away.
  - Removes the plain files (or links) at the paths in O(absent); a folder there is an error.
  - The file contents are secrets (O(files) is no_log); the module returns names and paths only.
  - In check mode it changes nothing and says what it would; a user that does not exist yet (a run
    that creates it first) counts as a file to write.
options:
  path:
    description: The folder of the account holders' folders.
    type: path
    required: true
  filename:
    description: The account file's name in each holder's folder.
    type: str
    required: true
  files:
    description: User name to the content of their account file.
    type: dict
    default: {}
  absent:
    description: Paths where no file may remain (old account files), removed when there.
    type: list
    elements: path
    default: []
author:
  - meshctl contributors (@meshctl)
"""

EXAMPLES = r"""
- name: Give each account holder their own MLflow account
  meshctl.mesh.mesh_account_files:
    path: /etc/meshctl/task-env.d/users
    filename: mlflow.env
    files:
      alice: "MLFLOW_TRACKING_USERNAME=alice\nMLFLOW_TRACKING_PASSWORD=...\n"
    absent: [/etc/meshctl/task-env.d/mlflow.env]
  no_log: true
"""

RETURN = r"""
folders:
  description: The account holders whose folder was made or given the right owner and mode.
  returned: always
  type: list
  elements: str
written:
  description: The account holders whose file was written (or would be, in check mode).
  returned: always
  type: list
  elements: str
removed:
  description: The paths in O(absent) that were removed.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_accounts import AccountsError, ensure_account_files


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "filename": {"type": "str", "required": True},
            "files": {"type": "dict", "default": {}, "no_log": True},
            "absent": {"type": "list", "elements": "path", "default": []},
        },
        supports_check_mode=True,
    )
    params = module.params
    files = {str(name): str(text) for name, text in (params["files"] or {}).items()}
    try:
        result = ensure_account_files(params["path"], params["filename"], files, params["absent"], module.check_mode)
    except (AccountsError, OSError) as err:
        module.fail_json(msg=f"account files under {params['path']}: {err}")
    module.exit_json(
        changed=result["changed"], folders=result["folders"], written=result["written"], removed=result["removed"]
    )


if __name__ == "__main__":
    main()
