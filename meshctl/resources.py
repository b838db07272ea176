"""Where the playbooks and roles live, from a checkout or from an installed wheel."""

from __future__ import annotations

import importlib.util
import sys
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


@cache
def role_defaults(role: str) -> dict:
    """A role's defaults/main.yml as written (templated values stay text): what meshctl reads
    from the roles instead of keeping its own copy (a secret's file name, a port)."""
    import yaml

    path = roles_dir() / role / "defaults" / "main.yml"
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
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
def plugin_module(relative: str) -> ModuleType:
    """Import a Python file of the collection's plugins (``filter/...``), so the CLI and the roles share one copy."""
    path = data_dir() / "plugins" / relative
    name = "meshctl._plugin_" + relative.replace("/", "_").removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
