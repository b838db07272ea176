"""``meshctl init --from-inventory FILE``: a mesh from an Ansible inventory the user already has.

The file is read by Ansible itself (INI, YAML, anything ``ansible-inventory`` reads). Its hosts
bring their connection (``ansible_host``, ``ansible_user``, ``ansible_port``,
``ansible_ssh_private_key_file``); one group names the head, another the compute nodes. Every
host is checked over SSH exactly as ``add-node`` checks one, before anything is written; the
mesh then holds the head and the compute nodes as ``pending``, and ``meshctl apply`` sets them up.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from pathlib import Path

from meshctl.errors import InventoryError, UsageError
from meshctl.mesh import removed_on_failure
from meshctl.model import check_name
from meshctl.ops import add, init, work


@dataclass
class ImportedHost:
    name: str
    target: str  # USER@HOST:PORT, as add-node takes it
    ssh_key: str | None


def read_inventory(path: Path, head_group: str, compute_group: str) -> tuple[ImportedHost, list[ImportedHost]]:
    """The head and the compute hosts of an Ansible inventory; raise with the fix on any problem."""
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    if not Path(path).is_file():
        raise UsageError(f"--from-inventory {path}: no such file")
    loader = DataLoader()
    try:
        inventory = InventoryManager(loader=loader, sources=[str(path)])
    except AnsibleError as exc:
        raise InventoryError(f"cannot read the inventory {path}: {exc.message}") from None
    if not inventory.hosts:
        raise InventoryError(f"the inventory {path} has no hosts Ansible can read",
                             hint="check it with `ansible-inventory -i FILE --graph`")  # fmt: skip
    groups = inventory.get_groups_dict()
    heads = groups.get(head_group, [])
    if len(heads) != 1:
        raise InventoryError(
            f"group {head_group!r} of {path} has {len(heads)} hosts, not one",
            hint="name the controller's group with --head-group (it must hold exactly one host)",
        )
    computes = [h for h in groups.get(compute_group, []) if h != heads[0]]
    variables = VariableManager(loader=loader, inventory=inventory)

    def host(name: str) -> ImportedHost:
        check_name(name)  # the inventory name becomes the node's name in Slurm and Tailscale
        hv = variables.get_vars(host=inventory.get_host(name))
        address = hv.get("ansible_host", name)
        user = hv.get("ansible_user") or getpass.getuser()
        port = hv.get("ansible_port", 22)
        for what, value in (("ansible_host", address), ("ansible_user", user)):
            if not isinstance(value, str) or not value or value.startswith("-"):
                raise InventoryError(f"{name}: {what} {value!r} is not usable", hint=f"fix {what} in {path}")
        if isinstance(port, bool) or not str(port).isdigit():
            raise InventoryError(f"{name}: ansible_port {port!r} is not a port", hint=f"fix it in {path}")
        key = hv.get("ansible_ssh_private_key_file") or hv.get("ansible_private_key_file")
        if key is not None and not isinstance(key, str):
            raise InventoryError(f"{name}: ansible_ssh_private_key_file {key!r} is not a path")
        # Plain str: Ansible's values carry tags (data tagging) that YAML cannot write back.
        name, address, user, port = str(name), str(address), str(user), int(str(port))
        if ":" in address and not address.startswith("["):
            address = f"[{address}]"
        return ImportedHost(name, f"{user}@{address}:{port}", str(Path(str(key)).expanduser()) if key else None)

    return host(heads[0]), [host(name) for name in computes]


def init_from_inventory(path: Path, source: Path, head_group: str, compute_group: str, provider, **init_options):
    """Check every host over SSH, then write the mesh (head + pending compute nodes). Nothing is left on failure.

    ``init_options`` are ``meshctl.ops.init.init_mesh``'s (Tailscale key, tags, vault id).
    """
    head, computes = read_inventory(source, head_group, compute_group)
    with removed_on_failure(Path(path)):
        mesh, _head, report = init.init_mesh(path, head.target, head.name, head.ssh_key, provider, None,
                                                   **init_options)  # fmt: skip
        w = work.reading(mesh)
        reports = [report]
        for host in computes:
            plan = add.plan_add(w, host.target, host.name, provider, host.ssh_key, None)
            w.nodes.append(plan.node)
            reports.append(plan.report)
        w.save()
    return mesh, w.nodes, [r for r in reports if r is not None]
