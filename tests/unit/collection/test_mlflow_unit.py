"""Role mlflow's systemd unit, rendered: what the tracking server runs with."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml

from meshctl import resources

ROLE = Path(__file__).resolve().parents[3] / "roles" / "mlflow"


def render(**variables) -> list[str]:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), undefined=jinja2.StrictUndefined,
                             trim_blocks=True)  # fmt: skip
    env.filters.update(comment=lambda text: "# " + text, bool=lambda v: v if isinstance(v, bool) else str(v) == "true")
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    base = {**defaults, "ansible_managed": "Ansible managed", "mesh_address": "100.64.0.1",
            "inventory_hostname": "head", "mlflow_venv_bytecode": True, "mlflow_cache_directory": "mlflow",
            "mlflow_artifacts_dir": "/var/lib/mlflow/artifacts",
            "mlflow_auth_config": "/var/lib/mlflow/basic_auth.ini",
            "mlflow_secret_env": "/etc/mlflow/secret.env"}  # fmt: skip
    return env.get_template("mlflow.service.j2").render(**{**base, **variables}).splitlines()


def test_the_server_runs_no_job_runner_unless_asked():
    assert "Environment=MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false" in render()  # the role's default
    assert not any("MLFLOW_SERVER_ENABLE_JOB_EXECUTION" in line for line in render(mlflow_job_execution=True))


def test_mlflows_telemetry_is_off_for_the_server_the_shells_and_every_jobs_tasks_unless_asked():
    """MLflow 3.2+ asks its telemetry address from a thread that, unanswered, removes a variable from
    the environment a job may be reading (a training job crashed at its start, KeyError
    '_MLFLOW_TELEMETRY_SESSION_ID'): off by default, where MLflow runs on the mesh."""
    assert "Environment=MLFLOW_DISABLE_TELEMETRY=true" in render()
    assert not any("TELEMETRY" in line for line in render(mlflow_telemetry=True))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), trim_blocks=True)
    env.filters.update(comment=lambda text: "# " + text, bool=lambda v: v if isinstance(v, bool) else str(v) == "true")
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    hosts = {"head": {"mesh_address": "100.64.0.1"}}
    profile = {**defaults, "ansible_managed": "m", "groups": {defaults["mlflow_server_group"]: ["head"]},
               "hostvars": hosts, "mlflow_accounts_dir": "/etc/meshctl/task-env.d/users"}  # fmt: skip
    assert "export MLFLOW_DISABLE_TELEMETRY=true" in env.get_template("profile.sh.j2").render(**profile).splitlines()
    assert "TELEMETRY" not in env.get_template("profile.sh.j2").render(**{**profile, "mlflow_telemetry": True})
    # Every job's tasks: the file Slurm's TaskProlog exports, in the NAME=value form it reads.
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    files = next(t for t in tasks if "Tell every node" in t["name"])["meshctl.mesh.mesh_safe_file"]["files"]
    task_env = next(f for f in files if f["path"] == "{{ mlflow_task_env_file }}")
    assert (
        "slurm_task_environment_dir" in yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["mlflow_task_env_file"]
    )
    for telemetry, expected in (
        (False, "MLFLOW_DISABLE_TELEMETRY=true\n"),
        (True, "# MLflow telemetry left on (mlflow_telemetry)\n"),
    ):
        said = env.from_string(task_env["content"]).render(mlflow_telemetry=telemetry)
        assert said.strip() == expected.strip(), said


def venv_bytecode(**variables) -> bool:
    """The role's mlflow_venv_bytecode (vars/main.yml) for these settings."""
    expression = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["mlflow_venv_bytecode"]
    env = jinja2.Environment(undefined=jinja2.ChainableUndefined)
    settings = {"mlflow_pip_environment": {}, "mlflow_pip_extra_args": "", **variables}
    text = env.from_string(expression).render(**settings)
    assert text.strip() in ("True", "False"), text
    return text.strip() == "True"


def test_pip_writes_the_virtualenvs_bytecode_unless_told_not_to():
    assert venv_bytecode() is True  # pip's default
    assert venv_bytecode(mlflow_pip_environment={"PIP_CERT": "/etc/ssl/certs/ca-certificates.crt"}) is True
    for off in ("0", "false", "no", "off", 0, False):
        assert venv_bytecode(mlflow_pip_environment={"PIP_COMPILE": off}) is False, off
    assert venv_bytecode(mlflow_pip_environment={"PIP_COMPILE": "1"}) is True
    assert venv_bytecode(mlflow_pip_extra_args="--no-compile --retries 2") is False


def test_a_virtualenv_without_bytecode_gets_the_servers_own_cache_folder():
    cache = ["CacheDirectory=mlflow", "CacheDirectoryMode=0700", "Environment=PYTHONPYCACHEPREFIX=/var/cache/mlflow"]
    without = render(mlflow_venv_bytecode=False, mlflow_cache_directory="mlflow")
    assert all(line in without for line in cache), without
    # The venv's own bytecode is read as it is: no prefix (Python would look only there).
    compiled = render(mlflow_venv_bytecode=True, mlflow_cache_directory="mlflow")
    assert not any("PYTHONPYCACHEPREFIX" in line or line.startswith("CacheDirectory") for line in compiled)


CHECK_PLAY = """
- name: Check MLflow's settings
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The role's own checks
      ansible.builtin.include_role:
        name: meshctl.mesh.mlflow
        tasks_from: check
"""


@pytest.mark.parametrize(
    ("extra_args", "refused"),
    [
        ("--index-url https://pypi.example.org/simple", True),
        ("-i https://pypi.example.org/simple", True),
        ("--extra-index-url=https://pypi.example.org/simple", True),
        ("--find-links https://__token__:s3cret@files.example.org/", True),
        ("--no-compile --timeout 60", False),
        ("", False),
    ],
)
def test_pips_arguments_may_carry_no_index_or_credentials(tmp_path, extra_args, refused):
    """pip's command line is every head user's to read (ps): the role refuses an index or a URL
    with credentials there and names mlflow_pip_environment."""
    (tmp_path / "play.yml").write_text(CHECK_PLAY)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(resources.collections_path(tmp_path / "collections")),
               ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER="auto_silent")  # fmt: skip
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", "play.yml",
            "-e", json.dumps({"mlflow_pip_extra_args": extra_args})]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert (done.returncode != 0) == refused, done.stdout[-2000:]
    assert ("mlflow_pip_environment" in done.stdout) == refused


def test_the_session_secret_is_made_in_roots_folder_not_the_mlflow_users():
    """Root's shell writes it (`> file.tmp && mv`): in the mlflow user's data folder a link laid at
    that name made root write through it. It is made under /var/lib/meshctl now."""
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert role_vars["mlflow_secret_env"].startswith("/var/lib/meshctl/")
    assert not role_vars["mlflow_secret_env"].startswith(defaults["mlflow_data_dir"])
    tasks = yaml.safe_load((ROLE / "tasks" / "server.yml").read_text())
    shells = [t for t in tasks if "ansible.builtin.shell" in t and ">" in t["ansible.builtin.shell"]]
    assert all("mlflow_secret_env" in t["ansible.builtin.shell"] for t in shells)


def auth_settings(**variables) -> dict:
    """basic_auth.ini as rendered for VARIABLES, read as MLflow reads it (configparser, section [mlflow])."""
    import configparser

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), undefined=jinja2.StrictUndefined,
                             trim_blocks=True)  # fmt: skip
    env.filters["comment"] = lambda text: "# " + text
    env.globals["lookup"] = lambda _kind, path: f"password-from-{path}"
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    given = {"ansible_managed": "Ansible managed", "mlflow_data_dir": "/var/lib/mlflow",
             "mlflow_auth_password_file": "/secrets/mlflow_password"}  # fmt: skip
    text = env.get_template("basic_auth.ini.j2").render(**{**defaults, **given, **variables})
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    return dict(parser["mlflow"])


def test_the_server_keeps_a_checked_credential_for_the_roles_period():
    # MLflow's auth_cache_ttl_seconds (its own default 0: a scrypt check on every request).
    assert auth_settings()["auth_cache_ttl_seconds"] == "30"
    assert auth_settings(mlflow_auth_cache_seconds=0)["auth_cache_ttl_seconds"] == "0"
    settings = auth_settings()
    assert settings["authorization_function"] == "mlflow.server.auth:authenticate_request_basic_auth"
    assert settings["admin_password"] == "password-from-/secrets/mlflow_password"


def test_the_artifact_store_is_on_the_heads_disk_not_on_the_share():
    """A node's root speaks NFS as any uid (sec=sys), the mlflow uid's too: a store on the
    share would let it read and rewrite every run's artifacts around MLflow's permissions."""
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables = {"mesh_share_path": "/mnt/shared-slurm", "mlflow_data_dir": defaults["mlflow_data_dir"]}
    store = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(defaults["mlflow_artifacts_dir"])
    where = Path(store.render(**variables))
    assert where == Path(defaults["mlflow_data_dir"]) / "artifacts"
    assert Path(variables["mesh_share_path"]) not in where.parents
    # The server is told that folder (proxied serving: clients never see a path).
    assert any(f"--artifacts-destination {where} " in line for line in render(mlflow_artifacts_dir=str(where)))
