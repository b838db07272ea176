"""Slurm's state words and flags (plugins/module_utils/mesh_slurm.py), read through the status filter
as `meshctl status` and `apply` read them, on what real Slurm 22.05 and 24.11 printed for each state
(tests/fixtures/sinfo/, recorded by scripts/record-sinfo-states on this project's Docker nodes)."""

import re
from pathlib import Path

import pytest

from meshctl import resources, slurm
from tests.conftest import FIXTURES, fixture_text

SLURM = resources.plugin("module_utils.mesh_slurm")
FILTER = resources.plugin("module_utils.mesh_node_status")
VERSIONS = ("slurm-22.05", "slurm-24.11")

STOPPING = "being stopped while idle (idle_stop)"
# What each recorded state must read as: (node the recorder drove: "a" or "b", its state words as
# Slurm may print them, ready (takes jobs and answers), why it is meant to be off (resting) or None).
EXPECT = {
    "idle": ("a", {"idle"}, True, None),
    "allocated": ("a", {"allocated"}, True, None),
    "mixed": ("b", {"mixed"}, True, None),
    "planned": ("b", {"mixed-", "planned"}, True, None),
    "maint": ("b", {"mixed$", "allocated$"}, True, None),
    "draining": ("b", {"draining", "draining$"}, False, None),
    "drained": ("b", {"drained"}, False, None),
    "failing": ("a", {"failing"}, False, None),
    "fail": ("a", {"fail"}, False, None),
    "resumed": ("a", {"idle"}, True, None),
    "completing": ("a", {"completing", "allocated+"}, True, None),
    "allocated_completing": ("b", {"allocated+"}, True, None),
    "down": ("a", {"down"}, False, None),
    "reboot": ("a", {"reboot", "reboot^", "idle@", "idle^"}, False, None),
    "reboot_requested": ("b", {"mixed@", "allocated@"}, True, None),
    "powering_down": ("a", {"idle%"}, True, STOPPING),
    "powered_down": ("a", {"idle~"}, True, "stopped while idle (idle_stop)"),
    "powering_up": ("a", {"idle#"}, True, "starting: a job asked for it"),
    # an admin's power_down_asap: drained with Slurm's reason POWER_DOWN_ASAP, so not resting
    "power_down_pending": ("b", {"allocated!", "mixed!", "idle!", "draining!"}, False, None),
    "not_responding": ("head", {"idle*", "down*", "mixed*", "allocated*"}, False, None),
    # a burst pool's node whose slurmd registered fewer GPUs than its pool's (the rented machines' head)
    "gpus_short": ("pool", {"inval"}, False, None),
    "gpus_short_draining": ("pool", {"draining"}, False, None),
    # a drained node whose slurmd stopped (PARTS=drained_silent): within SlurmdTimeout, past it (DOWN
    # for Slurm, the same word), then as meshctl's watch leaves it at each step
    "drained_not_responding": ("b", {"drained*"}, False, None),
    "drained_silent": ("b", {"drained*"}, False, None),
    "drained_silent_ours": ("b", {"drained*", "down*"}, False, None),
    "drained_silent_powered_down": ("b", {"drained~", "down~"}, False, None),
    "drained_silent_offered": ("b", {"idle~"}, True, "stopped while idle (idle_stop)"),
}
# What `sinfo --dead --states=down` (meshctl's watch: the nodes Slurm holds DOWN that do not answer)
# listed beside the recorded states of the same name (silent-down/).
SILENT_DOWN = {"drained_not_responding": [], "drained_silent": ["b"]}
NODES = {"a": "cpu1", "b": "gpu1", "head": "head", "pool": "h100-1"}  # the recorder's NODE_A, NODE_B and HEAD


def recorded():
    return [(version, path.stem) for version in VERSIONS
            for path in sorted((FIXTURES / "sinfo" / version).glob("*.txt"))]  # fmt: skip


def rows(version, label):
    return FILTER.slurm_rows({"rc": 0, "stdout": fixture_text(f"sinfo/{version}/{label}.txt")})


def test_every_recorded_state_has_an_expectation():
    assert recorded(), "no sinfo fixtures"
    assert {label for _version, label in recorded()} <= set(EXPECT)


@pytest.mark.parametrize(("version", "label"), recorded())
def test_each_state_slurm_printed_is_read_as_slurm_means_it(version, label):
    node, words, ready, resting = EXPECT[label]
    name = NODES[node]
    table = rows(version, label)
    row = table[name]
    assert row["state"] in words, (label, row)
    if ready is not None:
        assert row["ready"] is ready, (label, row)
    assert slurm.resting_state(row) == resting, (label, row)
    for other in table.values():  # every word on every line is one Slurm prints: none becomes unknown
        assert SLURM.parse(other["state"])["known"], other


@pytest.mark.parametrize("version", VERSIONS)
def test_slurms_list_of_silent_down_nodes_is_read_as_recorded(version):
    folder = FIXTURES / "sinfo" / version / "silent-down"
    assert sorted(p.stem for p in folder.glob("*.txt")) == sorted(SILENT_DOWN)
    watch = resources.plugin("module_utils.mesh_watch")
    for label, nodes in SILENT_DOWN.items():
        assert watch.parse_silent(fixture_text(f"sinfo/{version}/silent-down/{label}.txt")) == {NODES[n] for n in nodes}


# Flags the recorder could not bring about on a version, and why (scripts/record-sinfo-states).
NOT_RECORDED = {
    "slurm-22.05": {
        "-": "no PLANNED state: the same pending job that 24.11 plans around (mixed-) leaves 22.05's node mixed",
        "+": "two jobs on a full node, one cancelled and completing: 22.05 printed mixed at once, not allocated+",
        "^": "a reboot issued: Slurm printed 'reboot' on the idle node, then 'down' when it timed out",
    },
    "slurm-24.11": {
        "^": "a reboot issued: Slurm printed 'reboot' on the idle node, then 'down' when it timed out",
        "+": "two jobs on a full node, one cancelled and completing: allocated+ for under a second (seen once by "
        "the recorder's check, gone by its snapshot: completing), mixed in the next run",
    },
}


def test_every_flag_slurm_prints_is_in_a_recording_of_each_version():
    """Each flag of FLAGS is shown on real output of both versions, but for the ones named above."""
    for version in VERSIONS:
        seen = {flag for _v, label in recorded() if _v == version
                for row in rows(version, label).values() for flag in SLURM.parse(row["state"])["flags"]}  # fmt: skip
        assert set(SLURM.FLAGS) - set(NOT_RECORDED[version]) == seen, (version, sorted(set(SLURM.FLAGS) - seen))


@pytest.mark.parametrize(
    ("word", "base", "flags", "ready"),
    [("idle", "idle", "", True), ("idle~", "idle", "~", True), ("down*", "down", "*", False),
     ("mixed-", "mixed", "-", True), ("allocated+", "allocated", "+", True), ("draining$", "draining", "$", False),
     ("IDLE#", "idle", "#", True), ("reboot^", "reboot", "^", False), ("inval", "inval", "", False)],
)  # fmt: skip
def test_a_word_is_its_base_state_and_its_flag(word, base, flags, ready):
    state = SLURM.parse(word)
    assert (state["base"], state["flags"], state["known"]) == (base, flags, True)
    assert SLURM.ready(word) is ready


@pytest.mark.parametrize("word", ["", "idle;rm -rf /", "\x1b[31midle", "x" * 41, None])
def test_what_is_no_state_word_is_unknown(word):
    assert SLURM.parse(word) == {"state": "unknown", "base": "unknown", "flags": "", "known": False}
    assert not SLURM.ready(word)


def test_a_node_taken_out_is_never_resting_whatever_its_flag():
    """The state decides, not a reason: Slurm 24.11 keeps old reasons beside idle."""
    for word in ("down~", "drained%", "fail#", "inval", "draining!"):
        assert SLURM.resting(word) is None, word
    assert SLURM.meaning("idle~") == "idle, powered down (power saving)"


def test_the_roles_wait_and_status_use_the_same_words():
    """The wait after a change (filter slurm_not_ready) and status's filter read a state alike."""
    waits = resources.plugin("filter.slurm_states")
    lines = ["gpu1|idle", "cpu1|idle*", "n1|idle~", "n2|drained", "n3|mixed-"]
    assert waits.slurm_not_ready(lines) == ["cpu1|idle*", "n2|drained"]
    assert all(FILTER.slurm_rows({"stdout": f"{line}|(null)\n"})[line.split("|")[0]]["ready"]
               is (line not in ("cpu1|idle*", "n2|drained")) for line in lines)  # fmt: skip


def test_the_state_module_is_the_only_place_with_the_flag_characters():
    """Any quoted run of three or more of Slurm's flag characters, in any order (a set of flags to
    strip or to look for), outside the state module: each such copy was once a different set."""
    root = Path(__file__).resolve().parents[3]
    flags = re.compile(r"""(["'])([*~#!%$@^+-]{3,})\1""")
    holders = [(p.relative_to(root).as_posix(), m.group(2)) for folder in ("meshctl", "plugins", "roles")
               for p in (root / folder).rglob("*") if p.is_file() and p.suffix in (".py", ".yml", ".j2", "")
               and "__pycache__" not in p.parts for m in flags.finditer(p.read_text(errors="replace"))
               if len(set(m.group(2))) >= 3]  # fmt: skip
    assert holders == [("plugins/module_utils/mesh_slurm.py", SLURM.POWER_FLAGS)], holders


@pytest.mark.parametrize("version", VERSIONS)
def test_the_wait_after_a_change_leaves_a_node_drained_before_the_run_as_it_was(version):
    """Filters slurm_not_ready and slurm_kept (role slurm_ready's wait), on what Slurm printed: a node
    drained or failed with a reason older than the run is not waited for (only a resume brings it
    back) and is said; drained during the run, DOWN (a restart may bring it back) or refused at
    registration (INVAL), it is waited for as before."""
    waits = resources.plugin("filter.slurm_states")
    began = 1_800_000_000

    def line(label, node, since):
        row = rows(version, label)[NODES[node]]
        return f"{NODES[node]}|{row['state']}|{since}|{row['reason'] or 'none'}"

    for label, node in (("drained", "b"), ("draining", "b"), ("fail", "a"), ("failing", "a"),
                        ("drained_silent", "b")):  # fmt: skip
        before, during = line(label, node, began - 60), line(label, node, began)
        assert waits.slurm_not_ready([before], began) == [] and waits.slurm_kept([before], began) == [before]
        assert waits.slurm_not_ready([during], began) == [during] and waits.slurm_kept([during], began) == []
        assert waits.slurm_not_ready([before]) == [before]  # no start known: waited for, as before
    for label, node in (("down", "a"), ("not_responding", "head")):
        old = line(label, node, began - 60)
        assert waits.slurm_not_ready([old], began) == [old], label
    if version == "slurm-22.05":
        short = line("gpus_short", "pool", began - 60)
        assert waits.slurm_not_ready([short], began) == [short]
    said = waits.slurm_kept_notes([f"gpu1|drained|{began - 60}|bad fan | check it", "cpu1|idle|0|none"], began)
    assert said == ["gpu1 stays drained as before this run (bad fan | check it): once its cause is gone, "
                    "`scontrol update nodename=gpu1 state=resume` on the head gives it jobs again "
                    "(the health check's own drain lifts itself)"]  # fmt: skip


def test_the_waits_lines_carry_the_time_of_each_nodes_reason(tmp_path):
    """Role slurm_ready's wait, its shell run against fake sinfo and scontrol: each node's line is
    name|state|since|reason, since the reason's time in seconds by this machine's clock (0 when
    Slurm says Unknown), the reason whole though it holds a ``|``; a node sinfo does not list
    (in no partition yet) reads from scontrol."""
    import os
    import subprocess

    import yaml

    root = Path(__file__).resolve().parents[3]
    tasks = yaml.safe_load((root / "roles" / "slurm_ready" / "tasks" / "main.yml").read_text())
    wait = next(t for t in tasks[0]["block"] if t["name"].startswith("Wait until sinfo"))
    nodes = "{{ slurm_wait_nodes | map('quote') | join(' ') }}"
    script = wait["ansible.builtin.shell"].replace(nodes, "gpu1 cpu1 new1")
    (tmp_path / "sinfo").write_text(
        '#!/bin/sh\ncase "$*" in\n*gpu1*) echo "gpu1|drained|2026-12-04T12:40:10|bad fan | check it" ;;\n'
        '*cpu1*) echo "cpu1|idle|Unknown|none" ;;\nesac\n'
    )
    shown = "NodeName=new1 Arch=x86_64 State=IDLE+DYNAMIC_NORM ThreadsPerCore=1"
    (tmp_path / "scontrol").write_text(f"#!/bin/sh\necho '{shown}'\n")
    for name in ("sinfo", "scontrol"):
        (tmp_path / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    since = subprocess.run(["date", "-d", "2026-12-04T12:40:10", "+%s"], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [f"gpu1|drained|{since.stdout.strip()}|bad fan | check it", "cpu1|idle|0|none",
                                        "new1|idle|0|none"]  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
def test_remove_node_waits_for_the_stops_slurm_began_as_slurm_prints_them(version):
    """Filter slurm_powering_down (roles/slurm_controller/tasks/drain.yml): of sinfo's `%N|%T` lines,
    the nodes whose SuspendProgram ran; on the recording of a node being stopped, that node alone."""
    waits = resources.plugin("filter.slurm_states")
    lines = [f"{name}|{row['state']}" for name, row in rows(version, "powering_down").items()]
    assert waits.slurm_powering_down(lines) == [NODES["a"]]
    for label in ("powered_down", "powering_up", "power_down_pending", "drained"):
        lines = [f"{name}|{row['state']}" for name, row in rows(version, label).items()]
        assert waits.slurm_powering_down(lines) == [], label
    assert waits.slurm_powering_down(["rp1|drained%", "rp1|drained%", "rp2|idle~", "garbage", ""]) == ["rp1"]
