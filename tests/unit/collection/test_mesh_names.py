"""meshctl-names (roles/slurm/files/meshctl-names): meshctl's record of the nodes into /etc/hosts;
on the head, a NodeAddr in Slurm that differs from the record set back."""

import os
import socket
import types
from pathlib import Path

import pytest

PROGRAM = Path(__file__).resolve().parents[3] / "roles" / "slurm" / "files" / "meshctl-names"


@pytest.fixture(scope="module")
def names():
    # Compiled here, not imported: an import would write roles/slurm/files/__pycache__/ into the
    # collection's files.
    module = types.ModuleType("meshctl_names")
    module.__file__ = str(PROGRAM)
    exec(compile(PROGRAM.read_text(), str(PROGRAM), "exec"), module.__dict__)
    return module


# `scontrol show nodes --oneliner` as Slurm 22.05 prints it (fields cut for width): gpu1's NodeAddr
# changed by a node's root, a pool node powered down (Slurm reset its address to its name), one
# whose NodeAddr is hostile text, one meshctl never recorded.
NODES = (
    "NodeName=head Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 NodeAddr=100.100.20.10 NodeHostName=head"
    " Version=22.05.8 State=IDLE Partitions=main\n"
    "NodeName=gpu1 Arch=x86_64 CPUAlloc=0 Gres=gpu:rtx_a5000:1 NodeAddr=100.100.20.66 NodeHostName=gpu1"
    " State=IDLE Partitions=main,gpu\n"
    "NodeName=pool-a-1 CoresPerSocket=1 NodeAddr=pool-a-1 NodeHostName=pool-a-1 State=IDLE+CLOUD+POWERED_DOWN\n"
    "NodeName=cpu1 NodeAddr=$(reboot);x State=IDLE\n"
    "NodeName=localhost NodeAddr=100.100.20.66 State=IDLE\n"
)
RECORD = (
    "# Ansible managed\n"
    "100.100.20.10 head\n100.100.20.11 gpu1\n100.100.20.12 cpu1\n100.100.20.40 pool-a-1 moves\n"
    "127.0.0.1 evil\n100.100.20.14 bad_name\n100.100.20.15 localhost\n100.100.20.16 cpu9 extra\n"
    "100.100.20.17 head\n"
)
CLOUD_HOSTS = "127.0.0.1\tlocalhost\n127.0.1.1\tgpu1.example.internal gpu1\n::1 localhost ip6-localhost\n"


def test_the_record_gives_each_node_once_and_what_is_no_name_or_address_is_left_out(names):
    entries, pool = names.parse_record(RECORD)
    assert entries == {"head": "100.100.20.10", "gpu1": "100.100.20.11", "cpu1": "100.100.20.12",
                       "pool-a-1": "100.100.20.40"}  # fmt: skip
    assert pool == {"pool-a-1"}


def test_the_records_template_writes_what_the_program_reads(names):
    """roles/slurm/templates/names.record.j2, rendered as the role does, parsed back."""
    import jinja2

    template = (PROGRAM.parents[1] / "templates" / "names.record.j2").read_text()
    env = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters.update(
        {"comment": lambda text: "# " + text, "ansible.utils.ipv4": lambda v: v if v.count(".") == 3 else False}
    )
    hostvars = {"head": {"mesh_address": "100.100.20.10"}, "gpu1": {"mesh_address": "100.100.20.11"},
                "pool-a-1": {"mesh_address": "100.100.20.40"}, "pool-a-2": {}}  # fmt: skip
    text = env.from_string(template).render(
        ansible_managed="Ansible managed", hostvars=hostvars, slurm_controller_group="head",
        slurm_compute_group="compute", groups={"head": ["head"], "compute": ["head", "gpu1", "pool-a-1", "pool-a-2"]},
        mesh_relaunch_nodes=["pool-a-1", "pool-a-2"],
    )  # fmt: skip
    assert names.parse_record(text) == (
        {"head": "100.100.20.10", "gpu1": "100.100.20.11", "pool-a-1": "100.100.20.40"},
        {"pool-a-1"},
    )


RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "scontrol" / "slurm-22.05"


def test_what_slurm_22_05_printed_gives_every_nodes_address(names):
    assert names.slurm_addresses((RECORDED / "show-nodes-oneliner.txt").read_text()) == {
        "head": "100.100.10.10",
        "gpu1": "100.100.10.11",
        "cpu1": "100.100.10.12",
        "cpu13": "100.100.10.13",
    }


@pytest.mark.parametrize("address", ["127.0.1.1", "0.0.0.0", "224.0.0.1", "fe80::1", "gpu2", "1.2.3.4;", ""])
def test_no_address_another_node_cannot_reach(names, address):
    assert names.valid_address(address) is None


def test_the_block_comes_first_and_a_cloud_images_own_name_line_is_hidden(names):
    entries = {"gpu1": "100.100.20.11", "head": "100.100.20.10"}
    text = names.render(CLOUD_HOSTS, entries)
    lines = text.splitlines()
    assert lines[0] == names.BEGIN and lines[3] == names.END
    assert lines[1:3] == ["100.100.20.11 gpu1", "100.100.20.10 head"]
    assert names.HIDDEN + "127.0.1.1\tgpu1.example.internal gpu1" in lines
    assert "127.0.0.1\tlocalhost" in lines and "::1 localhost ip6-localhost" in lines
    # Again with the same entries: the same text (the timer writes nothing then).
    assert names.render(text, entries) == text


def test_a_node_that_left_shows_its_line_again_and_remove_restores_the_file(names):
    entries = {"gpu1": "100.100.20.11"}
    text = names.render(CLOUD_HOSTS, entries)
    assert "127.0.1.1\tgpu1.example.internal gpu1" in names.render(text, {"head": "100.100.20.10"}).splitlines()
    assert names.remove(text) == CLOUD_HOSTS


def test_the_hostname_beside_its_node_name_never_over_another_nodes_name(names):
    entries = {"ctl": "100.100.20.9", "gpu1": "100.100.20.11"}
    text = names.render("127.0.1.1 e2e-head\n", entries, {"e2e-head": "ctl", "gpu1": "ctl"})
    assert "100.100.20.9 ctl e2e-head" in text.splitlines()
    assert "100.100.20.11 gpu1" in text.splitlines()
    assert names.HIDDEN + "127.0.1.1 e2e-head" in text.splitlines()


def fake_scontrol(tmp_path, nodes: str, fail: bool = False) -> str:
    """An scontrol that prints NODES for `show nodes` and logs every call's arguments."""
    script = tmp_path / "scontrol"
    (tmp_path / "nodes.txt").write_text(nodes)
    script.write_text(
        "#!/bin/sh\n"
        + f'echo "$@" >> {tmp_path}/calls.txt\n'
        + ("exit 1\n" if fail else "")
        + f'case "$2" in nodes) cat {tmp_path}/nodes.txt ;; esac\n'
    )
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def record(names, tmp_path, monkeypatch):
    """The record in a folder of its own, owned by whoever runs the tests (root on the nodes)."""
    folder = tmp_path / "share"
    folder.mkdir()
    folder.chmod(0o1777)  # the share's top: every job user writes there, the sticky bit keeps root's files root's
    path = folder / ".meshctl-names"
    path.write_text(RECORD)
    path.chmod(0o644)
    monkeypatch.setattr(names, "OWNER", os.getuid())
    return path


def test_the_program_writes_the_record_once_and_leaves_the_file_when_there_is_none(
    names, record, tmp_path, monkeypatch
):
    hosts = tmp_path / "hosts"
    hosts.write_text(CLOUD_HOSTS)
    monkeypatch.setattr(names, "SCONTROL", fake_scontrol(tmp_path, NODES))
    me = socket.gethostname().split(".")[0]
    args = ["--self", "gpu1", "--record", str(record), "--hosts", str(hosts)]
    assert names.main(args) == 0
    written = hosts.read_text()
    assert (
        "100.100.20.11 gpu1" + (f" {me.lower()}" if me.lower() not in ("gpu1", "head", "cpu1", "pool-a-1") else "")
        in written
    )
    assert "100.100.20.10 head" in written and "127.0.0.1" not in written.split(names.END)[0]
    assert "100.100.20.66" not in written  # Slurm's word is never taken
    assert not (tmp_path / "calls.txt").exists()  # a node does not ask Slurm at all
    inode = hosts.stat().st_ino
    assert names.main(args) == 0
    assert hosts.stat().st_ino == inode  # nothing changed: not written again
    record.unlink()
    assert names.main(args) == 0  # the share not mounted yet: left as it is
    assert hosts.read_text() == written
    assert names.main(["--remove", "--hosts", str(hosts)]) == 0
    assert hosts.read_text() == CLOUD_HOSTS


def test_the_head_sets_a_changed_node_address_back_and_says_so(names, record, tmp_path, monkeypatch, capsys):
    hosts = tmp_path / "hosts"
    hosts.write_text(CLOUD_HOSTS)
    monkeypatch.setattr(names, "SCONTROL", fake_scontrol(tmp_path, NODES))
    assert names.main(["--self", "head", "--record", str(record), "--hosts", str(hosts), "--revert"]) == 0
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    # gpu1 (changed) and cpu1 (hostile text) set back; head agrees; a node that moves and a name
    # meshctl never recorded are left to Slurm.
    assert calls == ["show nodes --oneliner", "update NodeName=cpu1 NodeAddr=100.100.20.12",
                     "update NodeName=gpu1 NodeAddr=100.100.20.11"]  # fmt: skip
    said = capsys.readouterr().err
    assert "gpu1's NodeAddr in Slurm was 100.100.20.66, meshctl's record says 100.100.20.11: set back" in said
    assert "cpu1's NodeAddr in Slurm was (not an address)" in said and "$(reboot)" not in said
    assert "100.100.20.11 gpu1" in hosts.read_text()


@pytest.mark.parametrize("plant", ["link", "group-writable", "folder-writable", "folder-link", "another-owner", "fifo"])
def test_a_record_others_may_have_written_is_refused_and_hosts_left_alone(
    names, record, tmp_path, monkeypatch, plant, capsys
):
    hosts = tmp_path / "hosts"
    hosts.write_text(CLOUD_HOSTS)
    path = record
    if plant == "link":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.write_text("100.100.20.66 gpu1\n")
        record.unlink()
        record.symlink_to(elsewhere)
    elif plant == "group-writable":
        record.chmod(0o664)
    elif plant == "folder-writable":
        record.parent.chmod(0o777)  # without the sticky bit: anyone could rename another file over it
    elif plant == "folder-link":
        (tmp_path / "linked").symlink_to(record.parent)
        path = tmp_path / "linked" / record.name
    elif plant == "another-owner":
        monkeypatch.setattr(names, "OWNER", os.getuid() + 1)
    elif plant == "fifo":
        record.unlink()
        os.mkfifo(record)
    assert names.main(["--self", "gpu1", "--record", str(path), "--hosts", str(hosts)]) == 1
    assert hosts.read_text() == CLOUD_HOSTS
    assert "refused" in capsys.readouterr().err


def test_a_record_larger_than_any_mesh_is_refused(names, record, tmp_path):
    record.write_text("100.100.20.11 gpu1\n" * (names.MAX_RECORD // 10))
    with pytest.raises(names.RecordError, match="larger"):
        names.read_record(str(record))


def test_a_file_that_cannot_be_renamed_over_is_written_in_place(names, tmp_path, monkeypatch):
    hosts = tmp_path / "hosts"
    hosts.write_text("old\n")

    def busy(_source, _target):
        raise OSError(16, "Device or resource busy")

    monkeypatch.setattr(names.os, "replace", busy)
    names.write(str(hosts), "new\n")
    assert hosts.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["hosts"]  # no temporary file left


def test_written_in_place_the_file_is_never_empty_and_ends_cut_to_the_new_text(names, tmp_path, monkeypatch):
    """A reader between two writes of a bind-mounted /etc/hosts finds every name: the new text
    goes over the old from the start (never a truncation first), then the file is cut to it."""
    hosts = tmp_path / "hosts"
    hosts.write_text("10.0.0.2 head\n10.0.0.3 gpu1\n127.0.0.1 localhost and a long line the new text lacks\n")
    seen = []
    real_pwrite, real_ftruncate = names.os.pwrite, names.os.ftruncate

    def pwrite(fd, data, offset):
        seen.append(hosts.read_text())
        return real_pwrite(fd, data, offset)

    def ftruncate(fd, length):
        seen.append(hosts.read_text())
        return real_ftruncate(fd, length)

    monkeypatch.setattr(names.os, "replace", lambda _s, _t: (_ for _ in ()).throw(OSError(16, "busy")))
    monkeypatch.setattr(names.os, "pwrite", pwrite)
    monkeypatch.setattr(names.os, "ftruncate", ftruncate)
    names.write(str(hosts), "10.0.0.2 head\n10.0.0.4 gpu1\n")
    assert hosts.read_text() == "10.0.0.2 head\n10.0.0.4 gpu1\n"
    assert seen and all("10.0.0.2 head" in text for text in seen), seen
