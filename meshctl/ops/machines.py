"""`meshctl machines` and `meshctl offers`: what the mesh's provider accounts run and can rent,
asked of every configured provider (a provider that fails is one problem, not the end)."""

from __future__ import annotations

from dataclasses import dataclass, field

from meshctl import burst, cloud
from meshctl.ops.work import Work


@dataclass
class Machines:
    rows: list  # cloud.MachineRow, a burst pool's machine marked as its node's
    problems: dict[str, str]  # provider -> why it could not be asked
    total: float  # $/h of what runs
    forgotten: list  # rows that bill outside the mesh
    configured: list[str]  # the providers the mesh has an account with
    asked: list[str] = field(default_factory=list)
    volumes: list = field(default_factory=list)  # cloud.VolumeRow: the accounts' network volumes

    def stopped_bills(self, row) -> str:
        """What still bills while ROW's instance is stopped, as its provider's document says ("" when nothing)."""
        return cloud.capabilities(row.provider).stopped_bills if row.status == "stopped" else ""

    def raise_for_problems(self) -> None:
        cloud.raise_for_problems(self.problems, len(self.asked) - len(self.problems), "machines")


def machines(w: Work, provider: str | None = None) -> Machines:
    """Every instance of every configured provider (or PROVIDER's), the node each is, and the cost."""
    rows, problems = cloud.machines(w.mesh, w.nodes, w.mesh_vars, provider)
    rows = burst.pool_machines(rows, w.mesh_vars)  # a burst pool's machine is its node's, though not in mesh.yml
    total, forgotten = cloud.costing(rows)
    configured = cloud.configured(w.mesh)
    volumes, more = cloud.volumes(w.mesh, w.mesh_vars, rows, provider)
    problems.update({name: said for name, said in more.items() if name not in problems})
    return Machines(rows, problems, total, forgotten, configured, [provider] if provider else configured, volumes)


@dataclass
class Offers:
    rows: list  # cloud.Offer, cheapest $/h per GPU first
    problems: dict[str, str]
    silent: list[str]  # providers whose API lists no offers
    configured: list[str]
    asked: list[str] = field(default_factory=list)

    def raise_for_problems(self) -> None:
        cloud.raise_for_problems(self.problems, len(self.asked) - len(self.problems), "offers")


def offers(w: Work, gpu: str | None = None, provider: str | None = None) -> Offers:
    """What the configured providers (or PROVIDER) rent now, of GPU (``H100``, ``H100:8``) when named."""
    wanted, count = cloud.parse_gpu(gpu)
    rows, problems = cloud.offers(w.mesh, w.mesh_vars, wanted, count, provider)
    silent = [p for p in cloud.no_offer_sources(w.mesh, w.mesh_vars) if not provider or p == provider]
    configured = cloud.configured(w.mesh)
    return Offers(rows, problems, silent, configured, [provider] if provider else configured)
