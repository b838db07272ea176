"""The collection's metadata agrees with meshctl's (one version, every role and plugin shipped)."""

from pathlib import Path

import yaml

from meshctl import __version__, resources

REPO = Path(__file__).resolve().parents[2]


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


def test_roles_name_their_own_roles_and_plugins_by_fqcn():
    short = []
    for path in (REPO / "roles").rglob("*.yml"):
        text = path.read_text()
        for bare in (" name: mesh_facts\n", "  mesh_hw_facts:\n", "| apt_policy_version", "| tailscale_status"):
            if bare in text:
                short.append(f"{path.relative_to(REPO)}: {bare.strip()}")
    assert short == []
