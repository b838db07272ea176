"""The playbooks show what runs where: no role runs another role, site.yml names each role per
group with one tag (its name, or its family's), and `--list-tags` names them (kubespray's shape)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
PREFIX = "meshctl.mesh."
ROLE_KEYS = ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role")
STATIC = ("ansible.builtin.import_tasks",)  # tasks files a step takes in whole, for every host of it
FAMILIES = {"slurm": ("slurm_preflight", "slurm", "slurm_build", "slurm_controller", "slurm_node", "slurm_accounting",
                      "slurm_ready", "slurm_features"),
            "nfs": ("nfs_server", "nfs_client")}  # fmt: skip


def role_steps(node, found: list[dict]) -> list[dict]:
    """Every task under NODE that runs a role (include_role or import_role), as written."""
    if isinstance(node, dict):
        if any(key in node for key in ROLE_KEYS):
            found.append(node)
        for value in node.values():
            role_steps(value, found)
    elif isinstance(node, list):
        for value in node:
            role_steps(value, found)
    return found


def role_of(step: dict) -> str:
    spec = next(step[key] for key in ROLE_KEYS if key in step)
    return str(spec["name"]).removeprefix(PREFIX)


def site() -> list[dict]:
    return yaml.safe_load((REPO / "playbooks" / "site.yml").read_text())


def tag_of(role: str) -> str:
    return next((family for family, members in FAMILIES.items() if role in members), role)


def test_no_role_runs_another_role():
    files = [*(REPO / "roles").glob("*/tasks/*.yml"), *(REPO / "roles").glob("*/handlers/*.yml")]
    assert len(files) > 40
    runs = {f"{path.relative_to(REPO)}: {role_of(step)}" for path in files
            for step in role_steps(yaml.safe_load(path.read_text()), [])}  # fmt: skip
    assert runs == set(), f"a role runs another (site.yml runs each on its group): {sorted(runs)}"


def test_the_walk_finds_a_role_step_in_a_block():
    tasks = [{"block": [{"ansible.builtin.include_role": {"name": "meshctl.mesh.x"}}]}]
    assert [role_of(step) for step in role_steps(tasks, [])] == ["x"]


def test_site_names_each_role_per_group_with_one_tag_its_name_or_its_familys():
    roles_run = set()
    for play in site():
        if "import_playbook" in str(play):
            assert play.get("tags") == ["always"], play
            continue
        hosts = play["hosts"].removesuffix(":!settled")
        assert hosts in ("head", "compute", "head:compute", "pod", "tailnet"), play["name"]
        for step in role_steps([play.get("tasks"), play.get("post_tasks")], []):
            role = role_of(step)
            roles_run.add(role)
            tags = step.get("tags")
            assert tags in ([tag_of(role)], ["always"]), f"{play['name']}: {step['name']} has tags {tags}"
            include = step.get("ansible.builtin.include_role")
            if include:  # an include's own tags are not its tasks': `apply` hands them down
                assert include.get("apply", {}).get("tags") == tags, f"{step['name']}: no `apply: tags: {tags}`"
    with_tasks = {path.parent.parent.name for path in (REPO / "roles").glob("*/tasks/main.yml")}
    assert with_tasks - roles_run == {"doctor"}, "every role with tasks but doctor's (playbooks/doctor.yml) runs here"


def entry_points(plays) -> list[tuple[str, str]]:
    """(role, entry point) of every role step of PLAYS, in order."""
    steps = role_steps([[play.get("tasks"), play.get("post_tasks")] for play in plays if isinstance(play, dict)], [])
    return [(role_of(step), next(step[key] for key in ROLE_KEYS if key in step).get("tasks_from", "main"))
            for step in steps]  # fmt: skip


def test_site_is_a_table_each_role_entered_at_main_and_at_most_one_other_point():
    """site.yml reads as a table: under 150 lines, and a role is a phase of its own rather than a
    library of task files the playbook calls in an order only comments explain."""
    assert len((REPO / "playbooks" / "site.yml").read_text().splitlines()) < 150
    others: dict[str, set[str]] = {}
    for role, entry in entry_points(site()):
        if entry != "main":
            others.setdefault(role, set()).add(entry)
    assert {role: entries for role, entries in others.items() if len(entries) > 1} == {}, others


def test_the_table_check_finds_a_role_entered_at_two_other_points():
    plays = [{"tasks": [{"ansible.builtin.import_role": {"name": "meshctl.mesh.x", "tasks_from": "a"}},
                        {"ansible.builtin.include_role": {"name": "meshctl.mesh.x", "tasks_from": "b"}}]}]  # fmt: skip
    assert entry_points(plays) == [("x", "a"), ("x", "b")]


def test_every_entry_point_a_playbook_uses_is_named_in_its_roles_readme():
    """An entry point other than `main` is a way into the role from a playbook: its README names it
    (`NAME` or `tasks_from: NAME`, in a table row, a heading or a sentence)."""
    unnamed = set()
    for path in sorted((REPO / "playbooks").rglob("*.yml")):
        for role, entry in entry_points(yaml.safe_load(path.read_text()) or []):
            readme = (REPO / "roles" / role / "README.md").read_text()
            if entry != "main" and f"`{entry}`" not in readme and f"`tasks_from: {entry}`" not in readme:
                unnamed.add(f"{path.relative_to(REPO)}: {role} `{entry}`")
    assert unnamed == set(), sorted(unnamed)
    uses = {(role, entry) for path in (REPO / "playbooks").rglob("*.yml")
            for role, entry in entry_points(yaml.safe_load(path.read_text()) or [])}  # fmt: skip
    assert {("doctor", "measure"), ("munge", "rotate"), ("slurm_node", "leave")} <= uses  # the walk sees them


def test_the_settings_only_roles_are_declared_not_run():
    for role in ("mesh", "slurm_defaults"):
        assert not (REPO / "roles" / role / "tasks").exists(), role
    for role in FAMILIES["slurm"]:
        meta = yaml.safe_load((REPO / "roles" / role / "meta" / "main.yml").read_text())
        assert {"role": PREFIX + "slurm_defaults"} in meta["dependencies"], role


def test_list_tags_names_one_tag_per_role_and_tags_nfs_runs_the_shares_roles_only():
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    bin_dir = Path(sys.executable).parent
    listed = subprocess.run([str(bin_dir / "ansible-playbook"), "playbooks/site.yml", "--list-tags"], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    tags = set()
    for line in listed.stdout.splitlines():
        if "TASK TAGS:" in line:
            tags |= {tag.strip() for tag in line.split("[", 1)[1].rstrip("]").split(",") if tag.strip()}
    run = {role_of(step) for play in site() for step in role_steps([play.get("tasks"), play.get("post_tasks")], [])}
    assert tags == {tag_of(role) for role in run} - {"mesh_facts", "mesh_settings"} | {"always"}, tags
    tasks = subprocess.run([str(bin_dir / "ansible-playbook"), "playbooks/site.yml", "--list-tasks", "--tags", "nfs"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert tasks.returncode == 0, tasks.stderr
    named = [line.strip() for line in tasks.stdout.splitlines() if "TAGS:" in line and "play #" not in line]
    nfs = [line for line in named if line.startswith(("meshctl.mesh.nfs_server :", "meshctl.mesh.nfs_client :"))]
    assert {line.split(" :")[0] for line in nfs} == {"meshctl.mesh.nfs_server", "meshctl.mesh.nfs_client"}, tasks.stdout
    # Besides the share's roles: only what every step needs (the checks, the hardware facts).
    assert all(line.endswith("TAGS: [always]") for line in named if line not in nfs), tasks.stdout
    assert len(nfs) >= 10, tasks.stdout


def settled_steps() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(role, entry point) of every site.yml step a head (that runs jobs) runs, as (settled, not settled): a settled
    node is in no play whose hosts say `:!settled`, and skips a step whose `when` says `not
    mesh_settled` (a condition of its own, never part of another)."""
    settled, full = [], []
    for play in site():
        hosts = str(play.get("hosts", ""))
        if "import_playbook" in str(play) or not ({"head", "compute", "tailnet"} & set(hosts.split(":"))):
            continue
        for step in role_steps([play.get("tasks"), play.get("post_tasks")], []):
            spec = next(step[key] for key in ROLE_KEYS if key in step)
            entry = (role_of(step), spec.get("tasks_from", "main"))
            full.append(entry)
            when = step.get("when") or ""
            when = " and ".join(when) if isinstance(when, list) else str(when)
            if "mesh_settled" in when:
                assert "not mesh_settled" in when.split(" and "), f"{step['name']}: {when}"
            if not hosts.endswith(":!settled") and "not mesh_settled" not in when:
                settled.append(entry)
    return settled, full


def test_a_settled_head_gets_the_membership_steps_and_none_of_its_own():
    """The head of an add-node (or of an `apply --limit` of other nodes) was converged before: it
    gets what the new nodes change on it (Slurm's files and daemon, the power plan, the relaunch
    list, the share's exports, the names, the features) and the first play's checks, never the
    steps that only repair it (its tailnet, users, munge, job environment, MLflow, accounting,
    slurmd, share mount, device rules)."""
    settled, full = settled_steps()
    assert set(settled) == {
        ("mesh_settings", "main"), ("munge", "secret"), ("mesh_facts", "main"), ("pod_volume", "apt_keep"),
        ("mesh_base", "python_apt"), ("slurm_preflight", "main"), ("mlflow", "prepare"), ("mesh_base", "main"),
        ("slurm_build", "main"), ("slurm", "main"), ("power_save", "main"), ("relaunch", "main"),
        ("slurm_controller", "main"), ("slurm_controller", "start"), ("slurm_ready", "main"),
        ("nfs_server", "main"), ("slurm", "names"), ("pod_volume", "main"), ("slurm_features", "main"),
        ("slurm_node", "start"),
    }, settled  # fmt: skip
    skipped = set(full) - set(settled)
    assert skipped == {
        ("tailscale", "main"), ("job_users", "main"), ("munge", "main"), ("job_env", "main"),
        ("slurm_accounting", "main"), ("slurm_node", "main"), ("nfs_client", "main"), ("mlflow", "main"),
        ("job_env", "wait"), ("nvidia_udev", "main"),
    }, skipped  # fmt: skip


def test_no_step_a_settled_node_skips_by_its_when_has_a_run_once_task():
    """A step skipped on a settled node by its `when` is still a step of the play: a `run_once` task
    in it (or in a file it imports) runs on the play's first host only, and skipped there (the head
    is first), it would be skipped for the new nodes too. Such a role leaves the settled node out of
    its play instead (`hosts: ...:!settled`). A file the step includes is safe: only the hosts that
    took the include run its tasks, so its `run_once` runs on the first of them."""
    found = []
    for play in site():
        for step in role_steps([play.get("tasks"), play.get("post_tasks")], []):
            when = step.get("when") or ""
            when = " and ".join(when) if isinstance(when, list) else str(when)
            if "not mesh_settled" not in when:
                continue
            spec = next(step[key] for key in ROLE_KEYS if key in step)
            for path in task_files(role_of(step), spec.get("tasks_from", "main"), STATIC):
                if "run_once" in path.read_text():
                    found.append(str(path.relative_to(REPO)))
    assert found == [], f"skipped on a settled head by `when`, yet run_once inside: {found}"
    # The walk finds such a task where there is one (mlflow's main imports check.yml).
    assert REPO / "roles/mlflow/tasks/check.yml" in task_files("mlflow", "main", STATIC)
    assert "run_once" in (REPO / "roles/mlflow/tasks/check.yml").read_text()


def test_the_run_inventory_alone_has_group_settled():
    """The run group `settled` site.yml reads is the run's: mesh.yml never holds it."""
    from meshctl.mesh import to_inventory
    from meshctl.model import Node

    head = Node("head", "10.0.0.1", roles=["head", "compute"], state="active", mesh_address="10.0.0.1")
    node = Node("n1", "10.0.0.2", mesh_address="10.0.0.2")
    inventory = to_inventory([head, node], {}, facts={}, converging={"head", "n1"}, settled={"head"})
    assert inventory["all"]["children"]["settled"] == {"hosts": {"head": {}}}
    assert "settled" not in to_inventory([head, node], {})["all"]["children"]  # mesh.yml never holds it
    assert to_inventory([head, node], {}, facts={})["all"]["children"]["settled"] == {"hosts": {}}


def task_files(
    role: str, entry: str, keys=("ansible.builtin.include_tasks", "ansible.builtin.import_tasks")
) -> list[Path]:
    """ROLE's tasks file ENTRY and every file it includes or imports (KEYS), by name."""
    folder = REPO / "roles" / role / "tasks"
    todo, seen = [folder / f"{entry}.yml"], []
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.append(path)
        for step in yaml.safe_load(path.read_text()) or []:
            for key in keys:
                if isinstance(step, dict) and isinstance(step.get(key), str):
                    todo.append(folder / step[key])
    return seen


def test_no_step_of_a_head_only_play_reads_the_plays_hosts_for_the_runs_nodes():
    """A play on the head alone has the head as its only play host: a step there that took
    `ansible_play_hosts` for this run's nodes would see none (the head's wait waited for no node,
    and a relaunched node kept its old address in Slurm). Such steps read what the nodes' own plays
    registered instead."""
    found = []
    for play in site():
        if play.get("hosts") != "head":
            continue
        for step in role_steps([play.get("tasks")], []):
            spec = next(step[key] for key in ROLE_KEYS if key in step)
            for path in task_files(role_of(step), spec.get("tasks_from", "main")):
                if "ansible_play_hosts" in path.read_text():
                    found.append(str(path.relative_to(REPO)))
    assert found == [], f"run on the head alone, yet read ansible_play_hosts: {found}"
    assert task_files("slurm_ready", "main") == [REPO / "roles/slurm_ready/tasks/main.yml"]


def test_the_heads_wait_takes_the_nodes_whose_slurmd_the_run_started(tmp_path):
    """Role slurm_ready, evaluated by Ansible: a node whose start ran (or was skipped:
    a pod, a burst pool's node) is waited for unless its start failed, and a node the run never
    reached is not; burst pools' nodes start last, after the wait."""
    ready = yaml.safe_load((REPO / "roles" / "slurm_ready" / "tasks" / "main.yml").read_text())
    expression = ready[0]["vars"]["slurm_wait_nodes"]
    hosts = {
        "pod": {"slurm_node_start": {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}},
        "gpu1": {"slurm_node_start": {"changed": True, "failed": False}},
        "cpu1": {"slurm_node_start": {"changed": False, "failed": True, "msg": "slurmd did not start"}},
        "h100-1": {"slurm_node_start": {"changed": False, "skipped": True}},
        "away": {},
    }
    inventory = {"all": {"hosts": hosts, "vars": {"slurm_compute_group": "compute", "mesh_burst_nodes": ["h100-1"]},
                         "children": {"compute": {"hosts": {name: {} for name in hosts}}}}}  # fmt: skip
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    play = [{"hosts": "localhost", "gather_facts": False,
             "tasks": [{"ansible.builtin.debug": {"msg": expression}}]}]  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}, "ANSIBLE_STDOUT_CALLBACK": "json"}
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "inventory.yml", "play.yml"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    said = json.loads(done.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
    assert said == ["gpu1", "pod"]


def test_a_leaving_node_leaves_the_tailnet_last():
    """Its logout ends a connection that runs over the tailnet (roles/tailscale/tasks/leave.yml starts
    it in the background then): a step after it would find the node gone and be skipped as
    unreachable, leaving what it was to remove (a pod's copy of the munge key) behind."""
    plays = yaml.safe_load((REPO / "playbooks" / "remove_node.yml").read_text())
    leaving = next(play for play in plays if play.get("hosts") == "leaving")
    roles = [role_of(step) for step in role_steps(leaving["tasks"], [])]
    assert roles[-1] == "tailscale" and roles.count("tailscale") == 1, roles
    assert "pod_volume" in roles


def test_remove_node_takes_the_node_from_the_power_program_before_it_drains_it():
    """A drained idle node is still stopped by power saving: the program's list is rewritten without
    the leaving node first (role power_save, `plan`), so that no stop takes its machine away while
    remove-node works on it."""
    plays = yaml.safe_load((REPO / "playbooks" / "remove_node.yml").read_text())
    first_on_head = next(play for play in plays if play.get("hosts") == "head")
    steps = [(role_of(step), next(step[k] for k in ROLE_KEYS if k in step).get("tasks_from", "main"))
             for step in role_steps(first_on_head["tasks"], [])]  # fmt: skip
    assert steps == [("power_save", "plan"), ("slurm_controller", "drain")], steps
    plan = yaml.safe_load((REPO / "roles" / "power_save" / "tasks" / "plan.yml").read_text())
    copies = [t for t in plan if "ansible.builtin.copy" in t]
    assert copies and all("nodes.json" in str(t["loop"]) and "watched.json" in str(t["loop"]) for t in copies), copies
    defaults = (REPO / "roles" / "mesh" / "defaults" / "main.yml").read_text()
    assert "difference(groups['leaving']" in defaults  # the plan leaves the leaving node out
