"""Where the playbooks and roles live, from a checkout or from an installed wheel."""

from __future__ import annotations

import atexit
import importlib
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path
from types import ModuleType

from meshctl.errors import EnvironmentProblem

_PACKAGE = Path(__file__).resolve().parent


def data_dir() -> Path:
    """Return the folder that holds ``playbooks/``, ``roles/`` and ``plugins/`` (the collection's root).

    A built wheel ships them under ``meshctl/_data``; a checkout (editable
    install or ``python -m meshctl`` from the repository) has them beside the
    package.
    """
    for candidate in (_PACKAGE / "_data", _PACKAGE.parent):
        if all((candidate / part).is_dir() for part in ("playbooks", "roles", "plugins")):
            return candidate
    raise EnvironmentProblem(
        "meshctl cannot find its playbooks and roles",
        hint="reinstall meshctl (pip install --force-reinstall meshctl) or run it from a checkout",
    )


def playbook(name: str) -> Path:
    path = data_dir() / "playbooks" / name
    if not path.is_file():
        raise EnvironmentProblem(f"playbook {name} is missing from {path.parent}")
    return path


def roles_dir() -> Path:
    return data_dir() / "roles"


def parse_own_yaml(text: str):
    """One of the collection's own YAML files parsed (never a user's: those get settings'
    StrictLoader, with line numbers and duplicate keys), through libyaml where PyYAML has it: 7
    times faster, and every command reads the roles' argument specs."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@cache
def role_defaults(role: str) -> dict:
    """A role's defaults/main.yml as written (templated values stay text): what meshctl reads
    from the roles instead of keeping its own copy (a secret's file name, a port)."""
    import yaml

    path = roles_dir() / role / "defaults" / "main.yml"
    try:
        return parse_own_yaml(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise EnvironmentProblem(f"cannot read the defaults of role {role}: {exc}") from None


def secret_file_name(role: str, variable: str) -> str:
    """The file name (in the mesh's secrets folder) of a secret whose path a role default sets."""
    return str(role_defaults(role)[variable]).rsplit("/", 1)[-1]


# The roles, the module and the filters are one Ansible collection (galaxy.yml): the folder that
# holds playbooks/ and roles/ is also the collection's root, so meshctl and a user's playbooks
# run the same files.
COLLECTION = ("meshctl", "mesh")


def collections_path(folder: Path) -> Path:
    """Make FOLDER a collections path that holds this meshctl's collection (a symlink to its root).

    Returns FOLDER, for ANSIBLE_COLLECTIONS_PATH.
    """
    namespace = Path(folder) / "ansible_collections" / COLLECTION[0]
    namespace.mkdir(parents=True, exist_ok=True)
    link = namespace / COLLECTION[1]
    if not link.is_symlink():
        link.symlink_to(data_dir(), target_is_directory=True)
    return Path(folder)


@cache
def import_root() -> Path:
    """A folder on sys.path whose ``ansible_collections/meshctl/mesh`` is this meshctl's collection.

    A private folder of this process (a symlink to ``data_dir()`` inside it), so the collection's
    Python is imported the way Ansible imports it, and nothing outside the process changes.
    """
    folder = Path(tempfile.mkdtemp(prefix="meshctl-collection-"))
    atexit.register(shutil.rmtree, folder, True)
    collections_path(folder)
    sys.path.append(str(folder))  # after everything else: it adds the one package ansible_collections
    return folder


def plugin(name: str) -> ModuleType:
    """Import the collection's Python (``module_utils.mesh_hw``, ``filter.slurm_versions``) as the
    package ``ansible_collections.meshctl.mesh.plugins``: one copy, shared by the CLI and the roles,
    with its own imports (``from ansible_collections.meshctl.mesh.plugins.module_utils ...``) working."""
    import_root()
    return importlib.import_module(f"ansible_collections.{COLLECTION[0]}.{COLLECTION[1]}.plugins.{name}")
