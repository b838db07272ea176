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
    """Return the folder that holds ``playbooks/`` and ``roles/``.

    A built wheel ships them under ``meshctl/_data``; a checkout (editable
    install or ``python -m meshctl`` from the repository) has them beside the
    package.
    """
    for candidate in (_PACKAGE / "_data", _PACKAGE.parent):
        if (candidate / "playbooks").is_dir() and (candidate / "roles").is_dir():
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
def role_module(relative: str) -> ModuleType:
    """Import a Python file shipped inside a role (``slurm/...``), so the CLI and the roles share one copy."""
    path = roles_dir() / relative
    name = "meshctl._role_" + relative.replace("/", "_").removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
