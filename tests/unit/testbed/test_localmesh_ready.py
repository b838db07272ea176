"""The test beds' ready image: what it holds is read from the roles, and it is used only when current."""

import re
import shlex

import jinja2
import yaml

from meshctl import headcopy, resources
from meshctl.localmesh import images, ready


def test_every_package_list_of_every_role_is_in_the_image_or_said_to_be_left_out():
    roles = resources.roles_dir()
    found = set()
    for path in [*roles.glob("*/defaults/main.yml"), *roles.glob("*/vars/*.yml")]:
        for name in yaml.safe_load(path.read_text()) or {}:
            if name.endswith("_packages"):
                found.add(name)
    taken = {variable for _role, _where, variable, _rec in ready.FROM_ROLES}
    assert found, "no package list found: the scan is broken"
    assert found - taken - set(ready.LEFT_OUT) == set()
    assert taken & set(ready.LEFT_OUT) == set()
    assert set(ready.LEFT_OUT) <= found  # nothing left out that no longer exists


def test_the_image_holds_what_the_roles_install_read_from_the_roles():
    wanted = ready.packages()
    every = set(wanted["recommends"]) | set(wanted["plain"])
    slurm = yaml.safe_load((resources.roles_dir() / "slurm" / "vars" / "Debian.yml").read_text())
    assert set(slurm["slurm_controller_packages"]) | set(slurm["slurm_node_packages"]) <= every
    assert {"munge", "python3-apt", "mariadb-server", "nfs-ganesha"} <= every
    assert not set(wanted["recommends"]) & set(wanted["plain"])
    paths = {venv["path"] for venv in ready.virtualenvs()}
    assert paths == {
        resources.role_defaults("mlflow")["mlflow_venv"],
        resources.role_defaults("mesh")["mesh_job_env_path"],
        resources.role_defaults("relaunch")["relaunch_prefix"] + "/venv",
    }


def test_the_build_script_starts_no_daemon_leaves_none_enabled_and_no_munge_key():
    text = ready.script(ready.packages(), ready.virtualenvs())
    assert text.index("exit 101") < text.index("apt-get install")  # policy-rc.d before any package
    assert "rm -f /usr/sbin/policy-rc.d" in text
    assert "rm -f /etc/munge/munge.key" in text
    assert text.index("links > /tmp/links.after") > text.rindex("apt-get install")
    for venv in ready.virtualenvs():
        assert re.search(rf"{re.escape(venv['path'])}/bin/pip install .*--no-compile --no-index --find-links /wheels",
                         text)  # fmt: skip
    # What the install enabled is disabled with systemctl and update-rc.d (a script keeps its K
    # links: a role's `enable` later needs them), and the build fails if anything is left enabled.
    assert "xargs -r systemctl disable" in text and "update-rc.d @ disable" in text
    assert "rm -f /etc/rc" not in text and "xargs -r rm" not in text
    assert "still enabled" in text


def test_the_relaunch_requirements_file_is_written_as_the_role_writes_it():
    (venv,) = [v for v in ready.virtualenvs() if "requirements_file" in v]
    text = ready.script(ready.packages(), [venv])
    # The role writes the file (then runs pip only when it changed): its task's content rendered with
    # the role's defaults (relaunch_mitogen off) and what meshctl hands it is what the image holds.
    tasks = yaml.safe_load((resources.roles_dir() / "relaunch" / "tasks" / "install.yml").read_text())
    (task,) = [t for t in tasks if t.get("register") == "relaunch_requirements_written"]
    defaults = yaml.safe_load((resources.roles_dir() / "relaunch" / "defaults" / "main.yml").read_text())
    # (Ansible keeps a template's trailing newlines)
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    environment.filters["bool"] = bool
    values = {**defaults, "relaunch_requirements": headcopy.requirements(),
              "relaunch_mitogen_requirements": headcopy.mitogen_requirements()}  # fmt: skip
    values.update({k: environment.from_string(v).render(values) for k, v in task.get("vars", {}).items()})
    values = {k: (yaml.safe_load(v) if k in task.get("vars", {}) else v) for k, v in values.items()}
    written = environment.from_string(task["ansible.builtin.copy"]["content"]).render(values)
    assert f"printf %s {shlex.quote(written)} > {venv['requirements_file']}" in text
    assert "rich>=13\n" in written and "mitogen" not in written


def test_a_bed_takes_the_ready_image_only_when_it_is_built_for_todays_roles(monkeypatch):
    key = ready.ready_key(images.spec_for("bookworm"))
    labels = {"meshctl-ready:bookworm": key}
    monkeypatch.setattr(images, "image_label", lambda tag: labels.get(tag))
    assert ready.bed_image("bookworm") == "meshctl-ready:bookworm"
    labels["meshctl-ready:bookworm"] = "0" * 64  # built for other lists: the bed installs
    assert ready.bed_image("bookworm") == "meshctl-node:bookworm"
    assert ready.bed_image("trixie") == "meshctl-node:trixie"  # Debian 13 installs from bare


def test_the_key_changes_with_a_roles_package_list(monkeypatch):
    spec = images.spec_for("bookworm")
    before = ready.ready_key(spec)
    real = ready._role_list
    monkeypatch.setattr(
        ready, "_role_list", lambda r, w, v: [*real(r, w, v), "extra"] if v == "munge_packages" else real(r, w, v)
    )
    assert ready.ready_key(spec) != before
