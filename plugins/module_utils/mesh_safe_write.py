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


class SafeWriteError(Exception):
    """What went wrong, with what to do."""


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
        fd_dir = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        if check:
            return True  # a dry run before the folder is made
        raise SafeWriteError(f"{folder} is missing") from None
    except OSError as err:
        raise SafeWriteError(f"{folder} is no folder of its own (missing, or a link): {err.strerror}") from None
    try:
        if is_already(fd_dir, name, content, uid, gid, mode):
            return False
        if not check:
            replace(fd_dir, name, content, uid, gid, mode)
        return True
    finally:
        os.close(fd_dir)
