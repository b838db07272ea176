# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Lookup ``meshctl.mesh.role_settings``: every role's settings, as one argument spec."""

from __future__ import annotations

DOCUMENTATION = r"""
name: role_settings
author:
  - meshctl contributors (@meshctl)
short_description: The settings of every role of this collection, merged into one argument spec
description:
  - Reads C(meta/argument_specs.yml) of every role beside this collection's roles (its C(roles/) folder)
    and merges the options of each role's C(main) entry point, or C(defaults) for a role of settings only
    (one without tasks, such as C(mesh) or C(slurm_defaults)), into one dict.
  - Role C(mesh_settings) gives it to C(ansible.builtin.validate_argument_spec), once per node, so that
    a role added to the collection has its settings checked without a list to keep.
  - Every variable is prefixed with its role's name, so no two roles' options collide; a name
    declared by two roles is refused.
options: {}
"""

EXAMPLES = r"""
- name: Check the node's settings against every role's argument spec
  ansible.builtin.validate_argument_spec:
    argument_spec: "{{ lookup('meshctl.mesh.role_settings') }}"
"""

RETURN = r"""
_raw:
  description: One dict, option name to its argument spec (type, default, choices, elements, description).
  type: list
  elements: dict
"""

from pathlib import Path

import yaml
from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

ROLES = Path(__file__).resolve().parents[2] / "roles"


def role_options(role_dir: Path) -> dict:
    """The options a role's argument spec declares for its settings: `main` where the role has
    tasks, `defaults` for a role of settings only."""
    path = role_dir / "meta" / "argument_specs.yml"
    if not path.is_file():
        return {}
    specs = (yaml.safe_load(path.read_text()) or {}).get("argument_specs") or {}
    entry = "main" if (role_dir / "tasks").is_dir() else "defaults"
    return dict((specs.get(entry) or {}).get("options") or {})


def merged_options(roles: Path) -> dict:
    """Every role's settings under ROLES, in one dict; a name two roles declare is an error."""
    merged: dict = {}
    owner: dict[str, str] = {}
    for role_dir in sorted(p for p in roles.iterdir() if p.is_dir()):
        for name, spec in role_options(role_dir).items():
            if name in merged and merged[name] != spec:
                raise ValueError(f"setting {name} is declared by roles {owner[name]} and {role_dir.name}")
            merged[name], owner[name] = spec, role_dir.name
    return merged


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        try:
            return [merged_options(ROLES)]
        except (OSError, ValueError, yaml.YAMLError) as err:
            raise AnsibleLookupError(f"the roles' settings cannot be read: {err}") from err
