# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""One file written by root into a folder another user may write (module ``mesh_safe_file``).

The folder is opened without following a link; what lies at the file's name is read without
following a link or waiting on a pipe; a new file is created beside it from the open folder (never
by a path) and renamed over the name, so a link, a pipe or a hard link another user put there is
replaced, never followed, written into or given away."""

from __future__ import annotations

import contextlib
import os
import stat
import time


class SafeWriteError(Exception):
    """What went wrong, with what to do."""


class FolderMissing(SafeWriteError):
    """A folder on the way is not there."""


def is_already(fd_dir: int, name: str, content: bytes, uid: int, gid: int, mode: int) -> bool:
    """Whether NAME in the open folder is a plain file with one link, CONTENT, owner and mode."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd_dir)
    except OSError:
        return False  # missing, a link, or anything that cannot be opened as it is
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size != len(content):
            return False
        if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != (uid, gid, mode):
            return False
        return os.read(fd, len(content) + 1) == content
    finally:
        os.close(fd)


def replace(fd_dir: int, name: str, content: bytes, uid: int, gid: int, mode: int) -> None:
    """A new file beside NAME with CONTENT, owner and mode, renamed over NAME."""
    temp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd_dir)
    try:
        try:
            os.write(fd, content)
            os.fsync(fd)
            os.fchown(fd, uid, gid)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=fd_dir, dst_dir_fd=fd_dir)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=fd_dir)
        if isinstance(err, IsADirectoryError) or err.errno in (21, 39):  # EISDIR, ENOTEMPTY
            raise SafeWriteError(f"a folder stands at {name}: remove it, then run again") from None
        raise SafeWriteError(f"could not write {name} ({err.strerror})") from None


def ensure_file(path: str, content: bytes, uid: int = 0, gid: int = 0, mode: int = 0o644, check: bool = False) -> bool:
    """PATH holds CONTENT, owned UID:GID with MODE; its folder is never followed through a link.
    Whether it changed (or would, in CHECK mode)."""
    folder, name = os.path.split(path)
    if not os.path.isabs(path) or name in ("", ".", ".."):
        raise SafeWriteError(f"{path!r} is not an absolute path to a file")
    try:
        fd_dir = open_folder(folder)
    except FolderMissing:
        if check:
            return True  # a dry run before the folder is made
        raise
    try:
        if is_already(fd_dir, name, content, uid, gid, mode):
            return False
        if not check:
            replace(fd_dir, name, content, uid, gid, mode)
        return True
    finally:
        os.close(fd_dir)


def read_plain(path: str, limit: int = 1 << 20) -> str | None:
    """What the plain file at PATH holds, for a diff: read without following a link or waiting on a
    pipe, its folder walked as ``open_folder`` does. None when it is missing, not a plain file, larger
    than LIMIT bytes or not text."""
    folder, name = os.path.split(path)
    try:
        fd_dir = open_folder(folder)
    except SafeWriteError:
        return None
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd_dir)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                return None
            return os.read(fd, limit + 1).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        finally:
            os.close(fd)
    finally:
        os.close(fd_dir)


# --- folders -------------------------------------------------------------------------------------


def _is_link(fd_dir: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=fd_dir, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _trusted_link(fd_dir: int, name: str) -> bool:
    """Whether NAME in the open folder is a link only root could have laid: root's, in a folder of
    root's that no one else may write (/var/run -> /run, a merged /usr)."""
    st_dir = os.fstat(fd_dir)
    st = os.stat(name, dir_fd=fd_dir, follow_symlinks=False)
    return st.st_uid == 0 and st_dir.st_uid == 0 and not st_dir.st_mode & 0o022


def open_folder(path: str, make: bool = False) -> int:
    """An open descriptor of the folder PATH, walked from / one name at a time: a link on the way
    is followed only when only root could have laid it (``_trusted_link``); any other is refused.
    MAKE: a missing folder on the way is made (the caller's, 0755)."""
    if not os.path.isabs(path):
        raise SafeWriteError(f"{path!r} is not an absolute path")
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in (p for p in path.split("/") if p not in ("", ".")):
            if part == "..":
                raise SafeWriteError(f"{path!r} goes up (..): name the folder itself")
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as err:
                if err.errno == 2 and make:  # ENOENT: made from the open folder, then opened as any other
                    os.mkdir(part, 0o755, dir_fd=fd)
                    inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                    os.fchmod(inner, 0o755)
                    os.close(fd)
                    fd = inner
                    continue
                if err.errno == 2:  # ENOENT
                    raise FolderMissing(f"{path}: {part} is missing") from None
                link = err.errno in (20, 40) and _is_link(fd, part)  # ENOTDIR or ELOOP: maybe a link
                if not link or not _trusted_link(fd, part):
                    why = "a link another user could have laid" if link else err.strerror
                    raise SafeWriteError(f"{path}: {part} is {why}; not followed") from None
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        return fd
    except BaseException:
        os.close(fd)
        raise


def ensure_folder(path: str, uid: int, gid: int, mode: int, foreign: str = "keep", check: bool = False) -> list[str]:
    """PATH a folder of its own (never a link), owned UID:GID with MODE; its parents walked by
    ``open_folder``. What lies at its name that is not such a folder: a link is removed (never
    followed), a file moved aside (``.NAME.meshctl-moved-TIME``); a folder owned by someone other
    than UID or root is taken over in place (FOREIGN ``keep``: a package's folder, its files the
    daemon's) or moved aside (``move``: a folder another user made where one of theirs goes).
    Returns what it did, in words (empty: nothing to do); in CHECK mode what it would do."""
    parent, name = os.path.split(path.rstrip("/"))
    if name in ("", ".", ".."):
        raise SafeWriteError(f"{path!r} is not a folder's path")
    try:
        fd_parent = open_folder(parent, make=not check)
    except FolderMissing:  # check mode, a fresh machine
        return [f"{path}: made"]
    done: list[str] = []
    try:
        try:
            st = os.stat(name, dir_fd=fd_parent, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        aside = f".{name}.meshctl-moved-{int(time.time())}"
        if st is not None and stat.S_ISLNK(st.st_mode):
            done.append(f"{path}: a link, removed")
            if not check:
                os.unlink(name, dir_fd=fd_parent)
            st = None
        elif st is not None and (not stat.S_ISDIR(st.st_mode) or (foreign == "move" and st.st_uid not in (uid, 0))):
            what = f"a folder of uid {st.st_uid}" if stat.S_ISDIR(st.st_mode) else "not a folder"
            done.append(f"{path}: {what}, moved to {aside}")
            if not check:
                os.rename(name, aside, src_dir_fd=fd_parent, dst_dir_fd=fd_parent)
            st = None
        if st is None:
            done.append(f"{path}: made")
            if check:
                return done
            os.mkdir(name, 0o700, dir_fd=fd_parent)
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd_parent)
        try:
            st = os.fstat(fd)
            changes = []
            if (st.st_uid, st.st_gid) != (uid, gid):
                changes.append(f"owner {st.st_uid}:{st.st_gid} -> {uid}:{gid}")
                if not check:
                    os.fchown(fd, uid, gid)
            if stat.S_IMODE(st.st_mode) != mode:
                changes.append(f"mode {stat.S_IMODE(st.st_mode):o} -> {mode:o}")
                if not check:
                    os.fchmod(fd, mode)
            if changes and not done:
                done.append(f"{path}: " + ", ".join(changes))
        finally:
            os.close(fd)
        return done
    except OSError as err:
        raise SafeWriteError(f"could not make {path} a folder of its own ({err.strerror})") from None
    finally:
        os.close(fd_parent)


def remove_file(path: str, check: bool = False) -> bool:
    """PATH gone if it is there and not a folder (a link goes itself, never what it names)."""
    parent, name = os.path.split(path)
    try:
        fd_parent = open_folder(parent)
    except FolderMissing:
        return False
    try:
        try:
            st = os.stat(name, dir_fd=fd_parent, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISDIR(st.st_mode):
            raise SafeWriteError(f"{path} is a folder: remove it by hand if it is not wanted")
        if not check:
            os.unlink(name, dir_fd=fd_parent)
        return True
    finally:
        os.close(fd_parent)
