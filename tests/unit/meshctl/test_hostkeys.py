"""SSH host keys of nodes (meshctl/hostkeys.py): parsing, recorded keys, forgetting, the message."""

import subprocess

import pytest

from meshctl import hostkeys, ssh
from meshctl.hostkeys import Fingerprint


def make_key(tmp_path, name):
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    public = path.with_suffix(".pub").read_text().split()[:2]
    listed = subprocess.run(["ssh-keygen", "-l", "-f", str(path.with_suffix(".pub"))], capture_output=True,
                            text=True, check=True).stdout  # fmt: skip
    return " ".join(public), listed.split()[1]


@pytest.fixture
def known_hosts(tmp_path):
    key22, fp22 = make_key(tmp_path, "a")
    key2222, fp2222 = make_key(tmp_path, "b")
    path = tmp_path / "known_hosts"
    path.write_text(f"10.9.9.9 {key22}\n[10.9.9.9]:2222 {key2222}\n10.9.9.10 {key22}\n")
    return path, fp22, fp2222


def test_both_listing_formats_are_parsed():
    text = (
        "# Host 10.9.9.9 found: line 1 \n10.9.9.9 ED25519 SHA256:28AhuMp91OSB5wRTfBo89JMzrHJmUCYZHkdff83OumY\n"
        "256 SHA256:xyzXYZ0123+/abc= 10.9.9.9 (ECDSA)\n3072 SHA256:rsaRSA= 10.9.9.9 (RSA)\nnot a key line\n"
    )
    assert hostkeys.parse_fingerprints(text) == [
        Fingerprint("ED25519", "SHA256:28AhuMp91OSB5wRTfBo89JMzrHJmUCYZHkdff83OumY"),
        Fingerprint("ECDSA", "SHA256:xyzXYZ0123+/abc="),
        Fingerprint("RSA", "SHA256:rsaRSA="),
    ]


@pytest.mark.parametrize(
    ("said", "changed"),
    [
        ("@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@", True),
        ("Host key verification failed.", True),
        # Mitogen's text (meshctl records unknown keys before a Mitogen run, so it means changed)
        ("Host key checking is enabled, and SSH reported an unrecognized or mismatching host key.", True),
        ("ssh: connect to host 10.0.0.1 port 22: Connection refused", False),
        ("Permission denied (publickey).", False),
    ],
)
def test_a_changed_key_is_told_from_other_failures(said, changed):
    assert hostkeys.is_changed_key(said) is changed


@pytest.mark.parametrize("hashed", [False, True])
def test_recorded_keys_are_found_by_host_and_port(known_hosts, hashed):
    path, fp22, fp2222 = known_hosts
    if hashed:  # Debian's ssh_config hashes known_hosts (HashKnownHosts yes)
        subprocess.run(["ssh-keygen", "-H", "-f", str(path)], capture_output=True, check=True)
    assert hostkeys.recorded(path, "10.9.9.9", 22) == [Fingerprint("ED25519", fp22)]
    assert hostkeys.recorded(path, "10.9.9.9", 2222) == [Fingerprint("ED25519", fp2222)]
    assert hostkeys.recorded(path, "10.9.9.11", 22) == []
    assert hostkeys.recorded(path.with_name("missing"), "10.9.9.9", 22) == []


def test_forget_removes_only_that_host_and_port_and_keeps_no_copy(known_hosts):
    path, fp22, _ = known_hosts
    assert hostkeys.forget(path, "10.9.9.9", 22) == [Fingerprint("ED25519", fp22)]
    assert hostkeys.recorded(path, "10.9.9.9", 22) == []
    assert len(hostkeys.recorded(path, "10.9.9.9", 2222)) == 1 and len(hostkeys.recorded(path, "10.9.9.10", 22)) == 1
    assert not path.with_name("known_hosts.old").exists()
    assert hostkeys.forget(path, "10.9.9.9", 22) == []  # twice: nothing left to forget


def test_the_message_names_the_node_both_fingerprints_and_the_command(known_hosts, monkeypatch):
    path, fp22, _ = known_hosts
    new = Fingerprint("ED25519", "SHA256:NEWnewNEWnew0123456789")
    # Test double for ssh-keyscan (no machine answers at 10.9.9.9 here).
    monkeypatch.setattr(hostkeys, "offered", lambda host, port: [Fingerprint("RSA", "SHA256:rsa="), new])
    what, fix = hostkeys.describe_change("gpu2", "10.9.9.9", 22, path)
    assert what == f"gpu2 (10.9.9.9:22) offers another SSH host key: recorded ED25519 {fp22}, offered now {new}"
    assert "meshctl forget-host-key gpu2" in fix and "do not go on" in fix


def test_a_machine_that_is_no_node_yet_is_told_the_command_that_works_for_it(known_hosts, monkeypatch):
    """add-node of an address whose recorded key changed: forget-host-key takes node names only."""
    path, _fp22, _ = known_hosts
    monkeypatch.setattr(hostkeys, "offered", lambda host, port: [])
    _what, fix = ssh.explain_failure("WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!", "root", "10.9.9.9", 22, path)
    assert "forget-host-key" not in fix and f"ssh-keygen -R '10.9.9.9' -f {path}" in fix
    _what, fix = ssh.explain_failure("WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!", "root", "10.9.9.9", 22, path,
                                     name="gpu2")  # fmt: skip
    assert "meshctl forget-host-key gpu2" in fix
