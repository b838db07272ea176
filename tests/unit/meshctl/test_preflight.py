"""Preflight decisions from what a machine reports, and SSH failure explanations."""

from meshctl import preflight, ssh

GOOD = """uid=0
sudo=root
os_id=debian
os_like=
os_version=12
os_name=Debian GNU/Linux 12 (bookworm)
arch=x86_64
disk_free_mb=80000
pid1=systemd
tun=yes
python3=/usr/bin/python3
hostname=gpu-box
dmi=QEMU Standard PC
"""


def checks(text, user="root"):
    return {c.name: c for c in preflight.evaluate(preflight.parse_probe(text), user)}


def test_a_good_machine_passes():
    assert all(c.ok for c in checks(GOOD).values())


def test_ubuntu_and_derivatives_pass():
    text = GOOD.replace("os_id=debian", "os_id=pop").replace("os_like=", "os_like=ubuntu debian")
    assert checks(text)["Debian or Ubuntu"].ok


def test_failures_name_the_fix():
    text = (GOOD.replace("sudo=root", "sudo=no").replace("pid1=systemd", "pid1=bash")
            .replace("disk_free_mb=80000", "disk_free_mb=100").replace("os_id=debian", "os_id=rocky"))  # fmt: skip
    got = checks(text, user="ubuntu")
    assert not got["root or sudo"].ok and "ubuntu ALL=(ALL) NOPASSWD:ALL" in got["root or sudo"].hint
    assert not got["systemd as PID 1"].ok
    assert not got["free disk on /"].ok
    assert not got["Debian or Ubuntu"].ok


def test_missing_tun_only_warns():
    tun = checks(GOOD.replace("tun=yes", "tun=no"))["/dev/net/tun"]
    assert not tun.ok and not tun.blocking
    result = preflight.Preflight(True, list(checks(GOOD.replace("tun=yes", "tun=no")).values()), {})
    assert result.passed


def test_provider_detection():
    assert preflight.detect_provider({"env_mark": "RUNPOD_"}) == "runpod"
    assert preflight.detect_provider({"dmi": "Paperspace Cloud", "hostname": "x"}) == "paperspace"
    assert preflight.detect_provider({"hostname": "lambda-a100-1"}) == "lambda"
    assert preflight.detect_provider({"hostname": "desk"}) == "generic"


def test_ssh_failures_are_explained():
    assert "refused" in ssh.explain_failure("ssh: connect to host h port 22: Connection refused", "root", "h", 22)[0]
    what, fix = ssh.explain_failure("root@h: Permission denied (publickey).", "root", "h", 22)
    assert "did not accept the SSH key" in what and "--ssh-key" in fix
    assert "did not answer" in ssh.explain_failure("connect to host h port 22: Connection timed out", "r", "h", 22)[0]
    assert "resolve" in ssh.explain_failure("Could not resolve hostname h", "r", "h", 22)[0]


def test_the_packaged_slurm_major_comes_from_apt_cache_policy():
    # The probe's line, as `apt-cache policy slurmctld | grep -E ... | tr -s ' \n' ' '` prints it.
    fresh = {"slurm_policy": " Installed: (none) Candidate: 22.05.8-4+deb12u3 "}
    installed = {"slurm_policy": " Installed: 24.11.5-4+deb13u1 Candidate: 24.11.5-4+deb13u1 "}
    assert preflight.packaged_slurm_major(fresh) == "22.05"
    assert preflight.packaged_slurm_major(installed) == "24.11"
    assert preflight.packaged_slurm_major({"slurm_policy": " Installed: (none) Candidate: (none) "}) is None
    assert preflight.packaged_slurm_major({}) is None


POD = GOOD.replace("pid1=systemd", "pid1=bash").replace("tun=yes", "tun=no")


def test_a_pod_joins_in_pod_mode_with_its_limits_shown():
    for text, provider in ((POD, None), (GOOD.replace("pid1=systemd", "pid1=sleep") + "env_mark=RUNPOD_\n", None),
                           (GOOD, "runpod")):  # fmt: skip
        facts = preflight.parse_probe(text)
        assert preflight.is_pod(facts, provider)
        got = {c.name: c for c in preflight.evaluate(facts, "root", pod=True)}
        assert "systemd as PID 1" not in got
        assert got["pod mode"].ok and "supervisor" in got["pod mode"].note and "NFS" in got["pod mode"].note
        assert preflight.Preflight(True, list(got.values()), facts, pod=True).passed


def test_a_container_without_systemd_but_with_tun_is_refused_and_told_about_pod_mode():
    facts = preflight.parse_probe(GOOD.replace("pid1=systemd", "pid1=tini"))
    assert not preflight.is_pod(facts)
    got = checks(GOOD.replace("pid1=systemd", "pid1=tini"))
    assert not got["systemd as PID 1"].ok and "--provider runpod" in got["systemd as PID 1"].hint
    assert not preflight.is_pod(preflight.parse_probe(GOOD))
