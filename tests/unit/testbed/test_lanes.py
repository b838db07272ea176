"""`make test` runs the e2e files and the Molecule scenarios in four lanes (Makefile `suites`):
every scenario is in exactly one lane, LATE_E2E, PROVIDERS_E2E and POD_E2E name e2e files that exist
(in one lane each), the files that share a rented machines' head run in one lane, and the
scenarios that share container names (default and debian13: head, gpu1, cpu1) are in the same
lane."""

import re
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
LANES = ("E2E_SCENARIOS", "MOLECULE_SCENARIOS", "PROVIDERS_SCENARIOS", "BUILD_SCENARIOS")  # each lane's scenarios


def make_list(name: str) -> list[str]:
    found = re.search(rf"^{name} :=[ \t]*(.*)$", (REPO / "Makefile").read_text(), re.M)
    assert found, f"the Makefile sets no {name}"
    return found.group(1).split()


def platforms(scenario: str) -> set[str]:
    config = yaml.safe_load((REPO / "molecule" / scenario / "molecule.yml").read_text())
    return {p["name"] for p in config.get("platforms", [])}


def test_every_scenario_runs_in_exactly_one_lane():
    scenarios = sorted(p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml"))
    lanes = [scenario for lane in LANES for scenario in make_list(lane)]
    assert sorted(lanes) == scenarios


def inventory(scenario: str) -> dict:
    config = yaml.safe_load((REPO / "molecule" / scenario / "molecule.yml").read_text())
    return config["provisioner"]["inventory"]


def test_the_build_lane_makes_what_the_default_scenario_looks_for_before_default_starts():
    """The scenario slurm_build builds the Slurm major the default scenario's mesh runs, into the
    folder its cpu13 looks in; the molecule lane starts default once the build lane said it ended."""
    built = inventory("slurm_build")["host_vars"]["build13"]
    default = inventory("default")["group_vars"]["all"]
    assert built["slurm_build_major"] == default["slurm_mesh_major"]
    assert built["slurm_build_cache_dir"] == default["slurm_build_cache_dir"]
    assert "slurm_build" in make_list("BUILD_SCENARIOS") and "default" in make_list("MOLECULE_SCENARIOS")
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"molecule_all\.py \\\n\s*--wait-for \$\(BUILT\) --wait-at-most \$\(BUILT_WAIT\) --before default",
                     makefile), "the molecule lane waits for the build lane before default"  # fmt: skip
    assert re.search(r"molecule_all\.py \$\(BUILD_SCENARIOS\); rc=\$\$\?; touch \$\(BUILT\)", makefile)
    # In the run's profile folder, which each run empties first (a word left by an earlier run, or
    # one written where PROFILE was not yet set, `/build.done`, would let default start at once).
    show = ["make", "-s", "--no-print-directory", "--eval", "show-built: ; @echo $(BUILT) $(PROFILE)", "show-built"]
    shown = subprocess.run(show, cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    assert shown == [f"{REPO}/build/profile/build.done", "build/profile"], shown


def test_molecule_all_waits_for_the_file_before_the_scenario_named_and_at_most_as_long_as_told(tmp_path, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("molecule_all", REPO / "scripts" / "molecule_all.py")
    molecule_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(molecule_all)
    done = tmp_path / "build.done"
    assert molecule_all.parse(["--wait-for", str(done), "--before", "default", "debian13", "default"]) == (
        ["debian13", "default"], done, "default", 3600)  # fmt: skip
    now = [0.0]
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds
        if now[0] >= 15:
            done.touch()

    assert molecule_all.wait_for(done, 3600, "default", clock=lambda: now[0], sleep=sleep) is True
    assert slept == [5, 5, 5]
    done.unlink()
    now[0] = 0.0
    later = lambda seconds: now.__setitem__(0, now[0] + seconds)  # noqa: E731
    assert molecule_all.wait_for(done, 12, "default", clock=lambda: now[0], sleep=later) is False
    assert "not there after 12 s: starting without it" in capsys.readouterr().out


def test_molecule_all_skips_the_first_destroy_only_where_a_scenario_left_nothing(tmp_path, monkeypatch):
    """What the sequence's first destroy would remove: the platforms' containers, the networks and named
    volumes they declare (docker inspect answering: here `true` answers for all, `false` for none), the
    bed's files of each platform, Molecule's record of the scenario as created."""
    import importlib.util

    from meshctl.localmesh import nodes

    spec = importlib.util.spec_from_file_location("molecule_all", REPO / "scripts" / "molecule_all.py")
    molecule_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(molecule_all)
    monkeypatch.setattr(nodes, "VM_FILES", tmp_path / "bed")
    cache = tmp_path / "cache"
    everything = molecule_all.leftovers("default", docker="true", cache=cache)
    assert {f"container {name}" for name in platforms("default")} <= set(everything)
    assert "network meshctl-molecule" in everything and "volume meshctl-molecule-share" in everything
    assert not any(item.startswith("volume /") for item in everything)  # bind mounts are no volumes
    assert molecule_all.leftovers("default", docker="false", cache=cache) == []
    (tmp_path / "bed" / "gpu1").mkdir(parents=True)
    assert molecule_all.leftovers("default", docker="false", cache=cache) == ["bed files gpu1"]
    state = cache / "molecule" / "checkout" / "tailscale" / "state.yml"
    state.parent.mkdir(parents=True)
    state.write_text("created: false\n")
    assert molecule_all.leftovers("tailscale", docker="false", cache=cache) == []
    state.write_text("created: true\n")
    assert molecule_all.leftovers("tailscale", docker="false", cache=cache) == [f"Molecule state {state}"]


def test_scenarios_of_different_lanes_share_no_container_name():
    names = [set().union(*(platforms(s) for s in make_list(lane))) for lane in LANES]
    assert names[1], names  # the e2e lane and the providers lane may run no scenario
    for i, one in enumerate(names):
        for other in names[i + 1 :]:
            assert not one & other, (one & other, LANES)


def test_the_late_the_providers_and_the_pod_e2e_files_exist_each_in_one_lane():
    late, providers, pods = make_list("LATE_E2E"), make_list("PROVIDERS_E2E"), make_list("POD_E2E")
    for files in (late, providers, pods):
        assert files and all((REPO / path).is_file() and path.startswith("tests/e2e/test_") for path in files)
    assert len({*late, *providers, *pods}) == len(late) + len(providers) + len(pods)


def test_the_files_that_share_a_rented_machines_head_run_in_one_lane_one_after_the_other():
    """A head of tests/e2e/rented.py (a session fixture: `rented`, `pods_head`) is set up once per
    pytest run and its files add and take out their nodes in turn: two lanes at once would each make
    it (the same container and network) under the other."""
    e2e = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests" / "e2e").glob("test_*.py"))
    providers, pods = make_list("PROVIDERS_E2E"), make_list("POD_E2E")
    rest = [f for f in e2e if f not in providers and f not in pods]  # the e2e lane (LATE_E2E too)
    heads = {"rented": set(), "pods_head": set()}
    for path in e2e:
        for fixture in re.findall(r"^def \w+\(([^)]*)\)", (REPO / path).read_text(), re.M):
            for name in heads:
                if re.search(rf"\b{name}\b", fixture):
                    heads[name].add(path)
    assert heads["rented"] and heads["pods_head"], heads
    for name, files in heads.items():
        lanes = [lane for lane in (rest, providers, pods) if files & set(lane)]
        assert len(lanes) == 1, (name, files)


def subnets(scenario: str) -> set[str]:
    config = yaml.safe_load((REPO / "molecule" / scenario / "molecule.yml").read_text())
    return {c["subnet"] for p in config.get("platforms", []) for n in p.get("docker_networks", [])
            for c in n.get("ipam_config", [])}  # fmt: skip


def test_no_two_things_that_may_run_at_once_share_a_network():
    # Docker refuses a network whose subnet overlaps another's: the e2e files (run one after the
    # other in a lane, but beside the other lanes) and the scenarios of the lanes each have their own.
    e2e = [m for path in sorted((REPO / "tests" / "e2e").glob("*.py"))
           for m in re.findall(r'"(100\.100\.\d+\.0/24)"', path.read_text())]  # fmt: skip
    lanes = [set().union(*(subnets(s) for s in make_list(lane))) for lane in LANES]
    assert e2e and len(e2e) == len(set(e2e)), e2e
    assert not set(e2e) & set().union(*lanes), (e2e, lanes)
    for i, one in enumerate(lanes):
        for other in lanes[i + 1 :]:
            assert not one & other, (one & other, LANES)


def test_the_e2e_runs_and_the_scenarios_get_meshctls_ansible_settings_and_none_of_the_test_beds():
    """tests/e2e/ansible.cfg (ANSIBLE_CONFIG of every meshctl run of the e2e files) sets nothing: it
    keeps the checkout's ansible.cfg out. .config/molecule/config.yml (merged under every molecule.yml)
    enables the preload callback (its poll interval among what it does), which meshctl's runs enable
    themselves (meshctl/runner.py), and so does the lanes' ANSIBLE_CALLBACKS_ENABLED, which wins over
    Molecule's setting. Neither sets what the callback decides (internal_poll_interval)."""
    import configparser

    from meshctl import runner

    e2e = configparser.ConfigParser()
    assert e2e.read(REPO / "tests" / "e2e" / "ansible.cfg")
    base = yaml.safe_load((REPO / ".config" / "molecule" / "config.yml").read_text())
    assert set(base) == {"provisioner"} and set(base["provisioner"]) == {"config_options"}
    molecule = base["provisioner"]["config_options"]
    assert molecule == {"defaults": {"callbacks_enabled": runner.PRELOAD_CALLBACK}}
    assert {s: dict(e2e[s]) for s in e2e.sections()} == {"defaults": {}}
    lanes = re.search(r"ANSIBLE_CALLBACKS_ENABLED=(\S+)", (REPO / "Makefile").read_text())
    assert lanes and runner.PRELOAD_CALLBACK in lanes[1].split(",")


def test_each_meshctl_run_enables_its_own_callbacks_beside_what_the_environment_enables(monkeypatch):
    from meshctl import runner

    own = "meshctl.mesh.preload,meshctl.mesh.stop_with_parent"
    monkeypatch.delenv("ANSIBLE_CALLBACKS_ENABLED", raising=False)
    assert runner.callbacks_enabled() == own
    monkeypatch.setenv("ANSIBLE_CALLBACKS_ENABLED", "ansible.posix.profile_tasks, ")
    assert runner.callbacks_enabled() == "ansible.posix.profile_tasks," + own
    monkeypatch.setenv("ANSIBLE_CALLBACKS_ENABLED", "meshctl.mesh.preload,ansible.posix.profile_tasks")
    said = "meshctl.mesh.preload,ansible.posix.profile_tasks,meshctl.mesh.stop_with_parent"
    assert runner.callbacks_enabled() == said
