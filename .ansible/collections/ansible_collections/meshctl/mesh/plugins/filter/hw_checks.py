# Copyright: meshctl contributors; Apache-2.0
"""Filter hw_problems: what is wrong with a node's hardware facts before Slurm's files use them."""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_hw import facts_problems


def hw_problems(hw):
    """[] when the facts are sound; else one message per problem (see mesh_hw.facts_problems)."""
    return facts_problems(hw)


class FilterModule:
    def filters(self):
        return {"hw_problems": hw_problems}
