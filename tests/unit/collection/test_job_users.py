"""The job_users role's checks (plugins/module_utils/mesh_job_users.py): the mesh's list, and a node's accounts."""

from pathlib import Path

import pytest
import yaml

from tests.conftest import load_file


@pytest.fixture(scope="module")
def ju():
    return load_file("plugins/module_utils/mesh_job_users.py")


GOOD = [{"name": "alice", "uid": 2001, "comment": "Alice Example"}, {"name": "bob", "uid": 2002}]


def test_a_sound_list_has_no_problems(ju):
    assert ju.job_users_problems(GOOD, "meshjobs", 2000) == []
    assert ju.job_users_problems([], "meshjobs", 2000) == []


@pytest.mark.parametrize(
    ("users", "expected"),
    [
        ("alice", "must be a list"),
        ([["alice", 2001]], "entry 1 must be a mapping"),
        ([{"name": "alice", "uid": 2001, "shell": "/bin/sh"}], "entry 1 must be a mapping"),
        ([{"name": "Alice", "uid": 2001}], "name 'Alice' is not a valid user name"),
        ([{"name": "al;ice", "uid": 2001}], "is not a valid user name"),
        ([{"name": "-alice", "uid": 2001}], "is not a valid user name"),
        ([{"name": "a" * 33, "uid": 2001}], "is not a valid user name"),
        ([{"name": "alice", "uid": 0}], "uid 0 must be a whole number from 1000 to 59999"),
        ([{"name": "alice", "uid": 65534}], "uid 65534 must be"),
        ([{"name": "alice", "uid": "2001"}], "uid '2001' must be"),
        ([{"name": "alice", "uid": True}], "uid True must be"),
        ([{"name": "alice"}], "uid None must be"),
        ([{"name": "alice", "uid": 2001}, {"name": "alice", "uid": 2002}], "user alice is listed twice"),
        ([{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2001}], "uid 2001 is also the uid of entry 1"),
        ([{"name": "alice", "uid": 2001, "comment": "A:B"}], "comment must be text without ':'"),
        ([{"name": "alice", "uid": 2001, "comment": "A\nB"}], "comment must be text"),
        # The system's and its daemons' accounts are never a job user.
        ([{"name": "root", "uid": 2001}], "root is an account of the system or its daemons"),
        ([{"name": "slurm", "uid": 2001}], "slurm is an account of the system or its daemons"),
        ([{"name": "mlflow", "uid": 2001}], "mlflow is an account of the system or its daemons"),
    ],
)
def test_bad_lists_are_named(ju, users, expected):
    problems = ju.job_users_problems(users, "meshjobs", 2000)
    assert any(expected in problem for problem in problems), problems


@pytest.mark.parametrize(
    ("group", "gid", "expected"),
    [
        ("Mesh Jobs", 2000, "job_users_group 'Mesh Jobs'"),
        ("meshjobs", 99, "job_users_gid 99"),
        ("meshjobs", "x", "job_users_gid 'x'"),
    ],
)
def test_bad_group_is_named(ju, group, gid, expected):
    assert any(expected in p for p in ju.job_users_problems(GOOD, group, gid))


PASSWD = {
    "root": ["x", "0", "0", "root", "/root", "/bin/bash"],
    "debian": ["x", "1000", "1000", "", "/home/debian", "/bin/bash"],
}
GROUP = {"root": ["x", "0", ""], "debian": ["x", "1000", ""]}


def test_a_fresh_node_has_no_conflicts(ju):
    assert ju.job_users_conflicts(GOOD, "meshjobs", 2000, PASSWD, GROUP) == []


def test_a_node_that_already_matches_has_no_conflicts(ju):
    passwd = {**PASSWD, "alice": ["x", "2001", "2000", "", "/home/alice", "/bin/bash"]}
    group = {**GROUP, "meshjobs": ["x", "2000", ""]}
    assert ju.job_users_conflicts(GOOD, "meshjobs", 2000, passwd, group) == []


def test_a_user_with_another_uid_is_refused_with_the_fix(ju):
    passwd = {**PASSWD, "alice": ["x", "1001", "1001", "", "/home/alice", "/bin/bash"]}
    (conflict,) = ju.job_users_conflicts(GOOD, "meshjobs", 2000, passwd, GROUP)
    assert "user alice has UID 1001 here, the mesh says 2001" in conflict
    assert "usermod -u 2001 alice" in conflict and "set its uid to 1001" in conflict


def test_a_uid_taken_by_someone_else_is_refused(ju):
    (conflict,) = ju.job_users_conflicts([{"name": "alice", "uid": 1000}], "meshjobs", 2000, PASSWD, GROUP)
    assert "UID 1000 (for alice) belongs to user debian here" in conflict


def test_a_group_with_another_gid_is_refused(ju):
    group = {**GROUP, "meshjobs": ["x", "3000", ""]}
    (conflict,) = ju.job_users_conflicts(GOOD, "meshjobs", 2000, PASSWD, group)
    assert "group meshjobs has GID 3000 here, the mesh says 2000" in conflict and "groupmod -g 2000" in conflict


def test_a_gid_taken_by_another_group_is_refused(ju):
    (conflict,) = ju.job_users_conflicts(GOOD, "meshjobs", 1000, PASSWD, GROUP)
    assert "GID 1000 belongs to group debian here" in conflict


GETENT = """root:x:0:0:root:/root:/bin/bash
alice:x:2001:2000:Alice Example:/home/alice:/bin/bash
bob:x:2002:2000::/home/bob:/bin/sh
---
root:x:0:
meshjobs:x:2000:alice,bob
"""


def test_one_command_reads_both_account_databases(ju):
    tables = ju.getent_tables(GETENT)
    assert tables["passwd"]["alice"] == ["x", "2001", "2000", "Alice Example", "/home/alice", "/bin/bash"]
    assert tables["group"]["meshjobs"] == ["x", "2000", "alice,bob"]
    assert "meshjobs" not in tables["passwd"] and "alice" not in tables["group"]
    # What job_users_conflicts reads: the same shape as ansible.builtin.getent's facts.
    assert ju.job_users_conflicts(GOOD, "meshjobs", 2000, tables["passwd"], tables["group"]) == []
    assert ju.getent_tables("") == {"passwd": {}, "group": {}}


def test_only_missing_or_different_accounts_need_the_user_module(ju):
    passwd = ju.getent_tables(GETENT)["passwd"]
    # alice matches in every field the role sets; bob's shell differs; carol is missing.
    users = [*GOOD, {"name": "carol", "uid": 2003}]
    pending = ju.job_users_pending(users, 2000, "/bin/bash", "/home", passwd)
    assert [u["name"] for u in pending] == ["bob", "carol"]
    # A comment the list does not give is left alone; one it gives must match.
    assert ju.job_users_pending([{"name": "bob", "uid": 2002}], 2000, "/bin/sh", "/home", passwd) == []
    renamed = [{"name": "alice", "uid": 2001, "comment": "Alice B."}]
    assert ju.job_users_pending(renamed, 2000, "/bin/bash", "/home", passwd) == renamed
    # Another primary group or home: the module must fix it.
    assert ju.job_users_pending(GOOD[:1], 2100, "/bin/bash", "/home", passwd) == GOOD[:1]
    assert ju.job_users_pending(GOOD[:1], 2000, "/bin/bash", "/srv/home", passwd) == GOOD[:1]


def test_no_job_user_takes_the_mlflow_admins_name():
    """A job user named as MLflow's admin account (mlflow_auth_username) would have the
    accounts task set the admin's password to theirs; role mlflow refuses it before anything runs."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    from tests.unit.collection.test_job_env import trusted

    role = Path(__file__).resolve().parents[3] / "roles" / "mlflow"
    loader = DataLoader()
    variables = {}
    for part in ("defaults", "vars"):
        variables.update(trusted(loader.load_from_file(str(role / part / "main.yml"))))
    check = next(t for t in yaml.safe_load((role / "tasks" / "check.yml").read_text())
                 if t.get("name") == "Check no account holder takes the admin's name")  # fmt: skip
    for users, allowed in (([{"name": "alice", "uid": 2001}], True), ([{"name": "mesh", "uid": 2001}], False)):
        t = Templar(loader=loader, variables={**variables, "job_users_list": users})
        assert t.evaluate_conditional(trust_as_template(check["ansible.builtin.assert"]["that"])) is allowed
