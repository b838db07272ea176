"""Every role's settings are checked: a role pulled in with `rolespec_validate: false`
(by a playbook or by another role) is one whose settings site.yml's first play checks
(mesh_base `tasks_from: settings`, `mesh_base_settings_roles`)."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
PREFIX = "meshctl.mesh."


def settings_roles() -> list[str]:
    for play in yaml.safe_load((REPO / "playbooks" / "site.yml").read_text()):
        for task in play.get("tasks") or []:
            listed = (task.get("vars") or {}).get("mesh_base_settings_roles")
            if listed:
                return listed
    raise AssertionError("site.yml checks no role's settings (mesh_base_settings_roles)")


def pulled_in_unvalidated(node, found: set[str]) -> set[str]:
    """Role names of every include_role/import_role under NODE with rolespec_validate: false."""
    if isinstance(node, dict):
        for key in ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role"):
            spec = node.get(key)
            if isinstance(spec, dict) and spec.get("rolespec_validate") is False:
                found.add(str(spec["name"]).removeprefix(PREFIX))
        for value in node.values():
            pulled_in_unvalidated(value, found)
    elif isinstance(node, list):
        for value in node:
            pulled_in_unvalidated(value, found)
    return found


def yaml_files() -> list[Path]:
    return sorted([*(REPO / "playbooks").rglob("*.yml"), *(REPO / "roles").glob("*/tasks/*.yml"),
                   *(REPO / "roles").glob("*/handlers/*.yml")])  # fmt: skip


def test_every_role_pulled_in_unvalidated_has_its_settings_checked():
    found: set[str] = set()
    for path in yaml_files():
        pulled_in_unvalidated(yaml.safe_load(path.read_text()), found)
    assert {"slurm", "power_save", "mesh_facts", "pod"} <= found  # the walk sees nested includes
    missing = sorted(found - set(settings_roles()))
    assert missing == [], f"pulled in with rolespec_validate: false, settings never checked: {missing}"


def test_every_listed_role_has_a_main_argument_spec():
    for role in settings_roles():
        spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
        # A role of settings only (mesh, slurm_defaults: no task) says them under `defaults`, which no
        # play validates by itself (every role of its family pulls it in).
        entry = "main" if (REPO / "roles" / role / "tasks").is_dir() else "defaults"
        assert "options" in spec["argument_specs"][entry], role


def test_the_walk_finds_a_role_pulled_in_unvalidated():
    tasks = [{"block": [{"ansible.builtin.include_role": {"name": "meshctl.mesh.x", "rolespec_validate": False}},
                        {"ansible.builtin.import_role": {"name": "meshctl.mesh.y"}}]}]  # fmt: skip
    assert pulled_in_unvalidated(tasks, set()) == {"x"}
