"""The test bed's wheel cache (meshctl/localmesh/wheels.py): what it fills, and that the settings
it gives a bed make pip take packages from it and from nowhere else."""

import base64
import hashlib
import http.server
import os
import subprocess
import sys
import threading
import time
import zipfile
from functools import partial
from pathlib import Path

import pytest
import yaml

from meshctl import headcopy
from meshctl.localmesh import wheels

REPO = Path(__file__).resolve().parents[3]


def test_what_is_filled_is_read_from_the_roles_own_defaults():
    sets = wheels.requirement_sets()
    mlflow = yaml.safe_load((REPO / "roles/mlflow/defaults/main.yml").read_text())
    job_env = yaml.safe_load((REPO / "roles/job_env/defaults/main.yml").read_text())
    assert sets["mlflow"] == [f"mlflow[auth]=={mlflow['mlflow_version']}"]  # vars/main.yml's mlflow_package
    assert sets["job_env"] == job_env["job_env_packages"]
    assert sets["relaunch"] == headcopy.requirements() and sets["relaunch"]
    assert sets["relaunch_mitogen"] == headcopy.mitogen_requirements() and sets["relaunch_mitogen"]


def test_a_changed_requirement_or_image_list_is_a_new_fill():
    sets = {"mlflow": ["mlflow==3.17.2"], "job_env": ["numpy"]}
    same = wheels.digest({"job_env": ["numpy"], "mlflow": ["mlflow==3.17.2"]})
    assert wheels.digest(sets) == same
    assert wheels.digest({**sets, "mlflow": ["mlflow==3.18.0"]}) != same
    assert wheels.digest(sets, suites=("bookworm",)) != same


def test_each_set_is_downloaded_on_its_own_with_its_words_quoted():
    sets = {"mlflow": ["mlflow==3.17.2"], "job_env": ["mlflow-skinny", "numpy>=2; python_version>'3'"], "none": []}
    script = wheels.fill_script(sets)
    downloads = [line for line in script.splitlines() if "pip download" in line]
    assert downloads == [
        "/tmp/venv/bin/pip download -q --dest /wheels mlflow==3.17.2",
        "/tmp/venv/bin/pip download -q --dest /wheels mlflow-skinny 'numpy>=2; python_version>'\"'\"'3'\"'\"''",
    ]
    assert script.startswith("set -eu") and "python3-venv" in script


def test_a_bed_gets_the_cache_only_when_it_is_filled_with_todays_list_and_answers(monkeypatch, tmp_path):
    monkeypatch.setattr(wheels, "FILLED", tmp_path / "filled")
    monkeypatch.setattr(wheels, "bridge_address", lambda: "172.17.0.1")
    monkeypatch.setattr(wheels, "answering", lambda port=wheels.PORT: True)
    assert wheels.pip_environment() == {}  # never filled
    (tmp_path / "filled").write_text("an older list\n")
    assert wheels.pip_environment() == {}
    (tmp_path / "filled").write_text(wheels.digest(wheels.requirement_sets()) + "\n")
    assert wheels.pip_environment() == {
        "PIP_FIND_LINKS": f"http://172.17.0.1:{wheels.PORT}/",
        "PIP_NO_INDEX": "1",
        "PIP_TRUSTED_HOST": f"172.17.0.1:{wheels.PORT}",
    }
    assert wheels.bed_pip_environment()["PIP_CERT"] == wheels.CA_BUNDLE
    assert wheels.bed_pip_environment()["PIP_COMPILE"] == "0"  # with the cache or without it
    monkeypatch.setattr(wheels, "answering", lambda port=wheels.PORT: False)
    assert wheels.pip_environment() == {}
    assert wheels.bed_pip_environment() == {"PIP_CERT": wheels.CA_BUNDLE, "PIP_COMPILE": "0"}


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel, as a build backend writes one."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: meshctl-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return wheel


@pytest.fixture
def served(tmp_path):
    """A folder of wheels served over HTTP as the cache serves DIR (Python's http.server)."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, server.server_address[1]
    server.shutdown()


def _pip_download(settings: dict, port: int, dest: Path, *requirements: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update({k: v.replace(f":{wheels.PORT}", f":{port}") for k, v in settings.items()})
    env["PIP_CONFIG_FILE"] = os.devnull  # no pip.conf of this machine's
    return subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "-d",
                           str(dest), *requirements], capture_output=True, text=True, env=env, timeout=120)  # fmt: skip


def test_pip_with_a_beds_settings_takes_the_cache_and_asks_no_index(served, tmp_path):
    folder, port = served
    _wheel(folder, "meshctl_cached", "1.0")
    _wheel(folder, "meshctl_cached", "1.1")
    settings = wheels.settings_for("127.0.0.1")
    got = _pip_download(settings, port, tmp_path / "got", "meshctl_cached")
    assert got.returncode == 0, got.stderr
    assert sorted(p.name for p in (tmp_path / "got").iterdir()) == ["meshctl_cached-1.1-py3-none-any.whl"]
    # Nothing else: a package the cache lacks is not looked for on an index (PyPI has this one).
    missing = _pip_download(settings, port, tmp_path / "none", "six")
    assert missing.returncode != 0 and "No matching distribution found for six" in missing.stderr, missing.stderr


def test_stop_ends_only_a_server_it_started(monkeypatch, tmp_path):
    pid_file = tmp_path / "pid"
    monkeypatch.setattr(wheels, "STARTED_BY_US", pid_file)
    assert wheels.stop(say=lambda _m: None) is False  # none recorded
    pid_file.write_text(f"{os.getpid()}\n")  # a PID that is not our server (this test's own)
    assert wheels.stop(say=lambda _m: None) is False
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(wheels.PORT + 100), "--bind", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        pid_file.write_text(f"{server.pid}\n")
        monkeypatch.setattr(wheels, "PORT", wheels.PORT + 100)
        deadline = time.monotonic() + 30
        while not wheels.answering(wheels.PORT) and time.monotonic() < deadline:  # started (exec'd) and listening
            time.sleep(0.1)
        assert wheels.stop(say=lambda _m: None) is True
        assert server.wait(timeout=10) == -15
    finally:
        server.kill()


def test_the_bridge_address_is_its_gateway_or_else_its_subnets_first_host():
    """An engine that names no gateway for the default bridge (Docker 28 here) left every bed
    without the cache: its nodes went to PyPI."""
    assert wheels.gateway_of("172.17.0.1|172.17.0.0/16 ") == "172.17.0.1"
    assert wheels.gateway_of("|172.17.0.0/16 ") == "172.17.0.1"
    assert wheels.gateway_of("|fd00::/64 |10.9.0.0/24 ") == "10.9.0.1"
    assert wheels.gateway_of("") is None and wheels.gateway_of("|nonsense ") is None


def test_the_lanes_wait_for_a_fill_under_way_and_go_on_without_it_after_the_limit(monkeypatch):
    """`make test` starts its lanes with the checks: each waits for the background fill, not forever."""
    monkeypatch.setattr(wheels.os, "geteuid", lambda: 0)
    said, now = [], [0.0]

    def sleep(seconds):
        now[0] += seconds

    answers = iter([False, False, True])
    ready = lambda: next(answers)  # noqa: E731
    assert wheels.wait_ready(60, step=5, say=said.append, ready=ready, clock=lambda: now[0], sleep=sleep)
    assert now[0] == 10 and said == ["wheel cache: ready after 10s"]
    said.clear()
    now[0] = 0.0
    assert not wheels.wait_ready(12, step=5, say=said.append, ready=lambda: False, clock=lambda: now[0], sleep=sleep)
    assert now[0] == 15 and said == ["wheel cache: not ready after 12s; the beds go to PyPI"]
    monkeypatch.setattr(wheels.os, "geteuid", lambda: 1000)  # not root: nothing fills it, nothing to wait for
    assert not wheels.wait_ready(600, ready=lambda: False, sleep=lambda s: pytest.fail("waited"))
