"""The callback meshctl.mesh.preload (plugins/callback/preload.py): it loads, in Ansible's main process,
every Jinja filter and test a worker of a meshctl run would otherwise load for itself, and knows every
other collection's plugin the roles and playbooks name."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from meshctl import resources

REPO = Path(__file__).resolve().parents[3]
FQCN = r"([a-z_]+\.[a-z_]+\.[a-z_0-9]+)"
# A Jinja plugin named by FQCN: a filter after a pipe or in map('...'), a test after `is` / `is not`
# or in select('...') / reject('...').
USES = {
    "filter": re.compile(rf"(?:\|[ \t]*|\bmap\([ \t]*['\"]){FQCN}"),
    "test": re.compile(rf"(?:\bis(?:[ \t]+not)?[ \t]+|\b(?:select|reject)\([ \t]*['\"]){FQCN}"),
}


def named_plugins() -> dict[str, set[str]]:
    """Every filter and test the roles and playbooks name by FQCN, by kind."""
    found: dict[str, set[str]] = {"filter": set(), "test": set()}
    roles, playbooks = REPO / "roles", REPO / "playbooks"
    for path in [*roles.rglob("*.yml"), *roles.rglob("*.j2"), *playbooks.rglob("*.yml")]:
        text = path.read_text()
        for kind, use in USES.items():
            found[kind].update(use.findall(text))
    return found


def test_every_other_collections_plugin_the_roles_name_is_preloaded_and_none_other():
    preload = resources.plugin("callback.preload")
    named = named_plugins()
    assert named["filter"] and any(name.startswith("meshctl.mesh.") for name in named["filter"])
    for kind in ("filter", "test"):
        others = {name for name in named[kind] if not name.startswith(("meshctl.mesh.", "ansible.builtin."))}
        assert others == set(preload.OTHERS[kind]), kind


SCRIPT = """
import json, sys
from ansible.plugins.loader import filter_loader, init_plugin_loader, test_loader
init_plugin_loader([sys.argv[1]])
from ansible_collections.meshctl.mesh.plugins.callback import preload
missed = preload.preload()
before = set(sys.modules)
names = json.loads(sys.argv[2])
for name in names["filter"]:
    filter_loader.get(name)
for name in names["test"]:
    test_loader.get(name)
print(json.dumps({"missed": missed, "own": preload.own_names("filter"), "imported": sorted(set(sys.modules) - before)}))
"""


def test_after_the_preload_no_plugin_a_task_names_imports_anything(tmp_path):
    """In a fresh process, as in ansible-playbook's: the preload, then every filter and test the roles
    name (and every one of the collection's own): nothing more is imported, so a forked worker has
    nothing left to load."""
    path = resources.collections_path(tmp_path / "collections")
    own = sorted(
        f"meshctl.mesh.{short}"
        for module in (REPO / "plugins" / "filter").glob("*.py")
        for short in resources.plugin(f"filter.{module.stem}").FilterModule().filters()
    )
    named = named_plugins()
    names = {"filter": sorted(named["filter"] | set(own)), "test": sorted(named["test"])}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(path), json.dumps(names)], capture_output=True,
                          text=True, check=True, cwd=tmp_path)  # fmt: skip
    said = json.loads(done.stdout.splitlines()[-1])
    assert said["missed"] == {}
    assert said["own"] == own  # the callback lists the collection's filters from its files
    assert said["imported"] == []


WARM = """
import json, sys
from ansible.plugins.loader import action_loader, connection_loader, init_plugin_loader, module_loader, shell_loader
init_plugin_loader([sys.argv[1]])
from ansible.module_utils.common.json import Direction, get_module_decoder, get_module_encoder
from ansible_collections.meshctl.mesh.plugins.callback import preload

class Task:
    action = sys.argv[2]
    collections = []

preload.warm()
preload.warm_task(Task())
before = set(sys.modules)
for loader in (module_loader, action_loader):  # a second search of the plugin folders would call this
    loader._get_paths_with_context = lambda *a, **k: (_ for _ in ()).throw(AssertionError("searched again"))
module = module_loader.find_plugin_with_context(Task.action, ".py", collection_list=[])
module_loader.find_plugin_with_context("ansible.legacy.stat", ".py")
action_loader.get(module.action_plugin or "ansible.legacy.normal", class_only=True)
connection_loader.get("ssh", class_only=True)
shell_loader.get("sh", class_only=True)
get_module_encoder("legacy", Direction.CONTROLLER_TO_MODULE)
get_module_decoder("legacy", Direction.MODULE_TO_CONTROLLER)
print(json.dumps({"resolved": module.resolved, "imported": sorted(set(sys.modules) - before)}))
"""


def test_after_a_tasks_warm_up_its_workers_lookups_search_and_import_nothing(tmp_path):
    """What a worker forked for a task looks up (its module and action plugin, a helper module, the
    connection and shell, the JSON profiles) is found resolved and imported: no search, no import."""
    path = resources.collections_path(tmp_path / "collections")
    for action in ("ansible.builtin.command", "ansible.builtin.copy", "meshctl.mesh.mesh_secret"):
        done = subprocess.run([sys.executable, "-c", WARM, str(path), action], capture_output=True, text=True,
                              check=False, cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, (action, done.stderr[-2000:])
        assert json.loads(done.stdout.splitlines()[-1]) == {"resolved": True, "imported": []}, action


PING = """from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={"data": {"type": "str", "default": "pong"}})
    module.exit_json(ping="from the kept payload")


if __name__ == "__main__":
    main()
"""


def ping(tmp_path: Path, cache: Path | None, data: str = "pong", umask: int = 0o022) -> str:
    """What ansible.builtin.ping answers in a run on this machine with the callback (and CACHE kept)."""
    book = [{"hosts": "localhost", "gather_facts": False,
             "tasks": [{"ansible.builtin.ping": {"data": data}, "register": "answer"}]}]  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(book))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MESHCTL_"))}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(resources.collections_path(tmp_path / "collections")),
               ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_CALLBACKS_ENABLED="meshctl.mesh.preload", ANSIBLE_PIPELINING="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "local-tmp"))  # fmt: skip
    if cache is not None:
        env["MESHCTL_ANSIBALLZ_CACHE"] = str(cache)
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    done = subprocess.run([playbook, "-i", "localhost,", "-c", "local", "play.yml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False, umask=umask)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["ping"]


def kept(cache: Path) -> list[Path]:
    return sorted(path for path in cache.glob("*/*") if not path.name.startswith("."))


def tamper(entry: Path) -> None:
    """Make the kept payload of ansible.builtin.ping answer PING's words: which payload a run sent."""
    import base64
    import dataclasses
    import io
    import pickle
    import zipfile

    payload = pickle.loads(entry.read_bytes())
    old, new = zipfile.ZipFile(io.BytesIO(base64.b64decode(payload.zip_data))), io.BytesIO()
    with zipfile.ZipFile(new, "w") as rewritten:
        for info in old.infolist():
            data = PING.encode() if info.filename == "ansible/modules/ping.py" else old.read(info)
            rewritten.writestr(info, data)
    entry.write_bytes(pickle.dumps(dataclasses.replace(payload, zip_data=base64.b64encode(new.getvalue()))))


def test_a_run_keeps_the_payloads_it_built_and_the_next_run_sends_them(tmp_path):
    cache = tmp_path / "cache"
    assert ping(tmp_path, cache, data="a-task-argument") == "a-task-argument"
    (entry,) = [path for path in kept(cache) if path.name.startswith("ansible.modules.ping-")]
    assert entry.name.endswith("-none")  # built without a debugger's or coverage's extension
    assert oct(cache.stat().st_mode & 0o777) == "0o700" and oct(entry.parent.stat().st_mode & 0o777) == "0o700"
    assert oct(entry.stat().st_mode & 0o777) == "0o600"
    assert all(b"a-task-argument" not in path.read_bytes() for path in kept(cache))  # no task's argument
    tamper(entry)
    assert ping(tmp_path, cache) == "from the kept payload"
    assert ping(tmp_path, None) == "pong"  # no folder named: nothing kept is read


def test_a_kept_payload_others_may_write_or_a_link_is_never_read(tmp_path):
    """Such an entry is not sent; the run's own build replaces it (a link replaced, never written through)."""
    cache = tmp_path / "cache"
    ping(tmp_path, cache)
    (entry,) = [path for path in kept(cache) if path.name.startswith("ansible.modules.ping-")]
    tamper(entry)
    entry.chmod(0o620)
    assert ping(tmp_path, cache) == "pong"
    assert oct(entry.stat().st_mode & 0o777) == "0o600" and ping(tmp_path, cache) == "pong"  # built again
    tamper(entry)
    elsewhere = tmp_path / "planted"
    entry.rename(elsewhere)
    entry.symlink_to(elsewhere)
    assert ping(tmp_path, cache) == "pong"
    assert not entry.is_symlink() and b"from the kept payload" in zip_of(elsewhere)
    tamper(entry)
    assert ping(tmp_path, cache) == "from the kept payload"
    cache.chmod(0o750)  # a folder others may enter: not used at all
    assert ping(tmp_path, cache) == "pong"


def zip_of(entry: Path) -> bytes:
    """The source of ping the kept payload ENTRY holds."""
    import base64
    import io
    import pickle
    import zipfile

    data = base64.b64decode(pickle.loads(entry.read_bytes()).zip_data)
    return zipfile.ZipFile(io.BytesIO(data)).read("ansible/modules/ping.py")


def test_under_a_umask_of_002_the_payloads_are_kept_private_all_the_same(tmp_path):
    cache = tmp_path / "cache"
    ping(tmp_path, cache, umask=0o002)
    (entry,) = [path for path in kept(cache) if path.name.startswith("ansible.modules.ping-")]
    assert oct(entry.stat().st_mode & 0o777) == "0o600" and oct(cache.stat().st_mode & 0o777) == "0o700"
    tamper(entry)
    assert ping(tmp_path, cache, umask=0o002) == "from the kept payload"


def test_a_playbook_with_its_own_library_keeps_no_payload(tmp_path):
    (tmp_path / "library").mkdir()
    ping(tmp_path, tmp_path / "cache")
    assert kept(tmp_path / "cache") == []


SEEN_POLL = """
import os
from ansible import constants
from ansible.plugins.callback import CallbackBase
from ansible.plugins.strategy import linear


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "seen_poll"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_play_start(self, play):
        # what the strategy's loop sleeps between its looks at the workers' results
        with open(os.environ["SEEN_POLL"], "w") as out:
            seen = (linear.C.DEFAULT_INTERNAL_POLL_INTERVAL, constants.DEFAULT_INTERNAL_POLL_INTERVAL)
            out.write(" ".join(map(repr, seen)))
"""


def poll_seen(tmp_path: Path, callbacks: str, config: str | None = None) -> list[float]:
    """The poll interval Ansible's strategy finds in force in a run with CALLBACKS (and ansible.cfg CONFIG)."""
    (tmp_path / "callbacks").mkdir(exist_ok=True)
    (tmp_path / "callbacks" / "seen_poll.py").write_text(SEEN_POLL)
    book = [{"hosts": "localhost", "gather_facts": False, "tasks": [{"ansible.builtin.meta": "noop"}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(book))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MESHCTL_"))}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(resources.collections_path(tmp_path / "collections")),
               ANSIBLE_CALLBACK_PLUGINS=str(tmp_path / "callbacks"), ANSIBLE_CALLBACKS_ENABLED=callbacks,
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "local-tmp"), SEEN_POLL=str(tmp_path / "seen"))  # fmt: skip
    env["ANSIBLE_CONFIG"] = str(tmp_path / "ansible.cfg")
    (tmp_path / "ansible.cfg").write_text(f"[defaults]\n{config or ''}\n")
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    done = subprocess.run([playbook, "-i", "localhost,", "-c", "local", "play.yml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [float(word) for word in (tmp_path / "seen").read_text().split()]


def test_the_main_process_polls_its_workers_every_hundredth_of_a_second_unless_configured(tmp_path):
    preload = resources.plugin("callback.preload")
    assert poll_seen(tmp_path, "seen_poll") == [0.001, 0.001]  # Ansible's own default, without the callback
    assert poll_seen(tmp_path, "meshctl.mesh.preload,seen_poll") == [preload.POLL_INTERVAL] * 2 == [0.01] * 2
    # an interval the configuration sets stands
    configured = "internal_poll_interval = 0.003"
    assert poll_seen(tmp_path, "meshctl.mesh.preload,seen_poll", configured) == [0.003, 0.003]


# A callback of the test's: counts the workers the run's strategy starts, one line each in $WORKERS.
COUNT_WORKERS = """
import os
from ansible.executor.process.worker import WorkerProcess
from ansible.plugins.callback import CallbackBase

_start = WorkerProcess.start


def start(self):
    with open(os.environ["WORKERS"], "a") as seen:
        seen.write(f"{self._task.get_name()} {self._host.name}\\n")
    return _start(self)


WorkerProcess.start = start


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "count_workers"
    CALLBACK_NEEDS_ENABLED = True
"""
# Each (name, task): the first three the main process decides (a skip without a worker); the others go
# to a worker: a connection variable, a loop, a lookup, a condition that is true, one that fails.
SKIPS = [
    ("decided", {"ansible.builtin.command": "true", "when": "flag | bool", "register": "decided"}),
    ("decided of two", {"ansible.builtin.command": "true", "when": ["inventory_hostname != 'x'", "flag"],
                        "register": "two"}),
    ("decided, no_log", {"ansible.builtin.command": "true", "when": "flag", "no_log": True, "register": "hidden"}),
    ("connection", {"ansible.builtin.command": "true", "when": "ansible_connection == 'ssh'"}),
    ("loop", {"ansible.builtin.command": "true", "loop": [1, 2], "when": "item > 5"}),
    ("lookup", {"ansible.builtin.command": "true",
                "when": "lookup('ansible.builtin.env', 'NO_SUCH_VARIABLE') | length > 0"}),
    ("true", {"ansible.builtin.command": "true", "when": "not flag", "changed_when": False}),
    ("registered", {"ansible.builtin.debug": {"msg": "{{ [decided, two, hidden] }}"}}),
    ("undefined", {"ansible.builtin.command": "true", "when": "no_such_variable", "ignore_errors": True}),
]  # fmt: skip


def skips_run(tmp_path: Path, in_workers: bool) -> tuple[dict, list[str]]:
    """Each task's result on each host (the json callback's, less the times), and the workers started,
    in a run of SKIPS on two hosts with the callback (IN_WORKERS: every skip decided in a worker)."""
    (tmp_path / "callbacks").mkdir(exist_ok=True)
    (tmp_path / "callbacks" / "count_workers.py").write_text(COUNT_WORKERS)
    book = [{"hosts": "all", "gather_facts": False, "vars": {"flag": False},
             "tasks": [{"name": name, **task} for name, task in SKIPS]}]  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(book, sort_keys=False))
    workers = tmp_path / ("in-workers" if in_workers else "in-main")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MESHCTL_"))}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(resources.collections_path(tmp_path / "collections")),
               ANSIBLE_CALLBACK_PLUGINS=str(tmp_path / "callbacks"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACKS_ENABLED="meshctl.mesh.preload,count_workers", ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_LOCAL_TEMP=str(tmp_path / "local-tmp"),
               WORKERS=str(workers))  # fmt: skip
    if in_workers:
        env["MESHCTL_SKIP_IN_WORKERS"] = "1"
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    done = subprocess.run([playbook, "-i", "h1,h2,", "-c", "local", "play.yml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    tasks = json.loads(done.stdout)["plays"][0]["tasks"]
    results = {task["task"]["name"]: task["hosts"] for task in tasks}
    for hosts in results.values():
        for result in hosts.values():
            for timed in ("start", "end", "delta"):
                result.pop(timed, None)
    return results, sorted(workers.read_text().splitlines())


def test_a_skip_the_main_process_can_decide_starts_no_worker_and_is_reported_the_same(tmp_path):
    in_main, forked = skips_run(tmp_path, in_workers=False)
    in_workers, every = skips_run(tmp_path, in_workers=True)
    assert in_main == in_workers  # the same results, skips, registered variables and failure
    assert in_main["decided"]["h1"]["skipped"] is True and in_main["decided"]["h1"]["false_condition"] == "flag | bool"
    assert in_main["decided, no_log"]["h2"].get("censored") and in_main["undefined"]["h1"]["failed"] is True
    assert "Conditional result was False" in json.dumps(in_main["registered"]["h1"]["msg"])
    decided = {name for name, _task in SKIPS[:3]}
    assert every == sorted(f"{name} {host}" for name, _task in SKIPS for host in ("h1", "h2"))
    assert forked == sorted(line for line in every if line.rsplit(" ", 1)[0] not in decided)
