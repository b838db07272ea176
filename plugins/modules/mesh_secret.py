#!/usr/bin/python
# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""One secret of the mesh made once on the control machine, and whether it is private."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mesh_secret
short_description: A secret made once in the mesh's secrets folder, and its mode read
version_added: "0.13.0"
description:
  - For the roles that own a secret of the mesh (munge's key, MLflow's password and accounts' key).
    Run it on the control machine, with C(delegate_to=localhost) and C(run_once).
  - Makes the folder of O(path) (mode 0700, made so if it is not) and, when O(path) is missing, the
    secret, O(size) random bytes from the OS (O(form=bytes)), or as many written as hexadecimal
    (O(form=hex)). It is written under umask 077 to a new file, then renamed into place.
  - A secret that is there is never read or changed. The module says its mode and whether it is
    private (0600 or 0400), so that the role can stop the run with its own fix when it is not.
  - The secret never passes through an argument, a command line or the module's result.
  - In check mode it makes nothing and says what it would make.
options:
  path:
    description: The secret's file on the control machine.
    type: path
    required: true
  form:
    description: V(bytes) for raw random bytes, V(hex) for their hexadecimal writing (a password).
    type: str
    choices: [bytes, hex]
    default: bytes
  size:
    description: How many random bytes.
    type: int
    default: 32
author:
  - meshctl contributors (@meshctl)
"""

EXAMPLES = r"""
- name: Make the mesh's munge key once, on the control machine
  meshctl.mesh.mesh_secret:
    path: "{{ munge_key_file }}"
    size: 1024
  delegate_to: localhost
  run_once: true
  become: false
  register: munge_key
"""

RETURN = r"""
mode:
  description: The secret's mode, four octal digits (V(0600)); empty when check mode would make it.
  returned: always
  type: str
private:
  description: Whether only its owner can read it (mode 0600 or 0400), or it would be made so.
  returned: always
  type: bool
"""

import contextlib
import os
import secrets
import stat

from ansible.module_utils.basic import AnsibleModule

PRIVATE = ("0600", "0400")


def new_secret(form: str, size: int) -> bytes:
    raw = secrets.token_bytes(size)
    return raw.hex().encode() if form == "hex" else raw


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "form": {"type": "str", "choices": ["bytes", "hex"], "default": "bytes"},
            "size": {"type": "int", "default": 32},
        },
        supports_check_mode=True,
    )
    path, form, size = module.params["path"], module.params["form"], module.params["size"]
    if size < 16:
        module.fail_json(msg=f"size {size}: a secret of fewer than 16 random bytes is too easy to guess")
    folder = os.path.dirname(path) or "."
    changed = False
    os.umask(0o077)
    if not os.path.isdir(folder):
        changed = True
        if not module.check_mode:
            os.makedirs(folder, mode=0o700, exist_ok=True)
    elif stat.S_IMODE(os.stat(folder).st_mode) != 0o700:
        changed = True
        if not module.check_mode:
            os.chmod(folder, 0o700)
    if not os.path.lexists(path):
        if module.check_mode:
            module.exit_json(changed=True, mode="", private=True)
        temporary = f"{path}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(new_secret(form, size))
            out.flush()
            os.fsync(out.fileno())
        os.rename(temporary, path)
        changed = True
    mode = f"{stat.S_IMODE(os.stat(path).st_mode):04o}"
    module.exit_json(changed=changed, mode=mode, private=mode in PRIVATE)


if __name__ == "__main__":
    main()
