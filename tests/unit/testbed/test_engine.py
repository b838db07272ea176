import pytest

from meshctl.errors import EnvironmentProblem
from meshctl.localmesh import engine
from meshctl.localmesh.engine import INSTALL, START, WAIT, EngineState


def state(**kw):
    base = {"answering": False, "dockerd_installed": True, "dockerd_running": False, "is_root": True}
    base.update(kw)
    return EngineState(**base)


def test_engine_already_answering_is_left_alone():
    assert engine.plan(state(answering=True, dockerd_running=True)) == []


def test_answering_engine_needs_no_root():
    assert engine.plan(state(answering=True, is_root=False)) == []


def test_dockerd_starting_is_waited_for_not_started_twice():
    assert engine.plan(state(dockerd_running=True)) == [WAIT]


def test_installed_but_stopped_engine_is_started():
    assert engine.plan(state()) == [START, WAIT]


def test_missing_engine_is_installed_then_started():
    assert engine.plan(state(dockerd_installed=False)) == [INSTALL, START, WAIT]


def test_starting_needs_root_and_says_so():
    with pytest.raises(EnvironmentProblem, match="needs root"):
        engine.plan(state(is_root=False))


def test_stop_leaves_an_engine_we_did_not_start(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "STARTED_BY_US", tmp_path / "none.pid")
    killed = []
    monkeypatch.setattr(engine.os, "kill", lambda *a: killed.append(a))
    assert engine.stop(say=lambda _m: None) is False
    assert killed == []


def test_stop_ignores_a_recorded_pid_that_is_no_longer_dockerd(tmp_path, monkeypatch):
    pidfile = tmp_path / "d.pid"
    pidfile.write_text("1\n")  # PID 1 here is not dockerd
    monkeypatch.setattr(engine, "STARTED_BY_US", pidfile)
    killed = []
    monkeypatch.setattr(engine.os, "kill", lambda *a: killed.append(a))
    assert engine.stop(say=lambda _m: None) is False
    assert killed == []
