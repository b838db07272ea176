import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Real command outputs, each with its "# source:" provenance line (tests/fixtures/README.md).
FIXTURES = REPO / "tests" / "fixtures"


def fixture_text(relative: str) -> str:
    """A fixture's verbatim output: its leading '# ' note lines removed (see fixtures/README.md)."""
    lines = (FIXTURES / relative).read_text().splitlines()
    while lines and lines[0].startswith("# "):
        lines.pop(0)
    return "\n".join(lines) + "\n"


def fixtures_in(folder: str) -> list[str]:
    return sorted(f"{folder}/{p.name}" for p in (FIXTURES / folder).glob("*.txt"))


@pytest.fixture(scope="session")
def hw():
    from meshctl.hardware import mesh_hw

    return mesh_hw()


def load_file(relative: str):
    """Import a plugin file of a role (filter plugins are not importable as packages)."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
