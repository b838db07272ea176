# Copyright: meshctl contributors; Apache-2.0
"""The job_users role's checks (its filters adapt these): check the mesh's list of job users,
and compare it with a node.

Slurm runs a job on every node as the UID it was submitted with, and NFS writes files with that
UID: the same user name must have the same UID (and group) on every node. These functions only
decide; the role reads the node's account databases and acts.
"""

from __future__ import annotations

import re

# What useradd accepts without --badname, kept short (Slurm prints names in 8-column tables).
NAME_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}\Z")
# Ordinary accounts: above the system range, below nobody (65534) and the subordinate-ID ranges.
ID_LOW, ID_HIGH = 1000, 59999
# Accounts that are the system's or its daemons': never a job user (the role would change them).
RESERVED = ("root", "nobody", "daemon", "bin", "sys", "slurm", "munge", "mlflow")


def _id(value, low=ID_LOW, high=ID_HIGH):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def job_users_problems(users, group_name, gid):
    """[] when the list of job users is sound; else one message per problem."""
    problems = []
    if not isinstance(group_name, str) or not NAME_RE.match(group_name):
        problems.append(f"job_users_group {group_name!r} is not a valid group name (lower case, digits, _ and -)")
    if _id(gid) is None:
        problems.append(f"job_users_gid {gid!r} must be a whole number from {ID_LOW} to {ID_HIGH}")
    if not isinstance(users, list):
        return [*problems, "job_users_list must be a list of {name: ..., uid: ...} entries"]
    seen_names, seen_uids = {}, {}
    for number, user in enumerate(users, start=1):
        where = f"job_users_list entry {number}"
        if not isinstance(user, dict) or set(user) - {"name", "uid", "comment"}:
            problems.append(f"{where} must be a mapping with name, uid and optionally comment")
            continue
        name, uid = user.get("name"), user.get("uid")
        if not isinstance(name, str) or not NAME_RE.match(name):
            problems.append(f"{where}: name {name!r} is not a valid user name (lower case, digits, _ and -)")
        elif name in RESERVED:
            problems.append(f"{where}: {name} is an account of the system or its daemons: give the person another name")
        elif name in seen_names:
            problems.append(f"{where}: user {name} is listed twice (entries {seen_names[name]} and {number})")
        else:
            seen_names[name] = number
        if _id(uid) is None:
            problems.append(f"{where}: uid {uid!r} must be a whole number from {ID_LOW} to {ID_HIGH}")
        elif uid in seen_uids:
            problems.append(f"{where}: uid {uid} is also the uid of entry {seen_uids[uid]}")
        else:
            seen_uids[uid] = number
        comment = user.get("comment", "")
        if not isinstance(comment, str) or any(c in comment for c in ":\n\r\0"):
            problems.append(f"{where}: comment must be text without ':' or line breaks")
    return problems


def job_users_conflicts(users, group_name, gid, passwd, group):
    """Where a node's accounts disagree with the mesh's list, one message each.

    ``passwd`` and ``group`` are what ``ansible.builtin.getent`` returns (name -> the other
    fields as strings: passwd ``[x, uid, gid, gecos, home, shell]``, group ``[x, gid, members]``).
    """
    conflicts = []
    by_uid = {int(fields[1]): name for name, fields in passwd.items() if len(fields) > 1 and fields[1].isdigit()}
    by_gid = {int(fields[1]): name for name, fields in group.items() if len(fields) > 1 and fields[1].isdigit()}
    if group_name in group and group[group_name][1] != str(gid):
        conflicts.append(
            f"group {group_name} has GID {group[group_name][1]} here, the mesh says {gid}: "
            f"change it on this node (groupmod -g {gid} {group_name}) or set job_users_gid: "
            f"{group[group_name][1]}"
        )
    elif by_gid.get(gid, group_name) != group_name:
        conflicts.append(
            f"GID {gid} belongs to group {by_gid[gid]} here: choose another job_users_gid, or rename that group"
        )
    for user in users:
        name, uid = user["name"], user["uid"]
        if name in passwd and passwd[name][1] != str(uid):
            conflicts.append(
                f"user {name} has UID {passwd[name][1]} here, the mesh says {uid}: change it on this node "
                f"(usermod -u {uid} {name}, then chown its files) or set its uid to {passwd[name][1]} in job_users_list"
            )
        elif by_uid.get(uid, name) != name:
            conflicts.append(
                f"UID {uid} (for {name}) belongs to user {by_uid[uid]} here: "
                f"choose another uid for {name} in job_users_list"
            )
    return conflicts


def getent_tables(text):
    """The output of ``getent passwd; echo ---; getent group`` as {"passwd": ..., "group": ...}.

    Each table maps a name to its other fields, as ``ansible.builtin.getent`` returns them (one
    command reads both databases: a module run per database costs a round trip on every node).
    """
    tables, names = {"passwd": {}, "group": {}}, iter(("passwd", "group"))
    table = tables[next(names)]
    for line in str(text).splitlines():
        if line.strip() == "---":
            table = tables[next(names)]
        elif ":" in line:
            name, *fields = line.split(":")
            table[name] = fields
    return tables


def job_users_pending(users, gid, shell, home_base, passwd):
    """The job users ``ansible.builtin.user`` would create or change on a node, given its passwd.

    An account that is there with the mesh's UID, group, home, shell and comment needs no module
    run (a no-op converge skips it); UID conflicts are refused before, by job_users_conflicts.
    """
    pending = []
    for user in users:
        fields = passwd.get(user["name"])
        wanted = ["x", str(user["uid"]), str(gid), None, f"{home_base}/{user['name']}", shell]
        if "comment" in user:
            wanted[3] = user["comment"]
        if (
            fields is None
            or len(fields) != len(wanted)
            or any(want is not None and have != want for have, want in zip(fields, wanted, strict=True))
        ):
            pending.append(user)
    return pending
