"""The shared core: the collection's Python that meshctl and the roles both run, imported here.

What meshctl and Ansible decide alike lives once, in the collection's ``plugins/module_utils/``
(the provider clients and the one place a node's machine is created, started, stopped or deleted
(``mesh_machine``), hardware and Slurm words, the text sanitizer, the status judge, the power
plan, Slurm's node lines, version skew, Tailscale's status, job users), whose filters
(``plugins/filter/``) are thin adapters for the roles; the head's programs import it too.
meshctl imports it here only, plainly, as the package ``ansible_collections.meshctl.mesh.plugins``
that Ansible loads (``resources.import_root``: one copy, its own imports working); every other
module asks this one (``from meshctl.core import mesh_cloud``). ``scripts/import_graph.py`` keeps
it a layer of its own and fails on an import of the collection, or a ``resources.plugin`` call,
anywhere else in meshctl.
"""

from __future__ import annotations

from meshctl import resources

resources.import_root()

from ansible_collections.meshctl.mesh.plugins.module_utils import (  # noqa: E402 (after the path is laid)
    mesh_burst,
    mesh_cloud,
    mesh_hw,
    mesh_machine,
    mesh_payloads,
    mesh_slurm,
    mesh_text,
    mesh_watch,
)
from ansible_collections.meshctl.mesh.plugins.module_utils import mesh_job_users as job_users  # noqa: E402
from ansible_collections.meshctl.mesh.plugins.module_utils import mesh_node_status as node_status  # noqa: E402
from ansible_collections.meshctl.mesh.plugins.module_utils import mesh_power_save as power_save  # noqa: E402
from ansible_collections.meshctl.mesh.plugins.module_utils import mesh_slurm_nodes as slurm_nodes  # noqa: E402
from ansible_collections.meshctl.mesh.plugins.module_utils import mesh_slurm_versions as slurm_versions  # noqa: E402
from ansible_collections.meshctl.mesh.plugins.module_utils import (  # noqa: E402
    mesh_tailscale_status as tailscale_status,
)

__all__ = [
    "job_users",
    "mesh_burst",
    "mesh_cloud",
    "mesh_hw",
    "mesh_machine",
    "mesh_payloads",
    "mesh_slurm",
    "mesh_text",
    "mesh_watch",
    "node_status",
    "power_save",
    "slurm_nodes",
    "slurm_versions",
    "tailscale_status",
]
