"""site.yml checks the settings of every role of the collection once per node (role mesh_settings)
and imports the roles without their own validation task: a real ansible-playbook run on the
control machine (no nodes); the roles checked are found, not listed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from meshctl import resources

BIN = Path(sys.executable).parent
PLAY = """
- name: Check settings
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Check the settings of every role
      ansible.builtin.import_role:
        name: meshctl.mesh.mesh_settings
        rolespec_validate: false
"""


def check(tmp_path, settings: dict) -> subprocess.CompletedProcess:
    (tmp_path / "play.yml").write_text(PLAY)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(resources.collections_path(tmp_path / "collections")),
               ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER="auto_silent")  # fmt: skip
    argv = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "play.yml", "-e", json.dumps(settings)]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)


def test_sound_settings_pass(tmp_path):
    done = check(tmp_path, {"mesh_base_apt_cache_valid_time": 60, "slurm_accounting": True, "slurm_ready_timeout": 30})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_a_wrong_type_is_refused_naming_the_variable(tmp_path):
    done = check(tmp_path, {"slurm_ready_timeout": "soon"})
    assert done.returncode != 0
    assert "slurm_ready_timeout" in done.stdout and "int" in done.stdout


def test_a_setting_of_another_role_is_checked_too(tmp_path):
    done = check(tmp_path, {"mesh_base_packages": "curl"})  # a list, given as one string: converted, fine
    assert done.returncode == 0, done.stdout[-3000:]
    done = check(tmp_path, {"job_users_gid": "many"})
    assert done.returncode != 0
    assert "job_users_gid" in done.stdout


def test_the_shared_defaults_of_role_mesh_are_checked_here(tmp_path):
    """Role mesh's spec is not `main` (no play validates it by itself, about four rounds of every
    node per run): this check is where a wrong mesh_* setting is refused."""
    spec = yaml.safe_load((resources.roles_dir() / "mesh" / "meta" / "argument_specs.yml").read_text())
    assert "main" not in spec["argument_specs"] and "mesh_pod" in spec["argument_specs"]["defaults"]["options"]
    done = check(tmp_path, {"mesh_pod": "perhaps"})
    assert done.returncode != 0
    assert "mesh_pod" in done.stdout and "bool" in done.stdout


def test_a_role_the_play_does_not_import_is_checked_too(tmp_path):
    """The roles are found beside mesh_settings, not listed: tailscale's and nfs_client's settings
    are refused here although this play imports neither."""
    done = check(tmp_path, {"tailscale_port": "high"})
    assert done.returncode != 0
    assert "tailscale_port" in done.stdout and "int" in done.stdout
    done = check(tmp_path, {"tailscale_force_reauth": "perhaps"})
    assert done.returncode != 0
    assert "tailscale_force_reauth" in done.stdout


def test_every_role_site_imports_says_its_settings_where_the_check_reads_them():
    plays = yaml.safe_load(resources.playbook("site.yml").read_text())
    imported = set()
    for play in plays:
        for section in ("pre_tasks", "tasks", "post_tasks"):
            for task in play.get(section) or []:
                role = task.get("ansible.builtin.import_role") or task.get("ansible.builtin.include_role")
                if not role:
                    continue
                assert role.get("rolespec_validate") is False, f"{role['name']} validates again on every node"
                imported.add(role["name"].rsplit(".", 1)[-1])
        assert "roles" not in play, f"play '{play.get('name')}' lists roles (each validates on every node)"
    assert "mesh_settings" in imported
    # and the settings-only roles they declare as dependencies (mesh, slurm_defaults: their specs'
    # entry point is not `main`); no role pulls in another (test_playbook_shape.py)
    declared, walked = set(), set()
    while todo := (imported | declared) - walked:
        for role in todo:
            walked.add(role)
            meta = yaml.safe_load((resources.roles_dir() / role / "meta" / "main.yml").read_text())
            declared |= {str(dep["role"]).rsplit(".", 1)[-1] for dep in meta.get("dependencies") or []}
    assert declared == {"mesh", "slurm_defaults"}
    for role in imported | declared:
        spec = yaml.safe_load((resources.roles_dir() / role / "meta" / "argument_specs.yml").read_text())
        entry = "main" if (resources.roles_dir() / role / "tasks").is_dir() else "defaults"
        assert "options" in spec["argument_specs"][entry], role
