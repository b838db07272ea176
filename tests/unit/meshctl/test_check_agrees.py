"""`meshctl check` and `apply` agree: twenty broken meshes, each refused by both with the
same file, line and message, before any run; and sound settings pass both."""

import pytest
from click.testing import CliRunner

from meshctl import runner
from meshctl.cli import cli

# (file, its text, what both must say). group_vars/all.yml, host_vars/head.yml, or mesh.yml's vars
# (MESH_VARS: written under all.vars of the fixture's mesh.yml).
BROKEN = [
    ("group_vars/all.yml", "job_users_list: alice\n", "job_users_list"),
    ("group_vars/all.yml", "job_users_list:\n  - {name: alice, uid: two}\n", "uid 'two' must be a whole number"),
    ("group_vars/all.yml", "job_users_list:\n  - {name: slurm, uid: 2001}\n", "slurm is an account of the system"),
    (
        "group_vars/all.yml",
        "job_users_list:\n  - {name: alice, uid: 2001}\n  - {name: bob, uid: 2001}\n",
        "uid 2001 is also the uid of entry 1",
    ),
    ("group_vars/all.yml", "job_users_list:\n  - {name: Alice, uid: 2001}\n", "is not a valid user name"),
    (
        "group_vars/all.yml",
        "job_users_list:\n  - {name: alice, uid: 2001, shell: /bin/zsh}\n",
        "must be a mapping with name, uid",
    ),
    ("group_vars/all.yml", "idle_stop: soon\n", "idle_stop 'soon' is not"),
    ("host_vars/head.yml", "idle_stop: 5s\n", "is under"),
    ("host_vars/head.yml", "idle_stop: 400d\n", "over a year"),
    ("group_vars/all.yml", "mesh_idle_stop_by_provider: {paperspace: whenever}\n", "paperspace: idle_stop"),
    ("group_vars/all.yml", "mesh_idle_stop_by_provider: 30m\n", "mesh_idle_stop_by_provider"),
    ("host_vars/head.yml", "autostop: 30m\n", "SkyPilot's word"),
    ("group_vars/all.yml", "idle_timeout: 30m\n", "dstack's word"),
    ("group_vars/all.yml", "idle_minutes_to_autostop: 30\n", "SkyPilot's word"),
    ("group_vars/all.yml", "scaledown_idletime: 10\n", "ParallelCluster's word"),
    ("group_vars/all.yml", "slurm_ready_timeout: soon\n", "not int"),
    ("group_vars/all.yml", "slurm_acounting: true\n", "did you mean `slurm_accounting`"),
    ("group_vars/all.yml", "job_users_gid: many\n", "job_users_gid"),
    ("group_vars/all.yml", "slurm_partitions: [gpu]\n", "slurm_partitions"),
    ("group_vars/all.yml", "- a list\n", "is not a mapping of settings"),
    ("group_vars/all.yml", "slurm_head_runs_jobs: sometimes\n", "slurm_head_runs_jobs is 'sometimes': use auto"),
    # Every file Ansible reads of group_vars/ and host_vars/, not the *.yml files alone.
    ("group_vars/compute.yaml", "slurm_acounting: true\n", "did you mean `slurm_accounting`"),
    ("host_vars/head.yaml", "slurm_acounting: true\n", "did you mean `slurm_accounting`"),
    ("host_vars/head/main.yml", "slurm_acounting: true\n", "did you mean `slurm_accounting`"),
    ("group_vars/all/main.yml", "slurm_acounting: true\n", "did you mean `slurm_accounting`"),
    ("group_vars/all.json", '{"slurm_acounting": true}\n', "did you mean `slurm_accounting`"),
    ("group_vars/compute", "slurm_acounting: true\n", "did you mean `slurm_accounting`"),
    # What the code acts on only when it is exactly so, and what another command refuses.
    ("host_vars/head.yml", "idle_terminate: maybe\n", "'maybe' is not true or false"),
    ("host_vars/head.yml", 'idle_terminate: "yes"\n', "'yes' is not true or false"),
    ("host_vars/head.yml", "idle_stop: 0s\n", "is no time"),
    ("group_vars/all.yml", "burst_pools:\n  - {name: h100, gpu: H100}\n", "pool h100: gpus must be"),
    ("group_vars/all.yml", "burst_max_spend: lots\n", "burst_max_spend"),
    ("group_vars/all.yml", "mlflow_pip_extra_args: --index-url https://u:tok@pypi.example/simple\n", "package index"),
    ("group_vars/all.yml", "mlflow_pip_extra_args: --find-links https://u:tok@w.example/\n", "URL with credentials"),
]
# Every setting with a check of its own (settings.VALUE_CHECKS) has a broken mesh above: a new
# refusal without one here is found.
CHECKED = {"job_users_list", "idle_stop", "mesh_idle_stop_by_provider", "slurm_head_runs_jobs", "idle_terminate",
           "burst_pools", "burst_max_spend", "mlflow_pip_extra_args"}  # fmt: skip


@pytest.fixture
def no_run(monkeypatch):
    ran = []
    monkeypatch.setattr(runner, "run_playbook", lambda *a, **k: ran.append(a) or pytest.fail("a run started"))
    return ran


def write(mesh, file, text):
    path = mesh.path / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize(("file", "text", "said"), BROKEN, ids=[f"{i:02d}" for i in range(len(BROKEN))])
def test_check_and_apply_refuse_the_same_broken_setting_before_anything_runs(mesh, no_run, file, text, said):
    write(mesh, file, text)
    before = mesh.inventory.read_bytes()
    checked = CliRunner().invoke(cli, ["check", "--mesh", str(mesh.path)])
    applied = CliRunner().invoke(cli, ["apply", "--mesh", str(mesh.path)])
    assert checked.exit_code == 3, checked.output
    assert applied.exit_code == 3, applied.output
    assert said in checked.output, checked.output
    assert said in applied.output, applied.output
    line = next(x for x in checked.output.splitlines() if said in x)
    assert line.startswith(file), line  # its file (and line) first
    assert mesh.inventory.read_bytes() == before and no_run == []


def test_the_list_has_twenty_distinct_mistakes():
    assert len(BROKEN) >= 20 and len({(f, t) for f, t, _ in BROKEN}) == len(BROKEN)


def test_every_settings_own_check_has_a_broken_mesh_here():
    from meshctl import settings

    assert set(settings.VALUE_CHECKS) == CHECKED
    for key in CHECKED:
        assert any(text.lstrip('{"').startswith(key) for _f, text, _s in BROKEN), key


def test_a_node_with_idle_stop_that_autostop_would_refuse_is_refused_by_check_and_apply_alike(mesh, no_run):
    """mesh.yml's own host entry: idle_stop on a node that is no provider's instance (autostop's refusal)."""
    import yaml

    data = yaml.safe_load(mesh.inventory.read_text())
    data["all"]["hosts"]["head"]["idle_stop"] = "30m"
    mesh.inventory.write_text(yaml.safe_dump(data))
    checked = CliRunner().invoke(cli, ["check", "--mesh", str(mesh.path)])
    applied = CliRunner().invoke(cli, ["apply", "--mesh", str(mesh.path)])
    said = "this node cannot be stopped when idle: the head is never stopped"
    assert checked.exit_code == 3 and said in checked.output, checked.output
    assert applied.exit_code == 3 and said in applied.output, applied.output
    assert no_run == []


def test_secrets_others_can_read_are_refused_by_check_and_by_a_run_alike(mesh, no_run):
    (mesh.path / "secrets").mkdir(mode=0o700, exist_ok=True)
    key = mesh.path / "secrets" / "munge.key"
    key.write_bytes(b"k" * 1024)
    key.chmod(0o644)
    checked = CliRunner().invoke(cli, ["check", "--mesh", str(mesh.path)])
    applied = CliRunner().invoke(cli, ["apply", "--mesh", str(mesh.path)])
    said = "secrets/munge.key: is readable by others (mode 0644)"
    assert checked.exit_code == 3 and said in checked.output, checked.output
    assert applied.exit_code == 3 and said in applied.output and "chmod 600" in applied.output, applied.output
    assert no_run == []


def test_sound_settings_pass_both(mesh, monkeypatch):
    write(mesh, "group_vars/all.yml",
          "job_users_list:\n  - {name: alice, uid: 2001, comment: Alice}\n"
          "mesh_idle_stop_by_provider: {paperspace: 30m}\njob_users_gid: 2000\nrack: b3\n"
          "slurm_head_runs_jobs: true\n")  # fmt: skip
    write(mesh, "host_vars/head.yml", "idle_stop: false\n")
    checked = CliRunner().invoke(cli, ["check", "--mesh", str(mesh.path)])
    assert checked.exit_code == 0, checked.output
    assert "sound" in checked.output
