"""The slurm role's version filters (plugins/module_utils/mesh_slurm_versions.py)."""

import pytest

from tests.conftest import load_file


@pytest.fixture(scope="module")
def sv():
    return load_file("plugins/module_utils/mesh_slurm_versions.py")


def test_major(sv):
    assert sv.slurm_major("22.05.8-4+deb12u3") == "22.05"
    assert sv.slurm_major("24.11.5-2") == "24.11"
    assert sv.slurm_major("23.11.4-1.2ubuntu5") == "23.11"
    assert sv.slurm_major(None) is None


def test_same_versions_are_fine(sv):
    assert sv.slurm_version_problems({"head": "22.05.8-4", "cpu1": "22.05.8-4"}, "head") == []


def test_two_older_majors_are_fine_before_24_11(sv):
    # 21.08 (Ubuntu 22.04) and 23.02 nodes under a 23.11 controller (Ubuntu 24.04)
    assert sv.slurm_version_problems({"head": "23.11.4", "a": "23.02.7", "b": "22.05.8"}, "head") == []


def test_three_older_majors_are_refused_before_24_11(sv):
    problems = sv.slurm_version_problems({"head": "23.11.4", "old": "21.08.5"}, "head")
    assert len(problems) == 1
    assert "old has slurmd 21.08.5" in problems[0]
    assert "3 major releases older" in problems[0]
    assert "upgrade old" in problems[0]


def test_24_11_accepts_three_older_majors(sv):
    # Debian 13 head (24.11) with Ubuntu 24.04 nodes (23.11): 24.05, 23.11 -> distance 2
    assert sv.slurm_version_problems({"head": "24.11.5", "n": "23.11.4"}, "head") == []
    assert sv.slurm_version_problems({"head": "24.11.5", "n": "23.02.7"}, "head") == []


def test_debian12_node_under_debian13_head_is_refused(sv):
    problems = sv.slurm_version_problems({"head": "24.11.5-2", "cpu1": "22.05.8-4+deb12u3"}, "head")
    assert problems and "cpu1" in problems[0] and "4 major releases older" in problems[0]


def test_node_newer_than_controller_is_refused(sv):
    problems = sv.slurm_version_problems({"head": "22.05.8", "new": "24.11.5"}, "head")
    assert problems == [
        "new has slurmd 24.11.5, newer than slurmctld 22.05.8 on head: upgrade the controller first or pin new to 22.05"
    ]


def test_unknown_future_major_sorts_in(sv):
    assert sv.slurm_version_problems({"head": "27.05.1", "n": "27.05.1"}, "head") == []
    assert sv.slurm_version_problems({"head": "26.05.1", "n": "27.05.0"}, "head")


def test_missing_package_is_named(sv):
    problems = sv.slurm_version_problems({"head": "22.05.8", "x": None}, "head")
    assert problems == ["no Slurm package is available on x: enable the distribution's repository"]


APT_INSTALLED = """slurmd:
  Installed: 22.05.8-4+deb12u3
  Candidate: 22.05.8-4+deb12u3
  Version table:
"""
APT_CANDIDATE = """slurmd:
  Installed: (none)
  Candidate: 24.11.5-2
"""
APT_NONE = """slurmd:
  Installed: (none)
  Candidate: (none)
"""


def test_apt_policy(sv):
    assert sv.apt_policy_version(APT_INSTALLED) == "22.05.8-4+deb12u3"
    assert sv.apt_policy_version(APT_CANDIDATE) == "24.11.5-2"
    assert sv.apt_policy_version(APT_NONE) is None
    assert sv.apt_policy_version("") is None


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("21.08.5-2ubuntu1", "static"),  # Ubuntu 22.04: no dynamic nodes yet
        ("22.05.8-4+deb12u3", "dynamic"),  # Debian 12
        ("23.11.4-1.2ubuntu5", "dynamic"),  # Ubuntu 24.04
        ("24.11.5-2", "dynamic"),  # Debian 13
    ],
)
def test_membership_follows_the_controllers_version(sv, version, expected):
    assert sv.slurm_membership(version) == expected


def test_membership_can_be_forced_static_but_not_dynamic_on_21_08(sv):
    assert sv.slurm_membership("24.11.5", "static") == "static"
    assert sv.slurm_membership("22.05.8", "dynamic") == "dynamic"
    with pytest.raises(ValueError, match=r"22\.05"):
        sv.slurm_membership("21.08.5", "dynamic")
    with pytest.raises(ValueError, match="auto, dynamic or static"):
        sv.slurm_membership("24.11.5", "yes")
    with pytest.raises(ValueError, match="version"):
        sv.slurm_membership(None)


# What each distribution ships: Ubuntu 22.04 21.08, Debian 12 22.05, Ubuntu 24.04 23.11, Debian 13 24.11.
VERSIONS = {
    "21.08": "21.08.5-2ubuntu1",
    "22.05": "22.05.8-4+deb12u3",
    "23.11": "23.11.4-1.2ubuntu5",
    "24.11": "24.11.5-2",
}
CGROUP = ("proctrack/cgroup", "task/cgroup,task/affinity")
# (major, cgroup version of every node, container) -> (proctrack, task, CgroupPlugin)
MATRIX = {
    ("21.08", 1, False): (*CGROUP, None),  # 21.08 has cgroup v1 plugins and no CgroupPlugin setting
    ("21.08", 2, False): ("proctrack/linuxproc", "task/affinity", None),  # Ubuntu 22.04 VMs boot v2 only
    ("21.08", 1, True): ("proctrack/linuxproc", "task/none", None),
    ("21.08", 2, True): ("proctrack/linuxproc", "task/none", None),
    ("22.05", 1, False): (*CGROUP, "cgroup/v1"),
    ("22.05", 2, False): (*CGROUP, "cgroup/v2"),
    ("22.05", 1, True): ("proctrack/linuxproc", "task/none", None),
    ("22.05", 2, True): ("proctrack/linuxproc", "task/none", None),
    ("23.11", 1, False): (*CGROUP, "cgroup/v1"),
    ("23.11", 2, False): (*CGROUP, "cgroup/v2"),
    ("23.11", 1, True): ("proctrack/linuxproc", "task/none", None),
    ("23.11", 2, True): ("proctrack/linuxproc", "task/none", None),
    ("24.11", 1, False): (*CGROUP, "cgroup/v1"),
    ("24.11", 2, False): (*CGROUP, "cgroup/v2"),
    ("24.11", 1, True): ("proctrack/linuxproc", "task/none", None),
    ("24.11", 2, True): ("proctrack/linuxproc", "task/none", None),
}


@pytest.mark.parametrize(("major", "cgroup", "container"), sorted(MATRIX))
def test_plugins_for_every_version_cgroup_and_machine_kind(sv, major, cgroup, container):
    chosen = sv.slurm_plugins(VERSIONS[major], [cgroup, cgroup], container)
    assert (chosen["proctrack"], chosen["task"], chosen["cgroup_plugin"]) == MATRIX[(major, cgroup, container)]


def test_nodes_that_differ_or_are_unknown_let_each_slurmd_detect(sv):
    assert sv.slurm_plugins("24.11.5", [1, 2], False)["cgroup_plugin"] == "autodetect"
    assert sv.slurm_plugins("22.05.8", [2, None], False)["cgroup_plugin"] == "autodetect"


def test_old_slurm_uses_cgroup_only_when_every_node_is_known_to_be_v1(sv):
    assert sv.slurm_plugins("21.08.5", [1, 2], False)["proctrack"] == "proctrack/linuxproc"
    assert sv.slurm_plugins("21.08.5", [1, None], False)["proctrack"] == "proctrack/linuxproc"


def test_plugins_need_a_version(sv):
    with pytest.raises(ValueError, match="cannot tell"):
        sv.slurm_plugins(None, [2], False)


# Mixed distributions: a Debian 13 node in a Debian 12 mesh gets 22.05 built.
MIXED = {"head": "22.05.8-4+deb12u3", "cpu12": "22.05.8-4+deb12u3", "cpu13": "24.11.5-4+deb13u1"}


def test_nodes_of_another_major_are_built_for(sv):
    assert sv.slurm_builds(MIXED, "22.05") == ["cpu13"]
    assert sv.slurm_builds(MIXED, "24.11") == ["cpu12", "head"]  # a mesh that chose 24.11
    assert sv.slurm_builds({"new": None, **MIXED}, "22.05") == ["cpu13"]  # no package: the version check says so


def test_a_built_node_counts_with_the_version_it_will_run(sv):
    assert sv.slurm_version_problems(MIXED, "head")  # refused as it is today
    effective = sv.slurm_effective_versions(MIXED, "22.05")
    assert effective["cpu13"] == "22.05" and effective["head"] == MIXED["head"]
    assert sv.slurm_version_problems(effective, "head") == []
    # With building off, nothing changes and the mesh is refused.
    assert sv.slurm_effective_versions(MIXED, "22.05", False) == MIXED


def test_a_mesh_major_that_is_no_version_is_an_error(sv):
    with pytest.raises(ValueError, match="mesh's Slurm version"):
        sv.slurm_builds(MIXED, "")


@pytest.mark.parametrize(
    ("release", "architecture"),
    [("x/../../root/.ssh", "x86_64"), ("..", "x86_64"), ("trixie", "../../etc"), ("trixie\n", "x86_64"),
     ("", "x86_64"), ("trixie", None), ("Trixie", "x86_64"), (".hidden", "x86_64")],
)  # fmt: skip
def test_a_build_folder_a_node_names_stays_in_the_cache(sv, release, architecture):
    with pytest.raises(sv.BuildPathError, match="is not a word"):
        sv.slurm_build_folder("/m/packages/slurm", "22.05", "bookworm", release, architecture)


def test_a_sound_build_folder(sv):
    folder = sv.slurm_build_folder("/m/packages/slurm/", "22.05", "bookworm", "trixie", "x86_64")
    assert folder == "/m/packages/slurm/22.05-bookworm/trixie-x86_64"
    with pytest.raises(sv.BuildPathError, match="not an absolute path"):
        sv.slurm_build_folder("packages", "22.05", "bookworm", "trixie", "x86_64")


def test_only_package_and_index_files_leave_a_build(sv):
    found = [{"path": "/var/tmp/b/out/slurm-wlm_22.05.8-4_amd64.deb"}, {"path": "/var/tmp/b/out/Packages"},
             {"path": "/var/tmp/b/out/VERSION"}, {"path": "/var/tmp/b/out/BUILD-INFO"}]  # fmt: skip
    assert sv.slurm_build_files(found) == ["BUILD-INFO", "Packages", "VERSION", "slurm-wlm_22.05.8-4_amd64.deb"]
    for bad in ("/x/..", "/x/.bashrc", "/x/authorized_keys", "/x/a.deb\n", "/x/-rf.deb"):
        with pytest.raises(sv.BuildPathError, match="build files meshctl refuses"):
            sv.slurm_build_files([*found, {"path": bad}])
