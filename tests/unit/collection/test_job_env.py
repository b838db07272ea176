"""Role job_env's pip settings, rendered as Ansible renders them: an index URL (it may carry a
token) reaches pip through a root-only configuration file, never a command line."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = Path(__file__).resolve().parents[3] / "roles" / "job_env"
INDEX = "https://alice:s3cr3t-TOKEN@pypi.example.org/simple"
EXTRA = ["https://download.pytorch.org/whl/cpu", "https://bob:0ther-TOKEN@extra.example.org/simple"]


def trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [trusted(v) for v in value]
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    return value


def templar(**settings) -> Templar:
    loader = DataLoader()
    variables = {}
    for part in ("defaults", "vars"):
        variables.update(trusted(loader.load_from_file(str(ROLE / part / "main.yml"))))
    variables.update({"mesh_job_env_path": "/opt/meshctl/jobenv", "mesh_base_bare_dry_run": False, **settings})
    return Templar(loader=loader, variables=variables)


def task(name: str) -> dict:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    return next(t for t in tasks if t.get("name", "").startswith(name))


def render(t: Templar, value):
    return t.template(trusted(value))


@pytest.mark.parametrize("settings", [
    {"job_env_pip_index_url": INDEX},
    {"job_env_pip_extra_index_urls": EXTRA},
    {"job_env_pip_index_url": INDEX, "job_env_pip_extra_index_urls": EXTRA, "job_env_find_links_dir": "/opt/wheels"},
])  # fmt: skip
def test_an_index_url_is_in_pips_root_only_config_file_never_on_its_command_line(settings):
    t = templar(**settings)
    pip = task("Install the job environment's packages")
    argv = f"{render(t, pip['ansible.builtin.pip']['name'])} {render(t, pip['ansible.builtin.pip']['extra_args'])}"
    environment = render(t, pip["environment"])
    for url in [INDEX, *EXTRA]:
        assert url not in argv and url not in str(environment)
    assert "TOKEN" not in argv + str(environment)
    conf_task = task("Write pip's indexes")
    assert conf_task["no_log"] is True and conf_task["ansible.builtin.copy"]["mode"] == "0600"
    conf_file = render(t, conf_task["ansible.builtin.copy"]["dest"])
    assert environment["PIP_CONFIG_FILE"] == conf_file == "/opt/meshctl/jobenv-pip.conf"
    parser = configparser.RawConfigParser()  # as pip reads it
    parser.read_string(render(t, conf_task["ansible.builtin.copy"]["content"]))
    assert parser.get("global", "index-url", fallback=None) == settings.get("job_env_pip_index_url")
    extra = parser.get("global", "extra-index-url", fallback="").split()
    assert extra == settings.get("job_env_pip_extra_index_urls", [])
    if settings.get("job_env_find_links_dir"):
        assert "--find-links /opt/meshctl/jobenv-wheels" in argv  # a folder, no secret


def test_no_index_no_config_file_and_a_changed_index_rebuilds_the_environment():
    t = templar()
    assert render(t, "{{ job_env_pip_indexes }}") is False
    assert "PIP_CONFIG_FILE" not in render(t, "{{ job_env_pip_env }}")
    assert t.evaluate_conditional(trusted(task("Remove pip's indexes")["when"])) is True
    stamps = {render(templar(job_env_pip_index_url=url), "{{ job_env_stamp }}") for url in ("", INDEX, INDEX + "2")}
    assert len(stamps) == 3
