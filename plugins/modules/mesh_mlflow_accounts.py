#!/usr/bin/python
# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Keep one MLflow account per account holder on the tracking server, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mesh_mlflow_accounts
short_description: Make an MLflow tracking server take each account holder's account and password
version_added: "0.11.0"
description:
  - Asks the server (MLflow's basic-auth app) once as each account in O(accounts). An account it
    does not take (401) is created with the admin account (C(users/create)); where that name exists
    with another password (someone signed up first under it), the admin sets the password
    (C(users/update-password)).
  - With O(given), the accounts the module gave out on an earlier run that O(accounts) no longer
    holds (a job user taken out of the mesh) are deleted (C(users/delete)); an account made on the
    server another way, and the admin's, are never deleted.
  - Passwords are secrets (O(accounts) and O(admin_password) are no_log); the module returns
    account names only.
  - In check mode it only asks, and names the accounts a run would create or set in RV(missing).
  - With O(database) and O(stamp), it asks only when something could have changed what it found
    last time. Once the server takes an account with its password, only a write of its user store
    changes that (the store's file then changes its inode, size or modification time), or new
    accounts or passwords. O(stamp) keeps a hash of both, no password, in a folder only root may
    write.
options:
  url:
    description: The server's address, C(http://host:port).
    type: str
    required: true
  admin_username:
    description: The admin account's name.
    type: str
    required: true
  admin_password:
    description: The admin account's password.
    type: str
    required: true
  accounts:
    description: Account name to password.
    type: dict
    required: true
  database:
    description: The server's user store (the basic-auth app's SQLite file), read with O(stamp).
    type: path
  stamp:
    description: Where the module keeps what it found (root's, 0600; its folder root's and made when missing).
    type: path
  given:
    description:
      - Where the module keeps the names of the accounts it gave out (root's, 0600; its folder
        root's), read to find the accounts to delete.
    type: path
  timeout:
    description: Seconds each request may take.
    type: int
    default: 30
author:
  - meshctl contributors (@meshctl)
"""

EXAMPLES = r"""
- name: Keep one MLflow account per user, never the admin's
  meshctl.mesh.mesh_mlflow_accounts:
    url: http://100.64.0.1:5000
    admin_username: mesh
    admin_password: "{{ lookup('ansible.builtin.file', '/path/to/mlflow_password') }}"
    accounts: "{{ mlflow_account_passwords }}"
  no_log: true
"""

RETURN = r"""
taken:
  description: The accounts the server already took with their password.
  returned: always
  type: list
  elements: str
created:
  description: The accounts created.
  returned: always
  type: list
  elements: str
updated:
  description: The accounts whose password was set (they existed with another).
  returned: always
  type: list
  elements: str
missing:
  description: In check mode, the accounts a run would create or set.
  returned: always
  type: list
  elements: str
retired:
  description: The accounts deleted (in check mode, that a run would delete).
  returned: always
  type: list
  elements: str
asked:
  description: Whether the server was asked (false when O(stamp) said nothing could have changed).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.error import HTTPError
from ansible.module_utils.urls import open_url
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_accounts import (
    ASK,
    CREATE,
    DELETE,
    UPDATE,
    AccountsError,
    account_body,
    basic_auth,
    checked_key,
    names_body,
    read_given,
    read_stamp,
    reconcile_once,
    retire,
    write_given,
    write_stamp,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "admin_username": {"type": "str", "required": True},
            "admin_password": {"type": "str", "required": True, "no_log": True},
            "accounts": {"type": "dict", "required": True, "no_log": True},
            "database": {"type": "path"},
            "stamp": {"type": "path"},
            "given": {"type": "path"},
            "timeout": {"type": "int", "default": 30},
        },
        supports_check_mode=True,
    )
    params = module.params
    base = params["url"].rstrip("/")
    admin = basic_auth(params["admin_username"], params["admin_password"])

    def status(path, method, authorization, body=None):
        headers = {"Authorization": authorization}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            answer = open_url(base + path, method=method, data=body, headers=headers, timeout=params["timeout"])
            return answer.getcode()
        except HTTPError as err:
            return err.code

    def ask(name, password):
        return status(ASK, "GET", basic_auth(name, password))

    def create(name, password):
        return status(CREATE, "POST", admin, account_body(name, password))

    def update(name, password):
        return status(UPDATE, "PATCH", admin, account_body(name, password))

    def delete(name):
        return status(DELETE, "DELETE", admin, names_body(name))

    accounts = {str(name): str(password) for name, password in params["accounts"].items()}
    given = read_given(params["given"]) if params["given"] else []
    try:
        retired = retire(given, accounts, params["admin_username"], delete, module.check_mode)
    except AccountsError as err:
        module.fail_json(msg=f"MLflow accounts at {base}: {err}")
    except Exception as err:  # the server unreachable: say which, never a password
        module.fail_json(msg=f"MLflow accounts at {base}: the server could not be asked ({type(err).__name__}: {err})")
    if params["given"] and not module.check_mode and given != sorted(accounts):
        try:
            write_given(params["given"], sorted(accounts))
        except (AccountsError, OSError) as err:
            module.fail_json(msg=f"MLflow accounts: could not keep the accounts given out in {params['given']}: {err}")
    stamp = params["stamp"] if params["database"] else None
    found = checked_key(accounts, params["database"]) if stamp else None
    if found is not None and read_stamp(stamp) == found:
        module.exit_json(
            changed=bool(retired), taken=sorted(accounts), created=[], updated=[], missing=[], retired=retired,
            asked=False,
        )  # fmt: skip
    try:
        result, keep = reconcile_once(
            accounts, ask, create, update, module.check_mode, lambda: checked_key(accounts, params["database"] or "")
        )
    except AccountsError as err:
        module.fail_json(msg=f"MLflow accounts at {base}: {err}")
    except Exception as err:  # the server unreachable: say which, never a password
        module.fail_json(msg=f"MLflow accounts at {base}: the server could not be asked ({type(err).__name__}: {err})")
    if stamp and keep is not None:
        try:
            write_stamp(stamp, keep)
        except (AccountsError, OSError) as err:
            module.fail_json(msg=f"MLflow accounts: could not keep what was found in {stamp}: {err}")
    result["changed"] = result["changed"] or bool(retired)
    module.exit_json(asked=True, retired=retired, **result)


if __name__ == "__main__":
    main()
