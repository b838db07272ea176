# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE)
"""Load the Jinja filters and tests the mesh's roles use in Ansible's main process, before it forks."""

from __future__ import annotations

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Load the roles' Jinja filters and tests once per run, before Ansible forks its workers
description:
  - Ansible forks a worker process for every task on every host. A worker that templates with a filter
    or test its parent never loaded imports that plugin's file itself (a collection's from source, with
    no bytecode), and loads Ansible's own filter and test files, and all of that is lost when the worker
    exits. So every task of a run paid for it again.
  - This callback loads them once, in the main process at the start of the playbook; every worker forked
    after that finds them loaded. It changes nothing a task does or reports.
  - It loads Ansible's own filters and tests, every filter and test of this collection, and the ones of
    other collections the roles use (C(ansible.utils)'s address filters and tests). One that cannot be
    loaded is skipped (its task loads it, as without this callback).
  - At each task's start, still in the main process and before the task's workers are forked, it
    resolves what each of them would look up again (the task's module and action plugin, the modules
    Ansible's own action plugins run (C(stat), C(file), C(copy)), the connection, shell and become
    plugins, and the JSON profiles results are read with). A worker that finds them resolved and
    imported skips the search of the plugin folders (about a sixth of its own CPU for a
    C(command) task over SSH).
  - Where C(MESHCTL_ANSIBALLZ_CACHE) names a folder, the modules' payloads Ansible builds for its
    workers (each module with the module_utils it imports, zipped, built once per run, about a sixth
    of a CPU-second each) are kept there between runs, under a key of what they are built from
    (ansible-core's version and location, every collection's manifest or, without one, its modules'
    and module_utils' contents, the configured module paths). A run starts with the payloads of its
    key and adds the ones it built. The folder is the user's alone (0700) and is used only then;
    an entry is read only if it is a file of the user's that no one else may write, never through a
    link. A run whose playbook folder has its own C(library) or C(module_utils) keeps no payload.
    Payloads hold no task's arguments.
  - Ansible's main process polls its workers' results every C(internal_poll_interval) seconds, 0.001
    by default, and while a task runs (a package install, a wait on a daemon) that loop alone takes
    about a tenth of a CPU core of the control machine. This callback makes it 0.01 s, unless the Ansible
    configuration sets C(internal_poll_interval) itself (that setting stands). A task's result is
    then seen at most a hundredth of a second later.
  - A task whose C(when) is false for a host is skipped without a worker; the main process decides the
    condition itself, with the variables the worker would have, and reports the same skip (the same
    result, callbacks and registered variable). A worker costs a fork of the main process (about 25
    milliseconds of the control machine, more in a large run), and a third of a converge's task
    results are skips. The worker still decides where the main process cannot decide as it would, for a
    task with a loop (decided per item) or C(delegate_to), a condition that names a connection variable
    (the worker adds those), calls a lookup, warns, fails, or is true. Set
    C(MESHCTL_SKIP_IN_WORKERS=1) to have every skip decided in a worker, as without this callback.
  - meshctl enables it for each of its runs. In your own playbooks, add C(meshctl.mesh.preload) to
    C(callbacks_enabled).
version_added: 0.1.0
requirements:
  - enabled in C(callbacks_enabled) (ansible.cfg) or C(ANSIBLE_CALLBACKS_ENABLED)
"""

import hashlib
import importlib
import os
import pkgutil
import re
import stat
import sys

from ansible import constants
from ansible.module_utils.common.json import Direction, get_module_decoder, get_module_encoder
from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import (
    action_loader,
    become_loader,
    connection_loader,
    filter_loader,
    module_loader,
    shell_loader,
    test_loader,
)
from ansible.utils.display import Display

# The variable naming the folder the modules' payloads are kept in between runs (unset: none kept).
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_payloads import CACHE_VARIABLE

display = Display()

COLLECTION = "meshctl.mesh"
# Other collections' Jinja plugins the roles and playbooks use, by kind (tests/unit/collection/test_preload.py
# checks that every one they name is here).
OTHERS = {
    "filter": ("ansible.utils.ipaddr", "ansible.utils.ipv4"),
    "test": ("ansible.utils.in_network", "ansible.utils.ipv4_address"),
}
LOADERS = {"filter": (filter_loader, "FilterModule", "filters"), "test": (test_loader, "TestModule", "tests")}
# What every worker looks up whatever its task: the modules Ansible's own action plugins run (copy,
# template and the like stat, copy and set files), the connection, shell and become plugins meshctl's
# runs and Molecule's use, and the JSON profiles of module arguments and results.
HELPER_MODULES = ("ansible.legacy.stat", "ansible.legacy.file", "ansible.legacy.copy")
PLUGINS = ((connection_loader, ("ssh", "local")), (shell_loader, ("sh",)), (become_loader, ("sudo", "su")))
PROFILES = ("legacy", "modern")
# Ansible's own payload cache of a run, inside its private temporary folder (executor/module_common.py),
# and the end of the names of payloads built without a debugger or coverage extension.
RUN_CACHE = "ansiballz_cache"
PLAIN = "-none"
# Seconds between the main process's looks at its workers' results, where the configuration sets none
# (Ansible's default, 0.001 s, spends a tenth of a core of the control machine while a task runs:
# docs/benchmarks.md, "The control machine's Ansible").
POLL_INTERVAL = 0.01
POLL_SETTING = "DEFAULT_INTERNAL_POLL_INTERVAL"


def own_names(kind: str) -> list[str]:
    """Every filter (or test) of this collection, by FQCN, from its plugin files."""
    namespace, name = COLLECTION.split(".")
    try:
        package = importlib.import_module(f"ansible_collections.{namespace}.{name}.plugins.{kind}")
    except ImportError:
        return []  # the collection has none of this kind
    _loader, class_name, method = LOADERS[kind]
    names = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        names += [f"{COLLECTION}.{short}" for short in getattr(getattr(module, class_name)(), method)()]
    return sorted(names)


def preload() -> dict[str, list[str]]:
    """Load Ansible's own Jinja plugins, this collection's and OTHERS; return what could not be loaded."""
    missed: dict[str, list[str]] = {}
    for kind, (loader, _class_name, _method) in LOADERS.items():
        for _plugin in loader.all():  # Ansible's own (and any on the configured plugin paths)
            pass
        try:
            names = own_names(kind) + list(OTHERS[kind])
        except Exception as exc:  # a broken plugin file: its tasks will say so, not this callback
            display.vvv(f"meshctl.mesh.preload: {kind} plugins of {COLLECTION} not listed: {exc}")
            names = list(OTHERS[kind])
        for name in names:
            try:
                loader.get(name)
            except Exception as exc:
                missed.setdefault(kind, []).append(name)
                display.vvv(f"meshctl.mesh.preload: {kind} {name} not loaded: {exc}")
    return missed


def warm() -> None:
    """Resolve and import, once per run, what every worker looks up whatever its task."""
    for name in HELPER_MODULES:
        for suffix in ("", ".py"):
            _quietly(module_loader.find_plugin_with_context, name, suffix)
    for loader, names in PLUGINS:
        for name in names:
            _quietly(loader.get, name, class_only=True)
    for profile in PROFILES:
        for direction in Direction:
            _quietly(get_module_encoder, profile, direction)
            _quietly(get_module_decoder, profile, direction)


def calm_polling(seconds: float = POLL_INTERVAL) -> float:
    """Make the main process poll its workers every SECONDS, unless the configuration sets the interval
    (ansible.cfg's internal_poll_interval): the strategies read it from ansible.constants at each
    look. Returns the interval in force."""
    value, origin = constants.config.get_config_value_and_origin(POLL_SETTING)
    if origin != "default":
        return float(value)
    setattr(constants, POLL_SETTING, seconds)
    return seconds


def warm_task(task) -> None:
    """Resolve, in the main process, the module and the action plugin a worker forked for TASK looks up
    (ansible's TaskExecutor and ActionBase._configure_module): the plugin loaders keep what they found,
    and every worker forked afterwards inherits it."""
    action, collections = getattr(task, "action", None), getattr(task, "collections", None)
    if not isinstance(action, str) or not action:
        return
    module = _quietly(module_loader.find_plugin_with_context, action, collection_list=collections)
    _quietly(module_loader.find_plugin_with_context, action, ".py", collection_list=collections)
    if module is not None and module.resolved and module.action_plugin:
        handler = module.action_plugin
    elif _quietly(action_loader.has_plugin, action, collection_list=collections):
        handler = action
    else:
        handler, collections = "ansible.legacy.normal", None
    _quietly(action_loader.get, handler, class_only=True, collection_list=collections)


def payload_key(collection_paths) -> str:
    """What a module's payload is built from, as one name: ansible-core's version and location, every
    collection on COLLECTION_PATHS (its MANIFEST.json, or its modules' and module_utils' files), and
    the configured module and module_utils paths."""
    import ansible
    from ansible import constants as C
    from ansible.release import __version__

    digest = hashlib.sha256(f"{__version__}\0{os.path.dirname(ansible.__file__)}\0{sys.version_info[:2]}".encode())
    for configured in (C.DEFAULT_MODULE_PATH, C.DEFAULT_MODULE_UTILS_PATH):
        digest.update(repr(configured).encode())
    for root in collection_paths:
        base = os.path.join(root, "ansible_collections")
        for namespace in sorted(_names(base)):
            for name in sorted(_names(os.path.join(base, namespace))):
                folder = os.path.join(base, namespace, name)
                digest.update(f"\0{folder}\0".encode())
                manifest = os.path.join(folder, "MANIFEST.json")
                if os.path.isfile(manifest):
                    with open(manifest, "rb") as handle:
                        digest.update(handle.read())
                    continue
                for kind in ("modules", "module_utils"):
                    for top, dirs, files in os.walk(os.path.join(folder, "plugins", kind)):
                        dirs.sort()
                        for file in sorted(files):
                            if file.endswith(".py"):
                                with open(os.path.join(top, file), "rb") as handle:
                                    digest.update(f"{top}/{file}\0".encode() + handle.read())
    return digest.hexdigest()[:32]


def _names(folder: str) -> list[str]:
    try:
        return [entry.name for entry in os.scandir(folder) if entry.is_dir()]
    except OSError:
        return []


def private_folder(path: str) -> bool:
    """PATH is a folder (not a link) of this user's that no one else may enter."""
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(found.st_mode) and found.st_uid == os.geteuid() and not found.st_mode & 0o077


def read_private(path: str, others_may_write: bool = False) -> bytes | None:
    """PATH's bytes if it is a file of this user's that no one else may write (OTHERS_MAY_WRITE: in a
    folder no one else may enter), read without following a link; else None."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(handle, "rb") as opened:
        found = os.fstat(opened.fileno())
        if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid():
            return None
        if found.st_mode & 0o022 and not others_may_write:
            return None
        return opened.read()


def write_new(folder: str, name: str, data: bytes) -> None:
    """NAME in FOLDER holds DATA, written whole (a temporary file renamed), never through a link."""
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.part")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(handle, "wb") as opened:
        opened.write(data)
    os.replace(temporary, os.path.join(folder, name))


class PayloadCache:
    """The modules' payloads of runs with the same key, kept in CACHE_VARIABLE's folder."""

    def __init__(self, root: str, key: str, run_cache: str):
        self.folder = os.path.join(root, key)
        self.run_cache = run_cache
        self.restored: set[str] = set()

    @classmethod
    def for_run(cls, playbook) -> PayloadCache | None:
        """The cache this run uses, or None (none asked for, the folder not private, a playbook's own
        modules beside it)."""
        root = os.environ.get(CACHE_VARIABLE, "").strip()
        if not root or not os.path.isabs(root):
            return None
        basedir = getattr(playbook, "_basedir", None) or ""
        if basedir and any(os.path.exists(os.path.join(basedir, own)) for own in ("library", "module_utils")):
            return None
        from ansible import constants as C
        from ansible.utils.collection_loader import AnsibleCollectionConfig

        os.makedirs(root, mode=0o700, exist_ok=True)
        if not private_folder(root):
            display.vvv(f"meshctl.mesh.preload: {root} is not a folder of this user's alone: no payload kept")
            return None
        cache = cls(root, payload_key(AnsibleCollectionConfig.collection_paths),
                    os.path.join(C.DEFAULT_LOCAL_TMP, RUN_CACHE))  # fmt: skip
        os.makedirs(cache.folder, mode=0o700, exist_ok=True)
        return cache if private_folder(cache.folder) else None

    def restore(self) -> None:
        """Put the kept payloads where this run's workers look for them."""
        os.makedirs(self.run_cache, exist_ok=True)
        for entry in os.scandir(self.folder):
            if entry.name.startswith(".") or not entry.name.endswith(PLAIN):
                continue
            data = read_private(entry.path)
            if data is not None:
                write_new(self.run_cache, entry.name, data)
                self.restored.add(entry.name)

    def keep(self) -> None:
        """Keep the payloads this run built."""
        if not private_folder(os.path.dirname(self.run_cache)):
            return
        try:
            entries = list(os.scandir(self.run_cache))
        except OSError:
            return
        for entry in entries:
            if entry.name in self.restored or not entry.name.endswith(PLAIN) or entry.name.startswith("."):
                continue
            # Written by this run's workers in Ansible's private temporary folder (0700), with their
            # umask (group-writable under a umask of 002): kept private (0600).
            data = read_private(entry.path, others_may_write=True)
            if data is not None:
                write_new(self.folder, entry.name, data)


# The variable that has every skip decided in a worker, as Ansible does without this callback.
SKIP_IN_WORKERS = "MESHCTL_SKIP_IN_WORKERS"
# What a worker adds to a task's variables before it decides the task's condition (its connection's
# settings: play_context.update_vars, and the task's search path and delegation): a condition that names
# one is left to the worker, which has them.
WORKER_NAMES = frozenset(
    {name for names in constants.MAGIC_VARIABLE_MAPPING.values() for name in names}
    | {"ansible_search_path", "ansible_delegated_vars", "ansible_delegated_host"}
)
# Calls whose answer may change between two evaluations, or that act (a lookup runs on the control machine):
# a condition with one is decided once, in the worker.
ONCE_ONLY = re.compile(r"\b(?:lookup|query|q|now)\s*\(")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def decidable(task) -> bool:
    """Whether the main process may decide TASK's condition as its worker would: a condition, no loop
    (the worker decides per item), no delegation, and no condition that names what only the worker has
    or calls what must run once."""
    conditions = getattr(task, "when", None)
    if not conditions or getattr(task, "loop_with", None) or getattr(task, "loop", None) is not None:
        return False
    if getattr(task, "delegate_to", None) or getattr(task, "action", None) in constants._ACTION_META:
        return False
    for condition in conditions:
        if isinstance(condition, bool):
            continue
        if not isinstance(condition, str):
            return False
        text = str(condition)
        if ONCE_ONLY.search(text) or WORKER_NAMES.intersection(NAME.findall(text)):
            return False
    return True


def skip_result(task, task_vars, loader) -> dict | None:
    """The result a worker would report for TASK skipped by its condition, decided here; None where the
    worker must decide (the condition is true, or it warned or failed here: the worker says so)."""
    from ansible._internal._display_utils import DeferredWarningContext
    from ansible._internal._templating._engine import TemplateEngine

    if not decidable(task):
        return None
    context: dict = {}
    try:
        with DeferredWarningContext(variables=task_vars) as warnings:
            kept = task._resolve_conditional(task.when, task_vars, result_context=context)
        if kept or warnings.get_warnings() or warnings.get_deprecation_warnings():
            return None
        result = dict(changed=False, skipped=True, skip_reason="Conditional result was False") | context
        task.update_result_no_log(TemplateEngine(loader=loader, variables=task_vars), result)
    except Exception as exc:
        display.vvv(f"meshctl.mesh.preload: the condition of {task.get_name()!r} left to its worker: {exc}")
        return None
    return result


def skip_without_a_worker(queue_task):
    """StrategyBase._queue_task, deciding a skip in the main process where it can (skip_result): the
    strategy then reads the result from its results queue as a worker's, with the same callbacks."""

    def _queue_task(self, host, task, task_vars, play_context):
        result = skip_result(task, task_vars, self._loader)
        if result is None:
            return queue_task(self, host, task, task_vars, play_context)
        from ansible.executor.task_result import _RawTaskResult

        self._queued_task_cache[(host.name, task._uuid)] = {
            "host": host, "task": task, "task_vars": task_vars, "play_context": play_context}  # fmt: skip
        self._tqm.send_callback("v2_runner_on_start", host, task)
        self._final_q.send_task_result(
            _RawTaskResult(host=host, task=task, return_data=result, task_fields=task.dump_attrs()))  # fmt: skip
        self._pending_results += 1
        return None

    _queue_task.meshctl_skips = True
    return _queue_task


def skip_in_main() -> bool:
    """Have every strategy decide the skips it can in the main process (not when SKIP_IN_WORKERS is set);
    True if it does."""
    from ansible.plugins.strategy import StrategyBase

    if os.environ.get(SKIP_IN_WORKERS, "").strip() not in ("", "0"):
        return False
    if not getattr(StrategyBase._queue_task, "meshctl_skips", False):
        StrategyBase._queue_task = skip_without_a_worker(StrategyBase._queue_task)
    return True


def _quietly(function, *args, **kwargs):
    """FUNCTION's answer, or None where it fails: the worker then meets the failure and says it."""
    try:
        return function(*args, **kwargs)
    except Exception as exc:
        display.vvv(f"meshctl.mesh.preload: {getattr(function, '__name__', function)}{args}: {exc}")
        return None


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "meshctl.mesh.preload"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.payloads: PayloadCache | None = None

    def v2_playbook_on_start(self, playbook):
        _quietly(calm_polling)
        _quietly(skip_in_main)
        preload()
        warm()
        self.payloads = _quietly(PayloadCache.for_run, playbook)
        if self.payloads is not None:
            _quietly(self.payloads.restore)

    def v2_playbook_on_stats(self, stats):
        if self.payloads is not None:
            _quietly(self.payloads.keep)

    def v2_playbook_on_task_start(self, task, is_conditional):
        warm_task(task)

    def v2_playbook_on_handler_task_start(self, task):
        warm_task(task)
