"""`meshctl rotate-authkey`: every active tailnet node moved to the mesh's new Tailscale auth key
(playbooks/rotate_authkey.yml), one row per node of what it did; the key itself is
``meshctl.tailnet``'s (read, checked, stored)."""

from __future__ import annotations

from dataclasses import dataclass

from meshctl import runner, tailnet, vault
from meshctl.errors import InventoryError, PlaybookError, unreachable
from meshctl.model import Node
from meshctl.ops import work


@dataclass
class RotationRow:
    node: str
    before: str
    after: str
    action: str
    result: str
    ok: bool


def _state(facts: dict | None) -> str:
    if not facts:
        return "?"
    return f"{facts.get('backend_state', '?')} {facts.get('ipv4') or '-'}"


ACTIONS = {
    "none": "kept its login",
    "join": "joined",
    "reauth": "logged in again",
    "rename": "renamed",
}


def rotation_rows(nodes: list[Node], result: runner.RunResult) -> list[RotationRow]:
    """One row per tailnet node from the run's reports and failures."""
    failures: dict[str, runner.Failure] = {}
    for failure in result.failures:
        failures.setdefault(failure.host, failure)
    rows = []
    for node in nodes:
        report = result.reports.get(node.name)
        failure = failures.get(node.name)
        stats = result.stats.get(node.name, {})
        before = _state(report.get("before")) if report else "?"
        after = _state(report.get("after")) if report else "?"
        action = ACTIONS.get(report.get("action"), report.get("action")) if report else "-"
        if report and report.get("key_updated"):
            action += ", new key file"
        old_ip = (report or {}).get("before", {}).get("ipv4")
        new_ip = (report or {}).get("after", {}).get("ipv4")
        if stats.get("unreachable"):
            text = f"UNREACHABLE ({failure.message if failure else 'no answer'}): re-run when it is back"
        elif report and old_ip and new_ip and old_ip != new_ip:
            text = f"IP CHANGED {old_ip} -> {new_ip}: run `meshctl apply` so Slurm and NFS use it"
        elif failure:
            text = f"FAILED at '{failure.task}': {failure.message}"
        elif report and report.get("after", {}).get("backend_state") == "Running":
            text = "ok"
        else:
            text = "no report (did the play reach this node?)"
        rows.append(RotationRow(node.name, before, after, action, text, text == "ok"))
    return rows


def require_active(nodes: list[Node]) -> list[Node]:
    members = [n for n in nodes if n.state == "active"]
    if not members:
        raise InventoryError("the mesh has no active node to rotate", hint="add nodes with `meshctl add-node`")
    return members


def rotate(w: work.Work, progress, force=False, verbosity=0):
    """Run rotate_authkey.yml on every active tailnet node; one row per node (``require_rotated`` judges)."""
    tailnet.require_tailscale(w.mesh_vars)
    members = require_active(w.nodes)
    result = w.run(
        "rotate_authkey.yml",
        progress,
        targets=members,
        verbosity=verbosity,
        extravars={"tailscale_force_reauth": True} if force else None,
        converge=False,  # the tailnet's login only: no facts, no head copy
    )
    return rotation_rows(members, result)


def rotate_key(w: work.Work, key_file: str | None, stored: bool, asker, progress, force: bool = False,
               verbosity: int = 0, say=print) -> list[RotationRow]:  # fmt: skip
    """The mesh's new key (from KEY_FILE, ``-`` or ASKER; or the STORED one again), checked and
    stored (said), then every active tailnet node moved to it; one row per node."""
    mesh, nodes, mesh_vars = w.mesh, w.nodes, w.mesh_vars
    tailnet.require_tailscale(mesh_vars)
    require_active(nodes)  # before a new key replaces the stored one
    if stored:
        source = str(tailnet.key_path(mesh))
        key = tailnet.stored_key(mesh, vault.for_mesh(mesh_vars))
    else:
        source = key_file if key_file and key_file != "-" else "the key given"
        key = tailnet.read_key(key_file, asker)
    kind = tailnet.check_key(key, tailnet.mesh_tags(mesh, mesh_vars), source)
    if not stored:
        path = tailnet.store_key(mesh, key, vault.for_mesh(mesh_vars))
        how = "vault-encrypted, 0600" if vault.for_mesh(mesh_vars) else "0600"
        say(f"new {kind} key stored in {path} ({how})")
    return rotate(w, progress, force=force, verbosity=verbosity)


def require_rotated(rows: list[RotationRow]) -> None:
    behind = [r.node for r in rows if not r.ok]
    down = {r.node: r.result for r in rows if r.result.startswith("UNREACHABLE")}
    if behind and set(behind) == set(down):
        raise unreachable(f"the other {len(rows) - len(behind)} node(s) are on the new key", down,
                          "meshctl rotate-authkey --stored")  # fmt: skip
    if behind:
        raise PlaybookError(
            f"{len(behind)} of {len(rows)} nodes are not on the new key: {', '.join(behind)}",
            hint="the new key is stored; fix what the table says and run `meshctl rotate-authkey --stored`",
        )
