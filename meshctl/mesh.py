"""The store: the mesh directory and its inventory (``mesh.yml``), the single source of truth for membership.

What a node is (``Node``) is the model's (``meshctl.model``); this module keeps it.

``mesh.yml`` is plain Ansible YAML inventory (``ansible-inventory -i mesh.yml --list`` reads it).
Every node is a host under ``all.hosts`` with its record as host variables; groups are derived:
``head`` and ``compute`` list *active* nodes by role, one group per provider lists every node,
and ``pending`` lists nodes being added. Writes are atomic (temp file, fsync, rename) and keep
the previous file as ``mesh.yml.bak``; runs on one mesh are serialized by ``mesh.lock``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import stat
import tempfile
import time
from pathlib import Path

import yaml

from meshctl import settings
from meshctl.errors import Busy, InventoryError, UsageError
from meshctl.model import (
    DERIVED_GROUPS,
    NAME_RE,
    RENTED,
    ROLES,
    VAR_RE,
    Node,
    _show,
    check_name,
    facts_problems,
    unsafe,
)

INVENTORY = "mesh.yml"
LOCK = "mesh.lock"
SECRETS = "secrets"
FACTS = "facts"  # one <node>.json per node: its hardware facts (mesh_hw) after its last converge
STATUS_REQUESTS = "status"  # in FACTS: one <node>.json per node: what `meshctl status` reads there


def to_inventory(
    nodes: list[Node],
    mesh_vars: dict,
    *,
    groups: dict[str, dict] | None = None,
    facts: dict[str, dict] | None = None,
    secrets: Path | None = None,
    leaving: list[Node] | tuple = (),
    converging: set[str] | None = None,
    settled: set[str] | frozenset = frozenset(),
) -> dict:
    """The Ansible inventory for these nodes: hosts with records, groups derived from them.

    This one function builds both ``mesh.yml`` (no keyword arguments) and the inventory of every
    run (``Mesh.run_inventory``): for a run, pending nodes that the run converges (``converging``,
    None: all) also join their role groups (they are being configured; another pending node, one
    whose add-node failed, stays out of the way), recorded hardware facts become each node's
    ``mesh_hw`` (so the head renders cluster-wide files without reaching the other nodes; a node
    in the run gathers fresh facts, which take precedence; recorded facts are node data, marked
    ``Unsafe``: never templated), the secrets folder is named, nodes leaving the mesh are hosts of
    group ``leaving`` only, and ``settled`` nodes (converged before, in the run only for what another
    node's joining or leaving changes on them: the head in an add-node) are in group ``settled``,
    which site.yml gives only the membership's steps.
    """
    for_run = facts is not None
    hosts = {n.name: n.hostvars() for n in [*nodes, *leaving]}
    children: dict[str, dict] = {}

    def add(group: str, name: str) -> None:
        children.setdefault(group, {"hosts": {}})["hosts"][name] = {}

    for n in nodes:
        if n.state == "active" or (for_run and (converging is None or n.name in converging)):
            for role in n.roles:
                add(role, n.name)
        if n.state != "active":
            add("pending", n.name)
        add(n.provider, n.name)
        if n.pod:
            add("pod", n.name)
        if mesh_vars.get("mesh_tailscale"):
            add("tailnet", n.name)
        if for_run and n.name in facts:
            hosts[n.name]["mesh_hw"] = unsafe(facts[n.name])
    for n in leaving:
        add("leaving", n.name)
        add(n.provider, n.name)
    for name in sorted(settled) if for_run else ():
        add("settled", name)
    for group in (*ROLES, "pending", "tailnet", "pod", *(("leaving", "settled") if for_run else ())):
        children.setdefault(group, {"hosts": {}})
    names = {n.name for n in [*nodes, *leaving]}
    for group, body in (groups or {}).items():  # groups a user added: kept, less nodes that left
        kept = dict(body)
        if isinstance(kept.get("hosts"), dict):
            kept["hosts"] = {h: v for h, v in kept["hosts"].items() if h in names}
        children[group] = kept
    all_vars = dict(mesh_vars)
    if secrets is not None:
        all_vars["mesh_secrets_dir"] = str(secrets)
        all_vars["mesh_dir"] = str(Path(secrets).parent)  # the mesh folder (packages/ for built Slurm)
    return {"all": {"vars": all_vars, "hosts": hosts, "children": children}}


def user_groups(data: dict) -> dict[str, dict]:
    """The groups under all.children that meshctl does not derive (a user's own): kept on save."""
    children = data["all"].get("children") or {}
    if not isinstance(children, dict):
        raise InventoryError(f"mesh.yml: all.children is {_show(children)}, not a mapping")
    kept = {}
    for group, body in children.items():
        if group in DERIVED_GROUPS:
            continue
        if not isinstance(group, str) or not VAR_RE.fullmatch(group):
            raise InventoryError(f"mesh.yml: group {_show(group)} is not a group name", hint="use letters, digits, _")
        if body is not None and not isinstance(body, dict):
            raise InventoryError(f"mesh.yml: group {group} is {_show(body)}, not a mapping")
        kept[group] = body or {}
    return kept


def from_inventory(data: object) -> tuple[list[Node], dict]:
    if not isinstance(data, dict) or not isinstance(data.get("all"), dict):
        raise InventoryError("mesh.yml has no top-level 'all' mapping")
    hosts = data["all"].get("hosts") or {}
    if not isinstance(hosts, dict):
        raise InventoryError("mesh.yml: all.hosts must be a mapping")
    mesh_vars = data["all"].get("vars") or {}
    if not isinstance(mesh_vars, dict):
        raise InventoryError(f"mesh.yml: all.vars is {_show(mesh_vars)}, not a mapping", hint="use key: value lines")
    nodes = [Node.from_hostvars(name, hv) for name, hv in hosts.items()]
    for node in nodes:
        try:
            node.validate()
        except UsageError as exc:
            raise InventoryError(exc.message, hint=exc.hint) from None
    for attr, what in (("name", "name"), ("mesh_address", "mesh address")):
        values = [getattr(n, attr) for n in nodes if getattr(n, attr)]
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise InventoryError(f"mesh.yml: two nodes share the {what} {', '.join(twice)}")
    heads = [n.name for n in nodes if "head" in n.roles]
    if len(heads) > 1:
        raise InventoryError(f"mesh.yml names {len(heads)} heads ({', '.join(heads)}); a mesh has one")
    return nodes, dict(mesh_vars)


MAX_INVENTORY_BYTES = 1024 * 1024
HEADER = """# meshctl mesh inventory (Ansible YAML). meshctl rewrites this file: host variables and groups you
# add are kept as written, comments are not (mesh.yml.bak is the previous version). Notes and
# settings are better kept in group_vars/ and host_vars/ (host_vars/NODE.yml), which meshctl never rewrites.
"""
MAX_FACTS_BYTES = 256 * 1024


MAX_WALK = 20000  # entries of a mesh folder checked (a mesh holds a few hundred)


def _refuse_unsafe(item: Path, info: os.stat_result, me: int, root: Path) -> None:
    """ITEM (its lstat INFO) is refused unless it is the user's own and no one else may change it."""
    if info.st_uid != me:
        raise InventoryError(
            f"{item} belongs to uid {info.st_uid}, not to you (uid {me}): meshctl runs only your own meshes",
            hint=f"if it is yours, `chown -R {me} {root}`; else copy the mesh and review it first",
        )
    if info.st_mode & 0o022:
        raise InventoryError(
            f"{item} can be changed by other users (mode {stat.S_IMODE(info.st_mode):04o})",
            hint=f"chmod go-w {item}",
        )


def check_ownership(folder: Path) -> None:
    """Refuse, as git's safe.directory does, a mesh folder another user owns or others can write,
    and follow no link out of it.

    Everything in the folder decides what runs as root on every node and on this machine (mesh.yml,
    group_vars/ and host_vars/, which Ansible reads whole, the secrets, the recorded facts, the
    known hosts): every entry of it, at any depth, must be the user's own and no one else's to
    change; a link must resolve inside the folder (its target is then checked as itself); and every
    folder above it must be the user's or root's, writable by no one else (or sticky, as /tmp is),
    so that no other user can swap the folder for another.
    """
    me = os.geteuid()
    root = Path(os.path.abspath(folder))
    try:
        top = os.lstat(root)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InventoryError(f"cannot read {root}: {exc.strerror}") from None
    if stat.S_ISLNK(top.st_mode):
        raise InventoryError(f"{root} is a link: meshctl follows no link to a mesh folder",
                             hint=f"use the folder it points to: --mesh {os.path.realpath(root)}")  # fmt: skip
    for above in root.parents:
        try:
            info = os.stat(above)
        except OSError:
            continue
        if info.st_uid not in (me, 0):
            raise InventoryError(f"{above}, a folder above the mesh, belongs to uid {info.st_uid}: its owner "
                                 "could put another folder in the mesh's place",
                                 hint="keep the mesh in a folder of your own")  # fmt: skip
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            raise InventoryError(f"{above}, a folder above the mesh, can be changed by other users "
                                 f"(mode {stat.S_IMODE(info.st_mode):04o}): they could swap the mesh folder",
                                 hint=f"chmod go-w {above}, or keep the mesh elsewhere")  # fmt: skip
    _refuse_unsafe(root, top, me, root)
    seen = 0
    for current, dirs, files in os.walk(root, followlinks=False):
        for name in sorted(dirs) + sorted(files):
            seen += 1
            if seen > MAX_WALK:
                raise InventoryError(f"{root} holds over {MAX_WALK} entries: not a mesh folder",
                                     hint="keep only the mesh's files in it")  # fmt: skip
            item = Path(current) / name
            try:
                info = os.lstat(item)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(info.st_mode):
                target = Path(os.path.realpath(item))
                if target != root and root not in target.parents:
                    raise InventoryError(
                        f"{item} is a link to {target}, outside the mesh folder: meshctl follows no link out of it",
                        hint=f"put the file itself there (`cp --remove-destination {target} {item}`) after "
                        "reviewing it",
                    )
                if info.st_uid != me:
                    _refuse_unsafe(item, info, me, root)
                continue  # its target is in the folder: checked as itself
            _refuse_unsafe(item, info, me, root)


class Mesh:
    """A mesh directory: ``mesh.yml``, ``group_vars/``, ``secrets/`` (0700), ``mesh.lock``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).resolve()
        self.refused_facts: dict[str, str] = {}  # node -> why its recorded facts were left out (load_facts)

    @property
    def inventory(self) -> Path:
        return self.path / INVENTORY

    @property
    def secrets(self) -> Path:
        return self.path / SECRETS

    @property
    def known_hosts(self) -> Path:
        return self.path / "known_hosts"

    @property
    def facts_dir(self) -> Path:
        return self.path / FACTS

    def load_facts(self) -> dict[str, dict]:
        """Each node's recorded hardware facts, checked again against the schema (``facts_problems``).

        A file that cannot be read, or whose facts are not sound (a node that lied, a hand edit), is
        left out and named in ``refused_facts`` (node -> why): the node's facts are gathered again on
        its next converge, and a run that needs them says so.
        """
        facts: dict[str, dict] = {}
        self.refused_facts = {}
        for path in sorted(self.facts_dir.glob("*.json")) if self.facts_dir.is_dir() else []:
            if not NAME_RE.match(path.stem) or path.is_symlink() or not path.is_file():
                continue
            try:
                if path.stat().st_size > MAX_FACTS_BYTES:
                    raise ValueError(f"over {MAX_FACTS_BYTES // 1024} KiB")
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                self.refused_facts[path.stem] = f"cannot read {path.name}: {exc}"
                continue
            problems = facts_problems(data)
            if problems:
                self.refused_facts[path.stem] = "; ".join(problems[:3])
                continue
            facts[path.stem] = data
        return facts

    def record_facts(self, name: str, hw: dict) -> None:
        problems = facts_problems(hw)
        if problems:
            raise InventoryError(
                f"{name} reported facts meshctl refuses: {'; '.join(problems[:3])}",
                hint=f"nothing was recorded for {name}; check the machine (it may be tampered with)",
            )
        self.facts_dir.mkdir(exist_ok=True)
        atomic_write(self.facts_dir / f"{check_name(name)}.json", json.dumps(hw, indent=1, sort_keys=True) + "\n")

    def forget_facts(self, name: str) -> None:
        for path in (self.facts_dir / f"{check_name(name)}.json", self.status_requests_dir / f"{name}.json"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    @property
    def status_requests_dir(self) -> Path:
        return self.facts_dir / STATUS_REQUESTS

    def record_status_request(self, name: str, request: dict) -> None:
        """What `meshctl status` is to read on NAME, as its last converge resolved it (checked by
        the caller: meshctl/quickread.py)."""
        self.status_requests_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.status_requests_dir / f"{check_name(name)}.json",
                     json.dumps(request, indent=1, sort_keys=True) + "\n")  # fmt: skip

    def load_status_requests(self) -> dict[str, object]:
        """Each node's recorded status request as written (unchecked: the reader checks it); a file
        that cannot be read, or is too large, is left out (that node is then read through Ansible)."""
        found: dict[str, object] = {}
        folder = self.status_requests_dir
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            if not NAME_RE.match(path.stem) or path.is_symlink() or not path.is_file():
                continue
            with contextlib.suppress(OSError, ValueError):
                if path.stat().st_size <= MAX_FACTS_BYTES:
                    found[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        return found

    def run_inventory(
        self,
        nodes: list[Node],
        mesh_vars: dict,
        leaving: list[Node] | tuple = (),
        converging: set[str] | None = None,
        settled: set[str] | frozenset = frozenset(),
    ) -> dict:
        """The inventory one Ansible run gets (see ``to_inventory``), with the provider API URLs this
        machine overrides (MESHCTL_<PROVIDER>_API_URL), which the head's power program uses too."""
        facts = self.load_facts()
        inventory = to_inventory(nodes, mesh_vars, groups=self.user_groups(), facts=facts, secrets=self.secrets,
                                 leaving=leaving, converging=converging, settled=settled)  # fmt: skip
        urls = {p: os.environ[f"MESHCTL_{p.upper()}_API_URL"] for p in RENTED
                if os.environ.get(f"MESHCTL_{p.upper()}_API_URL")}  # fmt: skip
        if urls:
            inventory["all"]["vars"]["mesh_provider_api_urls"] = urls
        return inventory

    @classmethod
    def find(cls, explicit: str | None = None, cwd: Path | None = None) -> Mesh:
        """--mesh DIR, else $MESHCTL_MESH, else the current directory or a parent of it."""
        chosen = explicit or os.environ.get("MESHCTL_MESH")
        if chosen:
            mesh = cls(Path(chosen))
            if not mesh.inventory.is_file():
                raise InventoryError(f"{mesh.path} has no {INVENTORY}", hint="run `meshctl init DIR` first")
            return mesh
        here = (cwd or Path.cwd()).resolve()
        for folder in (here, *here.parents):
            if (folder / INVENTORY).is_file():
                return cls(folder)
        raise InventoryError(
            "no mesh here: no mesh.yml in this directory or its parents",
            hint="run `meshctl init DIR`, then cd into it, or pass --mesh DIR / set MESHCTL_MESH",
        )

    def setting(self, name: str, mesh_vars: dict, default=None):
        """A mesh-wide variable from mesh.yml's vars, else group_vars/all.yml (where users set role
        variables), else DEFAULT: what meshctl reads of the settings the roles read."""
        if mesh_vars.get(name) is not None:
            return mesh_vars[name]
        group_vars = self.path / "group_vars" / "all.yml"
        if group_vars.is_file():
            try:
                value = (settings.load(group_vars.read_text()) or {}).get(name)
            except (OSError, ValueError, yaml.YAMLError, AttributeError):
                value = None
            if value is not None:
                return value
        return default

    def load(self) -> tuple[list[Node], dict]:
        check_ownership(self.path)
        try:
            with self.inventory.open("rb") as handle:
                raw = handle.read(MAX_INVENTORY_BYTES + 1)
        except OSError as exc:
            raise InventoryError(f"cannot read {self.inventory}: {exc.strerror}") from None
        backup = self.inventory.with_name(self.inventory.name + ".bak")
        hint = "fix it by hand" + (f" or restore the previous version from {backup.name}" if backup.is_file() else "")
        if len(raw) > MAX_INVENTORY_BYTES:
            raise InventoryError(f"{self.inventory} is over {MAX_INVENTORY_BYTES // 1024} KiB: not a mesh inventory",
                                 hint=hint)  # fmt: skip
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InventoryError(f"{self.inventory} is not UTF-8 text (byte {exc.start})", hint=hint) from None
        try:
            data = settings.load(text)
        except yaml.YAMLError as exc:
            problem = settings.yaml_problem(exc)
            raise InventoryError(f"{self.inventory} is not valid YAML ({problem})", hint=hint) from None
        try:
            nodes, mesh_vars = from_inventory(data)
            user_groups(data)  # checked here, read again where they are written (save, run_inventory)
        except InventoryError as exc:
            raise InventoryError(
                f"{self.inventory}: {exc.message}",
                hint=exc.hint or hint,
            ) from None
        self.check_settings(text)
        return nodes, mesh_vars

    def check_settings(self, inventory_text: str) -> None:
        """Refuse a setting no role or meshctl knows, or of the wrong type (meshctl/settings.py)."""
        problems = settings.check(self.path, inventory_text)
        if problems:
            first = problems[0]
            more = f" (and {len(problems) - 1} more: `meshctl check` lists them)" if len(problems) > 1 else ""
            # The words `meshctl check` prints for it (settings.Problem), in the mesh's folder.
            raise InventoryError(f"{self.path}/{first}{more}", hint=first.hint)

    def user_groups(self) -> dict[str, dict]:
        """The groups a user added to mesh.yml as the file has them now (none before it exists): kept
        as they are in every inventory written or handed to Ansible. Read from the file, not kept from
        ``load``: nothing of one call rests on another's."""
        try:
            data = settings.load(self.inventory.read_text(encoding="utf-8"))
        except (OSError, ValueError, yaml.YAMLError):
            return {}
        try:
            return user_groups(data)
        except (InventoryError, KeyError, TypeError, AttributeError):  # not a mesh's: load says why
            return {}

    def save(self, nodes: list[Node], mesh_vars: dict) -> None:
        for node in nodes:
            node.validate()
        text = HEADER + yaml.safe_dump(to_inventory(nodes, mesh_vars, groups=self.user_groups()), sort_keys=False,
                                       default_flow_style=False)  # fmt: skip
        atomic_write(self.inventory, text, backup=True)

    @contextlib.contextmanager
    def lock(self, command: str, wait: float = 0.0):
        """Hold the mesh lock; wait up to ``wait`` seconds, else say who holds it."""
        self.path.mkdir(parents=True, exist_ok=True)
        try:  # never through a symlink (`ln -s victim mesh.lock` must not truncate the victim)
            fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise InventoryError(
                f"cannot open {self.path / LOCK}: {exc.strerror}",
                hint=f"remove {self.path / LOCK} if it is a link or a folder; meshctl makes it again",
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise InventoryError(f"{self.path / LOCK} is not a regular file", hint=f"remove it: rm {self.path / LOCK}")
        deadline = time.monotonic() + wait
        held = False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    held = True
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        note = os.pread(fd, 4096, 0).decode(errors="replace").strip()
                        holder = display_note(note) or "another meshctl run (it left no note)"
                        raise Busy(f"the mesh is busy: {holder}",
                                   hint="wait for that run to finish, or pass --wait SECONDS") from None  # fmt: skip
                    time.sleep(0.5)
            since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            note = f"pid {os.getpid()} on {socket.gethostname()} running `{command}` since {since}"
            os.ftruncate(fd, 0)
            os.pwrite(fd, (note + "\n").encode(), 0)
            yield self
        finally:
            if held:  # only the holder's note is the holder's to clear
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
            os.close(fd)


def display_note(note: str) -> str:
    """A lock note as one line of plain text (it is a file anyone with the folder could write)."""
    return "".join(ch for ch in " ".join(note.split()) if ch.isprintable())[:300]


@contextlib.contextmanager
def removed_on_failure(path: Path):
    """Run a block that creates a mesh in ``path``; on any failure remove what the block created
    there (the folder itself when it made it), nothing that was there before, and re-raise: a
    failed `init` leaves no secret (the Tailscale key it stored) and no half mesh behind."""
    path = Path(path)
    before = set(os.listdir(path)) if path.is_dir() else None
    try:
        yield
    except BaseException:
        if before is None:
            shutil.rmtree(path, ignore_errors=True)
        elif path.is_dir():
            for entry in set(os.listdir(path)) - before:
                target = path / entry
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target, ignore_errors=True)
                else:
                    target.unlink(missing_ok=True)
        raise


def atomic_write(path: Path, text: str | bytes, backup: bool = False, mode: int = 0o644) -> None:
    """Write via a temp file in the same folder, fsync, keep the old file as .bak, rename.

    The temp file is 0600 until it is complete (mkstemp), so a secret (``mode=0o600``, bytes)
    is never readable by others on its way. A failure (a full disk, a read-only folder) leaves
    the old file as it was, removes the temp file and says so (InventoryError), never a traceback.
    """
    path = Path(path)
    try:
        _atomic_write(path, text, backup, mode)
    except OSError as exc:
        raise InventoryError(
            f"cannot write {path}: {exc.strerror or exc}",
            hint=f"free space or fix permissions there, then run the command again ({path.name} is as it was)",
        ) from None


def _atomic_write(path: Path, text: str | bytes, backup: bool, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if backup and path.exists():
            bak = path.with_name(path.name + ".bak")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(bak)
            os.link(path, bak)
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
