"""Every role's settings are checked: a role pulled in with `rolespec_validate: false`
(by a playbook or by another role) is one whose settings site.yml's first play checks
(role mesh_settings, which reads the argument specs of every role of the collection)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
PREFIX = "meshctl.mesh."


def settings_roles() -> list[str]:
    """What role mesh_settings checks: every role beside it with an argument spec (its glob)."""
    assert "meshctl.mesh.role_settings" in (REPO / "roles" / "mesh_settings" / "tasks" / "main.yml").read_text()
    return sorted(path.parent.parent.name for path in (REPO / "roles").glob("*/meta/argument_specs.yml"))


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


def test_the_lookup_merges_main_or_defaults_and_refuses_a_name_two_roles_declare(tmp_path):
    from ansible_collections.meshctl.mesh.plugins.lookup.role_settings import merged_options

    def role(name: str, specs: dict, tasks: bool = True) -> None:
        (tmp_path / name / "meta").mkdir(parents=True)
        (tmp_path / name / "meta" / "argument_specs.yml").write_text(yaml.safe_dump({"argument_specs": specs}))
        if tasks:
            (tmp_path / name / "tasks").mkdir()

    role("a", {"main": {"options": {"a_port": {"type": "int"}}}, "other": {"options": {"a_x": {"type": "str"}}}})
    role("b_defaults", {"defaults": {"options": {"b_flag": {"type": "bool"}}}}, tasks=False)
    role("c", {"main": {"short_description": "no settings"}})
    (tmp_path / "no_spec" / "tasks").mkdir(parents=True)
    assert merged_options(tmp_path) == {"a_port": {"type": "int"}, "b_flag": {"type": "bool"}}
    role("d", {"main": {"options": {"a_port": {"type": "str"}}}})
    with pytest.raises(ValueError, match="a_port is declared by roles a and d"):
        merged_options(tmp_path)


def test_the_lookup_reads_every_role_of_the_collection():
    from ansible_collections.meshctl.mesh.plugins.lookup.role_settings import ROLES, merged_options

    assert ROLES.resolve() == (REPO / "roles").resolve()
    merged = merged_options(ROLES)
    names = ("mesh_pod", "slurm_ready_timeout", "tailscale_port", "mlflow_auth", "job_users_gid", "slurm_build_major")
    for name in names:
        assert name in merged, name
