"""mesh_safe_write: root writes into a folder others may write and follows nothing they put there."""

import os

import pytest

from plugins.module_utils.mesh_safe_write import SafeWriteError, ensure_file, ensure_folder, open_folder, remove_file

UID, GID = os.getuid(), os.getgid()
NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="gives files to other users")


def test_a_planted_link_is_replaced_and_its_target_untouched(tmp_path):
    witness = tmp_path / "witness"
    witness.write_text("root's\n")
    share = tmp_path / "share"
    share.mkdir()
    (share / ".meshctl-share").symlink_to(witness)
    assert ensure_file(str(share / ".meshctl-share"), b"id\n", UID, GID, 0o644) is True
    assert witness.read_text() == "root's\n"
    marker = share / ".meshctl-share"
    assert not marker.is_symlink() and marker.read_text() == "id\n" and oct(marker.stat().st_mode & 0o777) == "0o644"
    assert ensure_file(str(marker), b"id\n", UID, GID, 0o644) is False  # a second run changes nothing
    assert sorted(p.name for p in share.iterdir()) == [".meshctl-share"]


def test_a_hard_link_is_replaced_not_written_through(tmp_path):
    other = tmp_path / "other"
    other.write_text("id\n")
    os.link(other, tmp_path / "marker")
    assert ensure_file(str(tmp_path / "marker"), b"id\n", UID, GID, 0o644) is True
    assert (tmp_path / "marker").stat().st_nlink == 1 and other.read_text() == "id\n"


def test_check_mode_changes_nothing(tmp_path):
    assert ensure_file(str(tmp_path / "marker"), b"id\n", UID, GID, 0o644, check=True) is True
    assert not (tmp_path / "marker").exists()


def test_a_folder_at_the_name_or_a_linked_folder_is_refused_with_the_fix(tmp_path):
    (tmp_path / "marker").mkdir()
    (tmp_path / "marker" / "x").write_text("")
    with pytest.raises(SafeWriteError, match="a folder stands at marker: remove it"):
        ensure_file(str(tmp_path / "marker"), b"id\n", UID, GID, 0o644)
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    os.lchown(tmp_path / "linked", NOBODY, NOBODY)  # another user's link
    with pytest.raises(SafeWriteError, match="linked is a link another user could have laid; not followed"):
        ensure_file(str(tmp_path / "linked" / "marker"), b"id\n", UID, GID, 0o644)
    assert list((tmp_path / "real").iterdir()) == []


# --- folders (module mesh_safe_folders) ------------------------------------------------------


def witness(tmp_path):
    """A root-only folder with a file, and how it stands: what a planted link points at."""
    folder = tmp_path / "witness"
    folder.mkdir(mode=0o700)
    (folder / "file").write_text("root's\n")
    return folder, lambda: (oct(folder.stat().st_mode), folder.stat().st_uid, sorted(os.listdir(folder)))


@root_only
def test_a_link_the_folders_user_laid_in_place_of_a_folder_is_removed_never_followed(tmp_path):
    """The slurm user's /var/lib/slurm: `slurmctld` swapped for a link to a root folder."""
    target, state = witness(tmp_path)
    before = state()
    lib = tmp_path / "lib"
    lib.mkdir()
    os.chown(lib, NOBODY, NOBODY)  # the slurm user's folder, as Debian's packages make it
    (lib / "slurmctld").symlink_to(target)
    os.lchown(lib / "slurmctld", NOBODY, NOBODY)
    done = ensure_folder(str(lib), 0, 0, 0o755) + ensure_folder(str(lib / "slurmctld"), NOBODY, NOBODY, 0o755)
    assert state() == before
    assert not (lib / "slurmctld").is_symlink() and (lib / "slurmctld").stat().st_uid == NOBODY
    assert lib.stat().st_uid == 0 and done[0].endswith("owner 65534:65534 -> 0:0")
    assert f"{lib / 'slurmctld'}: a link, removed" in done
    assert ensure_folder(str(lib), 0, 0, 0o755) == [] == ensure_folder(str(lib / "slurmctld"), NOBODY, NOBODY, 0o755)


@root_only
def test_a_users_folder_another_user_made_on_the_share_is_moved_aside(tmp_path):
    """`users/` made by a job user before the first apply, `users/alice -> /etc` in it."""
    target, state = witness(tmp_path)
    before = state()
    share = tmp_path / "share"
    share.mkdir()
    share.chmod(0o1777)
    (share / "users").mkdir()
    (share / "users" / "alice").symlink_to(target)
    for path in (share / "users", share / "users" / "alice"):
        os.lchown(path, NOBODY, NOBODY)
    done = ensure_folder(str(share / "users"), 0, 0, 0o755, "move")
    done += ensure_folder(str(share / "users" / "alice"), 1234, 1234, 0o700, "move")
    assert state() == before
    moved = [p.name for p in share.iterdir() if p.name.startswith(".users.meshctl-moved-")]
    assert len(moved) == 1 and (share / moved[0] / "alice").is_symlink()  # kept for the admin, as it was
    alice = share / "users" / "alice"
    assert not alice.is_symlink() and (alice.stat().st_uid, oct(alice.stat().st_mode & 0o7777)) == (1234, "0o700")
    assert any("a folder of uid 65534, moved to .users.meshctl-moved-" in line for line in done)


@root_only
def test_a_link_on_the_way_is_followed_only_when_only_root_could_have_laid_it(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "roots-link").symlink_to(real)  # root's, in root's 0700 folder: /var/run -> /run
    assert ensure_folder(str(tmp_path / "roots-link" / "x"), 0, 0, 0o755) == [f"{tmp_path}/roots-link/x: made"]
    assert (real / "x").is_dir()
    (tmp_path / "others-link").symlink_to(real)
    os.lchown(tmp_path / "others-link", NOBODY, NOBODY)
    with pytest.raises(SafeWriteError, match="others-link is a link another user could have laid"):
        ensure_folder(str(tmp_path / "others-link" / "y"), 0, 0, 0o755)
    os.close(open_folder(str(tmp_path / "roots-link")))
    assert not (real / "y").exists()


def test_a_file_at_the_name_is_moved_aside_and_check_mode_changes_nothing(tmp_path):
    (tmp_path / "spool").write_text("x")
    assert ensure_folder(str(tmp_path / "spool"), UID, GID, 0o755, check=True)[0].startswith(
        f"{tmp_path}/spool: not a folder, moved to .spool.meshctl-moved-"
    )
    assert (tmp_path / "spool").is_file()
    ensure_folder(str(tmp_path / "spool"), UID, GID, 0o755)
    assert (tmp_path / "spool").is_dir() and len(list(tmp_path.glob(".spool.meshctl-moved-*"))) == 1
    assert ensure_folder(str(tmp_path / "a" / "b"), UID, GID, 0o755, check=True) == [f"{tmp_path}/a/b: made"]
    assert not (tmp_path / "a").exists()
    ensure_folder(str(tmp_path / "a" / "b"), UID, GID, 0o750)  # its missing parent made too
    assert oct((tmp_path / "a" / "b").stat().st_mode & 0o777) == "0o750"


def test_a_file_removed_is_the_link_never_what_it_names(tmp_path):
    (tmp_path / "target").write_text("kept")
    (tmp_path / "slurm.conf").symlink_to(tmp_path / "target")
    assert remove_file(str(tmp_path / "slurm.conf")) is True and (tmp_path / "target").read_text() == "kept"
    assert remove_file(str(tmp_path / "slurm.conf")) is False and remove_file(str(tmp_path / "no" / "x")) is False
    with pytest.raises(SafeWriteError, match="is a folder"):
        remove_file(str(tmp_path))
