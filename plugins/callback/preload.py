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
  - meshctl enables it for each of its runs. In your own playbooks, add C(meshctl.mesh.preload) to
    C(callbacks_enabled).
version_added: 0.1.0
requirements:
  - enabled in C(callbacks_enabled) (ansible.cfg) or C(ANSIBLE_CALLBACKS_ENABLED)
"""

import importlib
import pkgutil

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import filter_loader, test_loader
from ansible.utils.display import Display

display = Display()

COLLECTION = "meshctl.mesh"
# Other collections' Jinja plugins the roles and playbooks use, by kind (tests/unit/collection/test_preload.py
# checks that every one they name is here).
OTHERS = {
    "filter": ("ansible.utils.ipaddr", "ansible.utils.ipv4"),
    "test": ("ansible.utils.in_network", "ansible.utils.ipv4_address"),
}
LOADERS = {"filter": (filter_loader, "FilterModule", "filters"), "test": (test_loader, "TestModule", "tests")}


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


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "meshctl.mesh.preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        preload()
