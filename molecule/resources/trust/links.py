#!/usr/bin/env python3
"""On a bed node (run by molecule/resources/verify_trust_*.yml as root): lay links where
users other than root could, at every name the roles write in folders such users may write; after
a converge, say whether root followed any of them, and put back what was there.

    links.py plant FOLDERS_JSON [--share PATH --not-share-server]   -> {"unknown": [...], "planted": [...]}
    links.py check                                                   -> {"witness": "...", "changed": [...]}

FOLDERS_JSON maps a folder (an fnmatch pattern) to the names the roles write in it. A folder users
other than root may write that no pattern matches is "unknown": the play fails naming it.
"""

import fnmatch
import json
import os
import shutil
import stat
import subprocess
import sys

WITNESS = "/root/meshctl-witness"  # a root-only folder holding one file
WITNESS_FILE = "/root/meshctl-witness.file"
PLANTED = "/root/meshctl-planted.json"
KEPT = ".meshctl-verify-kept"
SKIPPED = ("/proc", "/sys", "/dev", "/run", "/tmp", "/var/tmp", "/var/cache", "/var/lib/apt")


def others_folders():
    """The first folder of each branch that a user other than root owns or anyone may write."""
    prune = " -o ".join(f"-path {p}" for p in SKIPPED)
    command = f"find / -xdev \\( {prune} \\) -prune -o -type d \\( -perm -o+w -o ! -user root \\) -print -prune"
    return sorted(subprocess.run(command, shell=True, capture_output=True, text=True, check=False).stdout.split())


def witness_state():
    entries = sorted(os.listdir(WITNESS))
    folder, file_, inner = os.lstat(WITNESS), os.lstat(WITNESS_FILE), os.lstat(f"{WITNESS}/file")
    with open(WITNESS_FILE) as one, open(f"{WITNESS}/file") as two:
        texts = (one.read(), two.read())
    return [entries, [[s.st_uid, s.st_gid, stat.S_IMODE(s.st_mode)] for s in (folder, file_, inner)], list(texts)]


def plant(folders, share, share_server):
    found = others_folders()
    unknown = [f for f in found if not any(fnmatch.fnmatch(f, pattern) for pattern in folders)]
    for path in (WITNESS, WITNESS_FILE):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
    os.mkdir(WITNESS, 0o700)
    for path in (f"{WITNESS}/file", WITNESS_FILE):
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write("root's\n")
    planted = []
    for folder in found:
        if folder == share and not share_server:
            continue  # the nodes mount the share its server holds: laid there once
        names = sorted({n for pattern, listed in folders.items() if fnmatch.fnmatch(folder, pattern) for n in listed})
        for name in names:
            path = os.path.join(folder, name)
            if os.path.lexists(path):
                os.rename(path, path + KEPT)
            os.symlink(WITNESS_FILE if "." in name.lstrip(".") else WITNESS, path)
            planted.append(path)
    with open(PLANTED, "w") as handle:
        json.dump({"planted": planted, "witness": witness_state()}, handle)
    return {"unknown": unknown, "planted": planted}


def check():
    with open(PLANTED) as handle:
        record = json.load(handle)
    now = witness_state()
    restored = []
    for path in record["planted"]:
        if os.path.islink(path) or os.path.isfile(path):
            os.unlink(path)
        elif os.path.isdir(path):
            shutil.rmtree(path)  # made anew by the converge: what was there goes back
        if os.path.lexists(path + KEPT):
            os.rename(path + KEPT, path)
        restored.append(path)
    os.unlink(PLANTED)
    return {
        "witness_before": record["witness"],
        "witness_after": now,
        "followed": now != record["witness"],
        "restored": restored,
    }


def main(argv):
    if argv[1] == "plant":
        share = argv[argv.index("--share") + 1] if "--share" in argv else ""
        print(json.dumps(plant(json.loads(argv[2]), share, "--not-share-server" not in argv)))
    else:
        print(json.dumps(check()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
