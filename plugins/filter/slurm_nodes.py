# Copyright: meshctl contributors; Apache-2.0
"""Plain functions about Slurm's node records (unit-tested)."""

from __future__ import annotations


def features_to_update(held_lines, wanted):
    """The nodes whose features slurmctld holds differ from those they register with now.

    ``held_lines``: ``sinfo --noheader --Node --format=%N|%f`` lines (a node in two partitions is
    listed twice); ``wanted``: ``{node: "f1,f2"}``. Returns ``{node: "f1,f2"}`` to set: a dynamic
    node keeps the features it first registered with when slurmd registers again with others.
    Features compare as sets; a node slurmctld does not list is left out (it registers anew).
    """
    held = {}
    for line in held_lines or []:
        name, _, features = str(line).strip().partition("|")
        if name:
            held[name] = {f for f in features.split(",") if f and f != "(null)"}
    return {
        name: features
        for name, features in sorted((wanted or {}).items())
        if features and name in held and held[name] != {f for f in str(features).split(",") if f}
    }


class FilterModule:
    def filters(self):
        return {"features_to_update": features_to_update}
