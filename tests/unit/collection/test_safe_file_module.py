"""Module mesh_safe_file with `files:`: a role's files in one module run,
run for real by ansible-playbook on this machine: check mode and --diff, a second run that changes
nothing, a planted link replaced, `write: false`, and a template rendered through the lookup byte for
byte what the template module writes (so a node converged before the change sees no change)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from meshctl import resources

TEMPLATE = """{{ ansible_managed | comment }}
[Service]
{% for name in names %}
Environment=NAME_{{ loop.index }}={{ name }}
{% endfor %}
ExecStart=/bin/true {{ flag }}

"""


def play(tmp_path: Path, tasks: list[dict], *flags: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """Run TASKS on localhost; each task's result as the json callback reports it."""
    (tmp_path / "templates").mkdir(exist_ok=True)
    (tmp_path / "templates" / "unit.j2").write_text(TEMPLATE)
    book = [{"hosts": "localhost", "gather_facts": False,
             "vars": {"names": ["a", "b"], "flag": "--x", "out": str(tmp_path / "out")}, "tasks": tasks}]  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(book))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(resources.collections_path(tmp_path / "collections")),
               ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=sys.executable,
               ANSIBLE_STDOUT_CALLBACK="json")  # fmt: skip
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    argv = [playbook, "-i", "localhost,", "-c", "local", "play.yml", *flags]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    results = [t["hosts"]["localhost"] for p in json.loads(done.stdout)["plays"] for t in p["tasks"]]
    return done, results


def write_two(write_second: bool = True) -> dict:
    return {"meshctl.mesh.mesh_safe_file": {"files": [
        {"path": "{{ out }}/unit.conf", "content": "{{ lookup('ansible.builtin.template', 'unit.j2') }}"},
        {"path": "{{ out }}/run.sh", "content": "#!/bin/sh\necho hi\n", "mode": "0755", "write": write_second},
    ]}, "register": "written"}  # fmt: skip


def test_files_in_one_run_check_mode_diff_and_a_second_run(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _, (dry,) = play(tmp_path, [write_two()], "--check", "--diff")
    assert dry["changed"] and dry["changed_paths"] == [str(out / "unit.conf"), str(out / "run.sh")]
    assert not list(out.iterdir())  # check mode wrote nothing
    assert [d["after_header"] for d in dry["diff"]] == dry["changed_paths"] and "NAME_2=b" in dry["diff"][0]["after"]
    _, (first,) = play(tmp_path, [write_two()])
    assert first["changed"] and len(first["changed_paths"]) == 2
    assert (out / "run.sh").read_text() == "#!/bin/sh\necho hi\n" and (out / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (out / "unit.conf").stat().st_mode & 0o777 == 0o644
    _, (second,) = play(tmp_path, [write_two()])
    assert not second["changed"] and second["changed_paths"] == []


def test_a_planted_link_is_replaced_and_write_false_leaves_a_file_as_it_is(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "target"
    target.write_text("precious\n")
    (out / "unit.conf").symlink_to(target)
    (out / "run.sh").write_text("mine\n")
    _, (done,) = play(tmp_path, [write_two(write_second=False)])
    assert done["changed_paths"] == [str(out / "unit.conf")]
    assert not (out / "unit.conf").is_symlink() and target.read_text() == "precious\n"
    assert (out / "run.sh").read_text() == "mine\n"


def test_the_lookup_renders_byte_for_byte_what_the_template_module_writes(tmp_path):
    """A node the template module wrote its files on sees no change when the role writes them
    through the lookup and this module (trailing newlines, ansible_managed, trim_blocks)."""
    out = tmp_path / "out"
    out.mkdir()
    by_module = {"ansible.builtin.template": {"src": "unit.j2", "dest": "{{ out }}/unit.conf", "mode": "0644"}}
    play(tmp_path, [by_module])
    written = (out / "unit.conf").read_bytes()
    assert written.endswith(b"--x\n\n") and b"NAME_1=a\nEnvironment=NAME_2=b\n" in written
    _, (again,) = play(tmp_path, [write_two(write_second=False)])
    assert not again["changed"], (out / "unit.conf").read_bytes()
