"""meshctl-names (roles/slurm/files/meshctl-names): Slurm's node list into /etc/hosts."""

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


# `scontrol show nodes --oneliner` as Slurm 22.05 prints it (fields cut for width), one node idle,
# one powered down whose address Slurm reset to its name, one whose NodeAddr is hostile text.
NODES = (
    "NodeName=head Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 NodeAddr=100.100.20.10 NodeHostName=head"
    " Version=22.05.8 State=IDLE Partitions=main\n"
    "NodeName=gpu1 Arch=x86_64 CPUAlloc=0 Gres=gpu:rtx_a5000:1 NodeAddr=100.100.20.11 NodeHostName=gpu1"
    " State=IDLE Partitions=main,gpu\n"
    "NodeName=gpu2 CoresPerSocket=1 NodeAddr=gpu2 NodeHostName=gpu2 State=IDLE+CLOUD+POWERED_DOWN\n"
    "NodeName=evil NodeAddr=127.0.0.1 State=IDLE\n"
    "NodeName=bad_name NodeAddr=100.100.20.14 State=IDLE\n"
)
CONFIG = "AccountingStorageType   = (null)\nSlurmctldHost[0]        = ctl(100.100.20.9)\nSlurmctldPort = 6817\n"
CLOUD_HOSTS = "127.0.0.1\tlocalhost\n127.0.1.1\tgpu1.example.internal gpu1\n::1 localhost ip6-localhost\n"


def test_nodes_and_the_controller_are_read_and_what_is_no_name_or_address_is_left_out(names):
    assert names.parse_nodes(NODES) == {"head": "100.100.20.10", "gpu1": "100.100.20.11"}
    assert names.parse_controllers(CONFIG) == {"ctl": "100.100.20.9"}
    assert names.parse_controllers("SlurmctldHost[0] = ctl(1.2.3.4\n") == {}


RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "scontrol" / "slurm-22.05"


def test_what_slurm_22_05_printed_gives_every_node_and_the_controller(names):
    nodes = names.parse_nodes((RECORDED / "show-nodes-oneliner.txt").read_text())
    assert nodes == {
        "head": "100.100.10.10",
        "gpu1": "100.100.10.11",
        "cpu1": "100.100.10.12",
        "cpu13": "100.100.10.13",
    }
    assert names.parse_controllers((RECORDED / "show-config.txt").read_text()) == {"head": "100.100.10.10"}


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


def fake_scontrol(tmp_path, nodes: str, config: str, fail: bool = False) -> str:
    script = tmp_path / "scontrol"
    (tmp_path / "nodes.txt").write_text(nodes)
    (tmp_path / "config.txt").write_text(config)
    script.write_text(
        "#!/bin/sh\n"
        + ("exit 1\n" if fail else "")
        + f'case "$2" in nodes) cat {tmp_path}/nodes.txt ;; config) cat {tmp_path}/config.txt ;; esac\n'
    )
    script.chmod(0o755)
    return str(script)


def test_the_program_writes_once_and_leaves_the_file_when_slurm_cannot_be_asked(names, tmp_path, monkeypatch):
    hosts = tmp_path / "hosts"
    hosts.write_text(CLOUD_HOSTS)
    monkeypatch.setattr(names, "SCONTROL", fake_scontrol(tmp_path, NODES, CONFIG))
    me = socket.gethostname().split(".")[0]
    assert names.main(["--self", "gpu1", "--hosts", str(hosts)]) == 0
    written = hosts.read_text()
    assert "100.100.20.11 gpu1" + (f" {me.lower()}" if me.lower() not in ("gpu1", "head", "ctl") else "") in written
    assert "100.100.20.9 ctl" in written and "127.0.0.1" not in written.split(names.END)[0]
    inode = hosts.stat().st_ino
    assert names.main(["--self", "gpu1", "--hosts", str(hosts)]) == 0
    assert hosts.stat().st_ino == inode  # nothing changed: not written again
    monkeypatch.setattr(names, "SCONTROL", fake_scontrol(tmp_path, "", "", fail=True))
    assert names.main(["--self", "gpu1", "--hosts", str(hosts)]) == 0
    assert hosts.read_text() == written
    assert names.main(["--remove", "--hosts", str(hosts)]) == 0
    assert hosts.read_text() == CLOUD_HOSTS


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
