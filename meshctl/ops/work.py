"""One command's unit of work on a mesh: the operations' one way to the store.

A command finds its mesh here (``find``), reads it (``reading``) or changes it (``changing``: the
mesh's lock taken, then its nodes and settings loaded, ``save`` writing them back atomically).
Every lock of the mesh is taken here, by commands and operations alike, so two runs never change
one mesh at once and a command line never reaches the store itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from meshctl import runner, session
from meshctl.mesh import Mesh
from meshctl.model import Node


@dataclass
class Work:
    """A mesh with its nodes and settings as loaded (and, in ``changing``, its lock held): what every
    operation takes, saves and runs its playbooks with."""

    mesh: Mesh
    nodes: list[Node]
    mesh_vars: dict

    @property
    def head(self) -> str | None:
        """The head's name (None in a mesh that has none yet)."""
        return next((n.name for n in self.nodes if "head" in n.roles), None)

    def save(self, nodes: list[Node] | None = None) -> None:
        """Write the nodes (NODES from now on, when given) and the settings back, atomically."""
        if nodes is not None:
            self.nodes = nodes
        self.mesh.save(self.nodes, self.mesh_vars)

    def run(self, playbook: str, progress, **options) -> runner.RunResult:
        """PLAYBOOK on this mesh (``session.run``: the inventory of every node, OPTIONS its own)."""
        return session.run(self.mesh, self.nodes, self.mesh_vars, playbook, progress, **options)

    def reload(self) -> None:
        """The nodes and settings as the store has them now (another run of this mesh wrote them)."""
        self.nodes, self.mesh_vars = self.mesh.load()


def find(mesh_dir: str | None) -> Mesh:
    """The mesh MESH_DIR names (``--mesh``, else ``MESHCTL_MESH``, else this folder or one above it)."""
    return Mesh.find(mesh_dir)


def reading(mesh: Mesh | str | None) -> Work:
    """MESH (or the one its folder names) with its nodes and settings, no lock: for what only reads."""
    mesh = mesh if isinstance(mesh, Mesh) else find(mesh)
    return Work(mesh, *mesh.load())


@contextmanager
def locked(mesh: Mesh, command: str, wait: float = 0.0) -> Iterator[Mesh]:
    """MESH's lock for COMMAND (waiting up to WAIT seconds for another run's), nothing loaded."""
    with mesh.lock(command, wait=wait):
        yield mesh


@contextmanager
def changing(mesh: Mesh | str | None, command: str, wait: float = 0.0) -> Iterator[Work]:
    """MESH (or the one its folder names) locked for COMMAND, then loaded."""
    mesh = mesh if isinstance(mesh, Mesh) else find(mesh)
    with locked(mesh, command, wait):
        yield Work(mesh, *mesh.load())
