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
            "inventory_hostname": "head", "mlflow_artifacts_dir": "/mnt/shared-slurm/mlflow-artifacts",
            "mlflow_auth_config": "/var/lib/mlflow/basic_auth.ini",
            "mlflow_secret_env": "/etc/mlflow/secret.env"}  # fmt: skip
    return env.get_template("mlflow.service.j2").render(**{**base, **variables}).splitlines()


def test_the_server_runs_no_job_runner_unless_asked():
    assert "Environment=MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false" in render()  # the role's default
    assert not any("MLFLOW_SERVER_ENABLE_JOB_EXECUTION" in line for line in render(mlflow_job_execution=True))
