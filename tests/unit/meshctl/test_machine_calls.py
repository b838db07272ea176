"""A node's machine is created, started, stopped, replaced and given back in one place,
plugins/module_utils/mesh_machine.py, whoever asks (meshctl, the head's relaunch service through
meshctl, Slurm's power saving through meshctl-power): the walk below finds any other caller of a
provider client's create, start, stop or delete, and the module's functions are shown on a client
that records what it was asked."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from meshctl import cloud, core

REPO = Path(__file__).resolve().parents[3]
MACHINE = REPO / "plugins" / "module_utils" / "mesh_machine.py"
# What a provider client is asked to create, start, stop, replace or delete a machine with.
ACTIONS = {"launch", "start", "stop", "terminate", "start_or_replace", "prepare_start"}
# The same words on what is no provider client: meshctl's own wrappers (``cloud.launch`` and
# ``cloud.terminate`` call mesh_machine, checked below; ``launch_op.launch`` is `meshctl launch`'s
# operation), a thread, the progress display, the test bed's caches, a regex match.
NOT_A_CLIENT = {"cloud", "launch_op", "mesh_machine", "core.mesh_machine", "self._thread", "self._rich", "cache",
                "wheels", "section"}  # fmt: skip


def python_files() -> list[Path]:
    files = [*REPO.glob("meshctl/**/*.py"), *REPO.glob("plugins/**/*.py"), *REPO.glob("bench/*.py"),
             *REPO.glob("scripts/*.py"), *REPO.glob("examples/**/*.py")]  # fmt: skip
    files += [p for p in REPO.glob("roles/*/files/*") if p.is_file() and p.read_bytes()[:2] == b"#!"
              and b"python" in p.read_bytes().split(b"\n", 1)[0]]  # fmt: skip
    return sorted(files)


def callers(path: Path, root: Path = REPO) -> list[str]:
    """Every use of a client action in PATH on a receiver that may be a provider client: a call, or
    the method handed on to one (``call(api.stop, id)``); an attribute merely read is none
    (``UnicodeDecodeError.start``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        for used in (node.func, *node.args, *(k.value for k in node.keywords)):
            if isinstance(used, ast.Attribute) and used.attr in ACTIONS and ast.unparse(used.value) not in NOT_A_CLIENT:
                found.append((used.lineno, f"{path.relative_to(root)}:{used.lineno}: {ast.unparse(used)}"))
    return [line for _number, line in sorted(found)]


def test_no_other_module_asks_a_provider_to_create_start_stop_or_delete_a_machine():
    clients = set(REPO.glob("plugins/module_utils/mesh_cloud_*.py"))  # a client's own steps (Runpod's replace)
    found = [line for path in python_files() if path != MACHINE and path not in clients for line in callers(path)]
    assert found == [], f"ask plugins/module_utils/mesh_machine.py instead: {found}"
    # The walk reads the head's program and sees what it is after.
    assert REPO / "roles" / "power_save" / "files" / "meshctl-power" in python_files()
    assert len(callers(MACHINE)) >= 6


def test_the_walk_finds_a_direct_call_and_a_method_handed_on(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(
        "api.terminate(i)\ncall(account(m).stop, i)\nwith_retry(fn=client.launch)\nself._thread.start()\n"
        "text[: exc.start]\n"
    )
    assert [line.split(": ", 1)[1] for line in callers(sneaky, tmp_path)] == [
        "api.terminate", "account(m).stop", "client.launch"]  # fmt: skip


def test_meshctls_launch_and_terminate_go_through_the_module():
    import inspect

    assert "core.mesh_machine.create(" in inspect.getsource(cloud.launch)
    assert "core.mesh_machine.give_back" in inspect.getsource(cloud.terminate)


class Recorder:
    """A client that records what it is asked; CREATE: the errors its launch raises first, in order."""

    name = "fake"

    def __init__(self, create=(), keeps_volume=False, listed=()):
        self.asked, self.create_errors, self.listed = [], list(create), list(listed)
        self.capabilities = type("Caps", (), {"keeps_volume": keeps_volume})()

    def launch(self, request):
        self.asked.append(("launch", request["name"]))
        if self.create_errors:
            raise self.create_errors.pop(0)
        return "i-new"

    def list(self):
        self.asked.append(("list",))
        return self.listed

    def __getattr__(self, action):
        if action not in ACTIONS | {"spec"}:
            raise AttributeError(action)

        def record(*args):
            self.asked.append((action, *args))
            return {"start_or_replace": "i-moved", "prepare_start": True, "spec": {"instance_type": "t"}}.get(action)

        return record


def test_a_create_that_failed_upstream_and_made_nothing_is_sent_again():
    CloudError = core.mesh_cloud.CloudError
    client = Recorder(create=[CloudError("bad gateway", status=502), CloudError("bad gateway", status=502)])
    slept = []
    assert core.mesh_machine.create(client, {"name": "gpu1", "type": "t"}, sleep=slept.append) == "i-new"
    assert slept == [5, 10] and [a[0] for a in client.asked] == ["launch", "list", "launch", "list", "launch"]


def test_a_create_that_may_have_made_the_machine_says_so_and_is_not_sent_again():
    CloudError = core.mesh_cloud.CloudError
    made = {"id": "i-7", "name": "gpu1", "status": "booting"}
    client = Recorder(create=[CloudError("bad gateway", status=502)], listed=[made])
    with pytest.raises(CloudError, match="now has an instance named gpu1: i-7") as raised:
        core.mesh_machine.create(client, {"name": "gpu1", "type": "t"}, sleep=lambda _s: None)
    assert raised.value.kind == "created" and [a[0] for a in client.asked] == ["launch", "list"]


def test_a_pods_start_gives_it_its_start_command_and_may_move_it():
    client = Recorder(keeps_volume=True)
    now, said = core.mesh_machine.start(client, "pod-1", "gpu1", ["/workspace/.meshctl/rejoin"])
    assert now == "i-moved" and said == "start command set to /workspace/.meshctl/rejoin"
    assert client.asked == [("prepare_start", "pod-1", ["/workspace/.meshctl/rejoin"]),
                            ("start_or_replace", "pod-1", "gpu1", ["/workspace/.meshctl/rejoin"])]  # fmt: skip
    plain = Recorder()
    assert core.mesh_machine.start(plain, "i-1", "gpu1", None) == ("i-1", "")
    assert plain.asked == [("start", "i-1")]


def test_giving_back_by_name_deletes_every_live_machine_of_that_name_only():
    listed = [
        {"id": "a", "name": "h100-1", "status": "running"},
        {"id": "b", "name": "h100-1", "status": "terminated"},
        {"id": "c", "name": "h100-2", "status": "running"},
        {"id": "d", "name": "h100-1", "status": "booting"},
    ]
    client = Recorder(listed=listed)
    assert core.mesh_machine.give_back_named(client, "h100-1") == ["a", "d"]
    assert client.asked == [("list",), ("terminate", "a"), ("terminate", "d")]
