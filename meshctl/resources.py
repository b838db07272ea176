"""Where the playbooks and roles live, from a checkout or from an installed wheel."""

from __future__ import annotations

from pathlib import Path

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
