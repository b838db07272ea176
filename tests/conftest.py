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


class AccountClock:
    """A clock that moves only when slept on."""

    def __init__(self):
        self.now = 1_000_000_000.0
        self.slept = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(round(seconds, 3))
        self.now += seconds


@pytest.fixture(autouse=True)
def account_clock(tmp_path_factory, monkeypatch):
    """The Lambda account's launch pacing (LaunchPacer) on a clock of its own for each test, with its
    own record of the last launch: a test's launches are 12 s apart without waiting them out, and
    none waits for another test's. (A program a test starts in a process of its own paces in real
    time, with the test's record.)"""
    from meshctl import resources

    monkeypatch.setenv("MESHCTL_PACE_DIR", str(tmp_path_factory.mktemp("pace")))
    timer = AccountClock()
    pacer = resources.plugin("module_utils.mesh_cloud_lambda").LaunchPacer
    monkeypatch.setattr(pacer, "wall", staticmethod(timer.clock))
    monkeypatch.setattr(pacer, "sleep", staticmethod(timer.sleep))
    return timer


@pytest.fixture(scope="session")
def hw():
    from meshctl.hardware import mesh_hw

    return mesh_hw()


@pytest.fixture
def runner_call(monkeypatch):
    """run_playbook up to ansible-runner: returns what it would hand ansible_runner.run (its kwargs)."""
    from meshctl import runner

    def call(**kwargs) -> dict:
        seen = {}

        def fake_runner_run(**kw):
            seen.update(kw)
            raise SystemExit(0)

        monkeypatch.setattr(runner.ansible_runner, "run", fake_runner_run)
        with pytest.raises(SystemExit):
            runner.run_playbook("site.yml", {"all": {"hosts": {}}}, **kwargs)
        return seen

    return call


def load_file(relative: str):
    """Import a plugin file of a role (filter plugins are not importable as packages)."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def mesh(tmp_path, monkeypatch):
    """A mesh folder holding one active head (test modules with other needs define their own)."""
    from meshctl.mesh import Mesh
    from meshctl.model import Node

    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    m = Mesh(tmp_path / "mesh")
    m.path.mkdir()
    m.save([Node("head", "100.64.0.1", roles=["head", "compute"], state="active", mesh_address="100.64.0.1")], {})
    return m
