# Copyright: meshctl contributors; Apache-2.0
"""Filters of the roles for text that reaches a command line: thin adapters of the shared core
(``plugins/module_utils/mesh_text.py``, which meshctl's settings check imports too)."""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_text import argv_secret_problem


class FilterModule:
    def filters(self):
        return {"argv_secret_problem": argv_secret_problem}
