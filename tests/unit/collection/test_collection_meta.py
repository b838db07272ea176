"""The collection's metadata agrees with meshctl's (one version, every role and plugin shipped)."""

import re
from pathlib import Path

import yaml

from meshctl import __version__, resources

REPO = Path(__file__).resolve().parents[3]


def test_collection_version_is_meshctls():
    assert yaml.safe_load((REPO / "galaxy.yml").read_text())["version"] == __version__


def test_nothing_the_collection_needs_is_ignored_by_its_build():
    ignored = set(yaml.safe_load((REPO / "galaxy.yml").read_text())["build_ignore"])
    assert not {"roles", "plugins", "playbooks", "meta", "README.md"} & ignored


def test_collections_path_links_the_collection_root(tmp_path):
    root = resources.collections_path(tmp_path) / "ansible_collections" / "meshctl" / "mesh"
    assert (root / "plugins" / "filter" / "slurm_versions.py").is_file()
    assert (root / "roles" / "slurm" / "tasks" / "main.yml").is_file()
    assert resources.collections_path(tmp_path) == tmp_path  # a second call keeps the link


def exported_filters() -> set[str]:
    names = set()
    for path in (REPO / "plugins" / "filter").glob("*.py"):
        module = resources.plugin(f"filter.{path.stem}")
        names |= set(module.FilterModule().filters())
    return names


def test_the_collections_python_is_one_package_shared_by_the_cli_and_its_plugins():
    """meshctl imports the collection's Python as ansible_collections.meshctl.mesh (what Ansible
    imports): the filter's own import of module_utils and the CLI's are the same module object."""
    from meshctl import hardware

    checks = resources.plugin("filter.hw_checks")
    assert hardware.mesh_hw().__name__ == "ansible_collections.meshctl.mesh.plugins.module_utils.mesh_hw"
    assert checks.facts_problems is hardware.mesh_hw().facts_problems
    assert Path(hardware.mesh_hw().__file__).resolve() == (REPO / "plugins/module_utils/mesh_hw.py").resolve()


def test_roles_playbooks_and_scenarios_name_the_collections_content_by_fqcn():
    filters = exported_filters()
    assert {"apt_policy_version", "tailscale_join_action", "tailscale_ip4"} <= filters
    bare_filter = re.compile(r"(?:\|\s*|map\(')(" + "|".join(sorted(filters)) + r")\b")
    roles = "|".join(p.name for p in (REPO / "roles").iterdir() if p.is_dir())
    bare_role = re.compile(rf"(?:^\s*- role|_role:\n\s*name): ({roles})\s*(?:#.*)?$", re.M)
    short = []
    for folder in ("roles", "playbooks", "molecule"):
        for path in (REPO / folder).rglob("*"):
            if path.suffix not in (".yml", ".j2") or (path.name == "main.yml" and path.parent.name == "meta"):
                continue
            text = path.read_text()
            short += [f"{path.relative_to(REPO)}: filter {m}" for m in bare_filter.findall(text)]
            short += [f"{path.relative_to(REPO)}: role {m}" for m in bare_role.findall(text)]
            if re.search(r"^\s*mesh_hw_facts:", text, re.M):
                short.append(f"{path.relative_to(REPO)}: module mesh_hw_facts")
    assert short == []
