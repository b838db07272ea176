# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Account files on a node and accounts on the MLflow server, each in one module call.

The plain functions behind modules ``mesh_account_files`` and ``mesh_mlflow_accounts``. A user's
folder is theirs: root only creates a new file in it (from an open folder descriptor, never by
a path that could lead elsewhere) and renames it over whatever lies there; it never follows,
reads through, changes the owner of or writes into what the user put there (a link, a pipe, a hard
link to another file)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pwd
import stat

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_safe_write import SafeWriteError, replace

FOLDER_MODE = 0o700  # each account holder's folder: theirs, nobody else's
FILE_MODE = 0o400  # their account file: read-only, theirs
TOP_MODE = 0o755  # the folder of the folders: root's, everyone may find their own


class AccountsError(Exception):
    """What went wrong, for the run's message (never a password)."""


# ---- account files on a node ---------------------------------------------------------------


def _open_folder(name: str, dir_fd: int | None = None) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)


def same_file(fd_dir: int, filename: str, content: bytes, uid: int) -> bool:
    """Whether FILENAME in the open folder is already the account file: a plain file, no other
    name (one link), the holder's with group root, read-only, with CONTENT. Opened without
    following a link and without waiting on a pipe."""
    try:
        fd = os.open(filename, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd_dir)
    except OSError:
        return False  # missing, a link, or anything else that cannot be opened as it is
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size != len(content):
            return False
        if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != (uid, 0, FILE_MODE):
            return False
        return os.read(fd, len(content) + 1) == content
    finally:
        os.close(fd)


def write_file(fd_dir: int, filename: str, content: bytes, uid: int) -> None:
    """A new file beside FILENAME, the holder's (group root, 0400), renamed over FILENAME."""
    try:
        replace(fd_dir, filename, content, uid, 0, FILE_MODE)
    except SafeWriteError as err:
        raise AccountsError(str(err)) from None


def ensure_top(path: str, check: bool) -> bool:
    """The folder of the folders: a real folder (never a link), root's, 0755. Whether it changed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not check:
            os.makedirs(path, mode=TOP_MODE)
            os.chown(path, 0, 0)
            os.chmod(path, TOP_MODE)
        return True
    if not stat.S_ISDIR(st.st_mode):
        raise AccountsError(f"{path} is not a folder (a link or a file): remove it, then run again")
    if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, TOP_MODE):
        return False
    if not check:
        os.chown(path, 0, 0, follow_symlinks=False)
        os.chmod(path, TOP_MODE)
    return True


def holder_uid(name: str, check: bool) -> int | None:
    """The account holder's UID; None in check mode for a user this run would create first."""
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        if check:
            return None
        raise AccountsError(f"no user {name} on this node: it gets an account file only once it exists") from None


def ensure_holder(top_fd: int, name: str, filename: str, content: bytes, check: bool) -> tuple[bool, bool]:
    """NAME's folder (theirs, group root, 0700) and their file in it. (folder changed, file written)."""
    uid = holder_uid(name, check)
    if uid is None:
        return True, True
    try:
        st = os.stat(name, dir_fd=top_fd, follow_symlinks=False)
    except FileNotFoundError:
        if check:
            return True, True
        os.mkdir(name, FOLDER_MODE, dir_fd=top_fd)
        st = None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise AccountsError(f"{name}'s account folder is not a folder (a link or a file): remove it, then run again")
    folder_changed = st is None or (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != (uid, 0, FOLDER_MODE)
    if check and st is None:
        return True, True
    fd = _open_folder(name, top_fd)
    try:
        if folder_changed and not check:
            os.fchown(fd, uid, 0)
            os.fchmod(fd, FOLDER_MODE)
        if same_file(fd, filename, content, uid):
            return folder_changed, False
        if not check:
            write_file(fd, filename, content, uid)
        return folder_changed, True
    finally:
        os.close(fd)


def remove_plain(path: str, check: bool) -> bool:
    """Remove PATH when it is there and no folder (a link is removed, never followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(st.st_mode):
        raise AccountsError(f"{path} is a folder where an old account file was: remove it by hand")
    if not check:
        os.unlink(path)
    return True


def ensure_account_files(path: str, filename: str, files: dict[str, str], absent: list[str], check: bool) -> dict:
    """Every holder's folder and file under PATH, and no file at the ABSENT paths.

    Returns what changed (names and paths only): ``folders``, ``written``, ``removed``, ``changed``."""
    if "/" in filename or filename in ("", ".", ".."):
        raise AccountsError(f"filename {filename!r} must be a plain file name")
    for name in files:
        if "/" in name or name in ("", ".", ".."):
            raise AccountsError(f"account holder {name!r} is not a user name")
    result = {"folders": [], "written": [], "removed": [], "top": False}
    if files:
        result["top"] = ensure_top(path, check)
        if check and not os.path.isdir(path):
            result["folders"] = sorted(files)
            result["written"] = sorted(files)
        else:
            top_fd = _open_folder(path)
            try:
                for name in sorted(files):
                    folder, written = ensure_holder(top_fd, name, filename, files[name].encode(), check)
                    if folder:
                        result["folders"].append(name)
                    if written:
                        result["written"].append(name)
            finally:
                os.close(top_fd)
    result["removed"] = [p for p in absent if remove_plain(p, check)]
    result["changed"] = bool(result["top"] or result["folders"] or result["written"] or result["removed"])
    return result


# ---- accounts on the MLflow server ---------------------------------------------------------

ASK = "/api/2.0/mlflow/experiments/search?max_results=1"
CREATE = "/api/2.0/mlflow/users/create"
UPDATE = "/api/2.0/mlflow/users/update-password"
DELETE = "/api/2.0/mlflow/users/delete"  # method DELETE, body {"username": ...}; 404 when there is none


def basic_auth(username: str, password: str) -> str:
    """The Authorization header's value for HTTP basic authentication."""
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def account_body(username: str, password: str) -> str:
    """The JSON body of MLflow's users/create and users/update-password."""
    return json.dumps({"username": username, "password": password})


def reconcile(accounts: dict[str, str], ask, create, update, check: bool) -> dict:
    """Make the server take every account with its password.

    ``ask(name, password)`` is the status a request as that account gets (200: taken, 401: not);
    ``create(name, password)`` and ``update(name, password)`` the status of the admin's requests.
    An account the server does not take is created; where it exists with another password (someone
    signed up first under that name: 400 on create), its password is set. In check mode nothing is
    created or set: ``missing`` names the accounts a run would create or set."""
    result = {"taken": [], "created": [], "updated": [], "missing": []}
    for name in sorted(accounts):
        password = accounts[name]
        status = ask(name, password)
        if status == 200:
            result["taken"].append(name)
            continue
        if status != 401:
            raise AccountsError(f"the server answered {status} to a request as {name} (expected 200 or 401)")
        if check:
            result["missing"].append(name)
            continue
        status = create(name, password)
        if status in (200, 201):
            result["created"].append(name)
            continue
        if status != 400:
            raise AccountsError(f"the server answered {status} when the admin account created {name}")
        status = update(name, password)
        if status == 404:  # 400 on create was no "exists": the name or the password is refused
            raise AccountsError(
                f"the server refused to create {name} (400) and holds no such account: it does not take "
                "that user name or password (MLflow's password rules: 12 characters at least)"
            )
        if status != 200:
            raise AccountsError(f"the server answered {status} when the admin account set {name}'s password")
        result["updated"].append(name)
    result["changed"] = bool(result["created"] or result["updated"] or result["missing"])
    return result


# ---- accounts of holders who are gone ----------------------------------------------------------
#
# meshctl deletes only the accounts it gave out itself (the names of the last run's accounts, kept
# in a root-only file): an account somebody made on the server another way is never touched, and
# the admin's never. A job user taken out of the mesh loses their account, and with it the password
# their old account file holds.


def names_body(username: str) -> str:
    """The JSON body of MLflow's users/delete."""
    return json.dumps({"username": username})


def retire(given: list[str], accounts: dict[str, str], admin: str, delete, check: bool) -> list[str]:
    """Delete every account meshctl GIVEN out that ACCOUNTS no longer holds (never ADMIN).

    ``delete(name)`` is the status of the admin's users/delete (200: deleted, 404: already gone).
    In check mode nothing is deleted. Returns the names deleted (or that would be)."""
    retired = []
    for name in sorted(set(given) - set(accounts) - {admin}):
        if check:
            retired.append(name)
            continue
        status = delete(name)
        if status == 200:
            retired.append(name)
        elif status != 404:
            raise AccountsError(f"the server answered {status} when the admin account deleted {name}")
    return retired


def read_given(path: str) -> list[str]:
    """The names of the accounts meshctl gave out, from the stamp-like file at PATH ([] if none)."""
    text = read_stamp(path)
    return [] if not text else sorted(json.loads(text))


def write_given(path: str, names: list[str]) -> None:
    write_stamp(path, json.dumps(sorted(names)))


# ---- asked once until something could have changed them -----------------------------------
#
# Once the server takes an account with its password, only a write of its user store can change
# that (an admin's or the holder's own password change, the store made anew): the accounts are
# asked again when the store's file changed (inode, size, modification time) or the accounts and
# passwords did. What was last found is a root-only file in a root-only folder (never the mlflow
# user's folder): a hash of the accounts and the store's stat, no password.


def checked_key(accounts: dict[str, str], database: str) -> str | None:
    """What a check of ACCOUNTS against the store at DATABASE would find; None without a store.

    The accounts' hash, and the inode, size and modification time of the store and of SQLite's
    journal files beside it (a write in WAL mode reaches the main file later)."""
    try:
        st = os.stat(database)
    except OSError:
        return None
    parts = [hashlib.sha256(json.dumps(sorted(accounts.items())).encode()).hexdigest()]
    parts.append(f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}")
    for suffix in ("-wal", "-journal"):
        try:
            side = os.stat(database + suffix)
            parts.append(f"{suffix}={side.st_ino}:{side.st_size}:{side.st_mtime_ns}")
        except OSError:
            pass
    return " ".join(parts)


def reconcile_once(accounts: dict[str, str], ask, create, update, check: bool, key) -> tuple[dict, str | None]:
    """``reconcile``, and the key to keep when the store held still while the accounts were found
    right (None: keep nothing). After creating or setting accounts it asks once more, so that what
    is kept is a pass that changed nothing, with the store the same before and after it."""
    before = key()
    result = reconcile(accounts, ask, create, update, check)
    if check:
        return result, None
    if result["created"] or result["updated"]:
        before = key()
        again = reconcile(accounts, ask, create, update, check)
        if again["created"] or again["updated"]:
            return result, None
    after = key()
    return result, after if after is not None and after == before else None


def read_stamp(path: str) -> str | None:
    """The stamp at PATH when it is root's plain file (one link, not a link), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != 0 or st.st_nlink != 1 or st.st_mode & 0o022:
            return None
        return os.read(fd, 4096).decode(errors="replace").strip()
    finally:
        os.close(fd)


def write_stamp(path: str, key: str) -> None:
    """KEY into PATH (root's, 0600) by a new file renamed over it, in a root-only folder."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        raise AccountsError(f"{folder} must be a folder only root may write")
    temp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (key + "\n").encode())
    finally:
        os.close(fd)
    os.rename(temp, path)
