"""Role mlflow's systemd unit, rendered: what the tracking server runs with."""

from pathlib import Path

import jinja2
import yaml

ROLE = Path(__file__).resolve().parents[2] / "roles" / "mlflow"


def render(**variables) -> list[str]:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), undefined=jinja2.StrictUndefined,
                             trim_blocks=True)  # fmt: skip
    env.filters.update(comment=lambda text: "# " + text, bool=lambda v: v if isinstance(v, bool) else str(v) == "true")
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    base = {**defaults, "ansible_managed": "Ansible managed", "mesh_address": "100.64.0.1",
            "inventory_hostname": "head", "mlflow_venv_bytecode": True, "mlflow_cache_directory": "mlflow",
            "mlflow_artifacts_dir": "/mnt/shared-slurm/mlflow-artifacts",
            "mlflow_auth_config": "/var/lib/mlflow/basic_auth.ini",
            "mlflow_secret_env": "/etc/mlflow/secret.env"}  # fmt: skip
    return env.get_template("mlflow.service.j2").render(**{**base, **variables}).splitlines()


def test_the_server_runs_no_job_runner_unless_asked():
    assert "Environment=MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false" in render()  # the role's default
    assert not any("MLFLOW_SERVER_ENABLE_JOB_EXECUTION" in line for line in render(mlflow_job_execution=True))


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
