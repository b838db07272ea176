"""mesh_safe_write: root writes into a folder others may write and follows nothing they put there."""

import os

import pytest

from plugins.module_utils.mesh_safe_write import SafeWriteError, ensure_file

UID, GID = os.getuid(), os.getgid()


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
    with pytest.raises(SafeWriteError, match="no folder of its own"):
        ensure_file(str(tmp_path / "linked" / "marker"), b"id\n", UID, GID, 0o644)
    assert list((tmp_path / "real").iterdir()) == []
