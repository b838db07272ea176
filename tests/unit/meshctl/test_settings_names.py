"""A user's settings are checked when the mesh is loaded (meshctl/settings.py): a misspelt name or a
value of the wrong type is refused with its file, line and the closest known name, before anything
runs; a variable of the user's own (outside every role's namespace) is kept."""

import pytest
import yaml
from click.testing import CliRunner

from meshctl import runner, settings
from meshctl.cli import cli
from meshctl.errors import InventoryError


def write(mesh, text, name="all.yml"):
    folder = mesh.path / "group_vars"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)


@pytest.mark.parametrize(
    ("text", "line", "said", "hint"),
    [
        ("---\n# accounting\nslurm_acounting: true\n", 3, "unknown setting `slurm_acounting`",
         "did you mean `slurm_accounting`?"),
        ("job_user_list:\n  - {name: alice, uid: 2001}\n", 1, "unknown setting `job_user_list`",
         "did you mean `job_users_list`?"),
        ("mlflow_port: 5000\nslurm_accounting: [1]\n", 2, "`slurm_accounting` is list [1], not bool", "README"),
        ("mlflow_port: lots\n", 1, "`mlflow_port` is str 'lots', not int", "README"),
        # A setting a role renamed is named with its new name, not the closest one (slurm_ready_timeout).
        ("slurm_drain_timeout: 60\n", 1, "unknown setting `slurm_drain_timeout`",
         "it is now `slurm_controller_drain_timeout`: rename it"),
        ("slurm_package_cache_dir: /srv/debs\n", 1, "unknown setting", "it is now `slurm_build_cache_dir`"),
    ],
)  # fmt: skip
def test_a_misspelt_or_mistyped_setting_is_refused_with_its_file_and_line(mesh, text, line, said, hint):
    write(mesh, text)
    with pytest.raises(InventoryError) as caught:
        mesh.load()
    assert caught.value.exit_code == 3
    assert f"group_vars/all.yml: line {line}: {said}" in caught.value.message and hint in caught.value.hint


def test_sound_settings_the_users_own_variables_and_templates_pass(mesh):
    write(mesh, "slurm_accounting: 'yes'\nmlflow_port: '5001'\nmlflow_workers: 2\nrack: b2\nmy_site_var: 7\n"
          "job_users_list: []\nslurm_suspend_timeout: \"{{ 10 * 3 }}\"\n"
          "paperspace_prices: {A4000: 0.76}\n")  # fmt: skip
    data = yaml.safe_load(mesh.inventory.read_text())
    data["all"]["hosts"]["head"].update({"idle_stop": False, "nvidia_note": {"driver": "550"}})
    mesh.inventory.write_text(yaml.safe_dump(data))
    assert settings.check(mesh.path, mesh.inventory.read_text()) == []
    mesh.load()


def test_a_host_variable_in_mesh_yml_is_checked_with_its_line(mesh):
    data = yaml.safe_load(mesh.inventory.read_text())
    data["all"]["hosts"]["head"]["idle_stopp"] = "30m"
    mesh.inventory.write_text(yaml.safe_dump(data))
    line = next(i for i, t in enumerate(mesh.inventory.read_text().splitlines(), 1) if "idle_stopp" in t)
    with pytest.raises(InventoryError, match=rf"mesh.yml: line {line}: unknown setting `idle_stopp`") as caught:
        mesh.load()
    assert "did you mean `idle_stop`?" in caught.value.hint


def test_commands_refuse_before_running_anything_and_check_lists_every_problem(mesh, monkeypatch):
    ran = []
    monkeypatch.setattr(runner, "run_playbook", lambda *a, **kw: ran.append(a))
    write(mesh, "slurm_acounting: true\n")
    write(mesh, "tailscale_tag: [tag:gpu]\n", "gpu.yml")
    out = CliRunner().invoke(cli, ["status", "--mesh", str(mesh.path)])
    assert out.exit_code == 3 and "unknown setting `slurm_acounting`" in out.output and ran == []
    assert "(and 1 more: `meshctl check` lists them)" in out.output
    listed = CliRunner().invoke(cli, ["check", "--mesh", str(mesh.path)])
    assert listed.exit_code == 3
    assert "group_vars/all.yml: line 1: unknown setting `slurm_acounting`" in listed.output
    assert "group_vars/gpu.yml: line 1: unknown setting `tailscale_tag`" in listed.output
    assert "did you mean `tailscale_tags`?" in listed.output
    write(mesh, "slurm_accounting: true\n")
    write(mesh, "tailscale_tags: [tag:gpu]\n", "gpu.yml")
    sound = CliRunner().invoke(cli, ["check", "--mesh", str(mesh.path)])
    assert sound.exit_code == 0 and "mesh.yml and the settings are sound (1 node)" in sound.output


BOMB = "a: &a ['x','x','x','x','x','x','x','x','x']\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n" for i in range(9)
)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (BOMB, "YAML aliases (*name) are not allowed"),
        ("a: " + "[" * 20000 + "]" * 20000 + "\n", "nested too deep"),
        ("".join(f"k{i}: 1\n" for i in range(settings.MAX_KEYS + 1)), f"more than {settings.MAX_KEYS} keys"),
        ("mlflow_port: 5000\nmlflow_port: 5001\n", "'mlflow_port' is given twice"),
        ("x: '" + "y" * (settings.MAX_FILE_BYTES + 1) + "'\n", "not a settings file"),
    ],
    ids=["alias bomb", "deep", "too many keys", "twice", "too big"],
)
def test_a_settings_file_meshctl_cannot_read_safely_is_one_problem_not_a_traceback(mesh, text, said):
    """Before: group_vars went through yaml.safe_load (aliases expanded: MemoryError; deep nesting:
    RecursionError; 200000 keys over a minute). It is now the same strict loader as mesh.yml's."""
    write(mesh, text)
    with pytest.raises(InventoryError) as caught:
        mesh.load()
    assert "group_vars/all.yml" in caught.value.message and said in caught.value.message


def test_ansibles_own_vault_and_unsafe_tags_are_read_as_text(mesh):
    """Before: `!vault` and `!unsafe` (Ansible's) made the file unreadable to meshctl."""
    write(
        mesh,
        "mlflow_port: 5000\nmy_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\n"
        "slurm_ready_timeout: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6364\nmy_text: !unsafe '{{ x }}'\n",
    )
    mesh.load()
    data = settings.load((mesh.path / "group_vars" / "all.yml").read_text())
    assert isinstance(data["my_password"], settings.Vaulted) and data["my_text"] == "{{ x }}"


@pytest.mark.parametrize(
    ("text", "line", "said"),
    [
        ("all:\n\thosts: {}\n", 2, "(YAML indents with spaces, never tabs)"),
        ("[head]\nlocalhost\n", 1, "an INI inventory, not YAML"),
        ("all: [\n", 2, "line 2, column 1"),
    ],
    ids=["a tab", "INI form", "an unclosed ["],
)
def test_check_says_where_mesh_yml_is_broken_and_never_raises(mesh, text, line, said):
    """`check` crashed with a traceback on the files it exists to diagnose."""
    mesh.inventory.write_text(text)
    listed = CliRunner().invoke(cli, ["check", "--mesh", str(mesh.path)])
    assert listed.exit_code == 3, listed.output
    assert not isinstance(listed.exception, Exception) or isinstance(listed.exception, SystemExit)
    assert "Traceback" not in listed.output and said in listed.output and f"line {line}" in listed.output
    assert "fix" in listed.output
