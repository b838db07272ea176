"""The callback meshctl.mesh.preload (plugins/callback/preload.py): it loads, in Ansible's main process,
every Jinja filter and test a worker of a meshctl run would otherwise load for itself, and knows every
other collection's plugin the roles and playbooks name."""

import json
import re
import subprocess
import sys
from pathlib import Path

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
