"""The mesh_status module's reads (plugins/module_utils/mesh_status_read.py, which meshctl also sends to a
node itself), on files and commands of this machine."""

import sys
from pathlib import Path

import pytest

from meshctl import resources


@pytest.fixture
def mod():
    return resources.plugin("module_utils.mesh_status_read")


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_fstab_entry_is_matched_by_its_mount_point_only(mod, tmp_path):
    fstab = write(tmp_path, "fstab", "# 100.64.0.1:/mnt/shared-slurm /mnt/shared-slurm nfs4 defaults 0 0\n"
                  "100.64.0.1:/mnt/shared-slurm /mnt/shared-slurm-old nfs4 defaults 0 0\n")  # fmt: skip
    assert not mod.fstab_has("/mnt/shared-slurm", fstab)  # a comment, and another mount point
    fstab = write(tmp_path, "fstab2", "100.64.0.1:/mnt/shared-slurm\t/mnt/shared-slurm  nfs4 _netdev 0 0\n")
    assert mod.fstab_has("/mnt/shared-slurm", fstab)
    assert not mod.fstab_has("/mnt/shared-slurm", str(tmp_path / "none"))


def test_only_an_nfs_mount_counts_as_mounted(mod, tmp_path):
    mounts = write(tmp_path, "mounts", "overlay / overlay rw 0 0\n/dev/sda1 /mnt/shared-slurm ext4 rw 0 0\n")
    assert not mod.nfs_mounted("/mnt/shared-slurm", mounts)  # the volume Docker put there is not the share
    mounts = write(tmp_path, "mounts2", "100.64.0.1:/mnt/shared-slurm /mnt/shared-slurm nfs4 rw,relatime 0 0\n")
    assert mod.nfs_mounted("/mnt/shared-slurm", mounts)


def test_kernel_nfs_support_is_read_from_proc_filesystems(mod, tmp_path):
    assert mod.kernel_has_nfs(write(tmp_path, "fs", "nodev\tsysfs\nnodev\tnfs\nnodev\tnfs4\n"))
    assert not mod.kernel_has_nfs(write(tmp_path, "fs2", "nodev\tsysfs\n\text4\nnodev\tnfs4x\n"))


def test_mount_state_words(mod, monkeypatch):
    for mounted, in_fstab, kernel, possible, word in [
        (True, True, True, True, "mounted"),
        (False, False, True, True, "missing"),
        (False, True, True, True, "not-mounted"),
        (False, True, False, True, "fstab-only"),
        (False, True, True, False, "fstab-only"),  # a pod: never mountable
    ]:
        monkeypatch.setattr(mod, "nfs_mounted", lambda _p, m=mounted: m)
        monkeypatch.setattr(mod, "fstab_has", lambda _p, f=in_fstab: f)
        monkeypatch.setattr(mod, "kernel_has_nfs", lambda k=kernel: k)
        assert mod.mount_state("/mnt/shared-slurm", possible) == word


def test_service_states_pair_names_with_lines_and_fill_what_is_missing(mod, monkeypatch):
    calls = []

    def run(argv, timeout):
        calls.append(argv)
        return {"rc": 3, "stdout": "active\ninactive\n"}

    monkeypatch.setattr(mod, "run", run)
    assert mod.service_states(["munge", "slurmd", "slurmctld"], False, 5) == {
        "munge": "active", "slurmd": "inactive", "slurmctld": "unknown"}  # fmt: skip
    assert calls == [["systemctl", "is-active", "munge", "slurmd", "slurmctld"]]  # one call for all
    mod.service_states(["munge"], True, 5)
    assert calls[-1] == ["meshctl-pod-start", "--is-active", "munge"]
    assert mod.service_states([], False, 5) == {}


def test_run_caps_output_and_names_a_missing_or_hanging_command(mod):
    assert mod.run(["no-such-command-meshctl"], 5) == {"rc": 127, "stdout": ""}
    assert mod.run([sys.executable, "-c", "import time; time.sleep(5)"], 0.2) == {"rc": 124, "stdout": ""}
    big = mod.run([sys.executable, "-c", f"print('x' * {mod.LIMIT * 2})"], 5)
    assert big["rc"] == 0 and len(big["stdout"]) == mod.LIMIT


def test_http_get_reports_status_and_body_or_zero(mod, monkeypatch):
    import http.server
    import threading

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
            self.wfile.write(b"OK" if self.path == "/health" else b"no")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        assert mod.http_get(base + "/health", 5) == {"status": 200, "body": "OK"}
        assert mod.http_get(base + "/other", 5) == {"status": 404, "body": ""}
        for name in ("http_proxy", "HTTP_PROXY", "all_proxy"):  # the node's own service: never through a proxy
            monkeypatch.setenv(name, "http://127.0.0.1:9")
        monkeypatch.setenv("no_proxy", "")
        assert mod.http_get(base + "/health", 5) == {"status": 200, "body": "OK"}
        assert mod.http_get("https://127.0.0.1/health", 1)["status"] == 0  # http only: a service of this node
    finally:
        server.shutdown()
    assert mod.http_get(base + "/health", 1) == {"status": 0, "body": ""}  # nothing listens any more


def test_http_get_reads_an_http_1_1_answer_by_its_length_and_parses_only_plain_urls(mod):
    """A server that keeps the connection open after an answer with Content-Length (HTTP/1.1, as
    uvicorn may): the body is read to its length, not to a close that never comes."""
    import http.server
    import threading

    class KeepAlive(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"OK")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), KeepAlive)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert mod.http_get(f"http://127.0.0.1:{server.server_port}/health", 5) == {"status": 200, "body": "OK"}
    finally:
        server.shutdown()
    assert mod.split_url("http://100.64.0.1:5000/health") == ("100.64.0.1", 5000, "/health")
    assert mod.split_url("http://[fd7a:115c::1]:5000/health") == ("fd7a:115c::1", 5000, "/health")
    assert mod.split_url("http://head/health") == ("head", 80, "/health")
    for bad in (
        "https://head/health",
        "http://:5000/x",
        "http://head:0/x",
        "http://head:99999/x",
        "http://h:x/",
        "ftp://head/",
        None,
    ):
        assert mod.split_url(bad) is None, bad


def test_the_share_is_the_heads_only_where_its_marker_holds_the_heads_identity(tmp_path):
    from plugins.module_utils import mesh_status_read as reader

    share = tmp_path / "share"
    share.mkdir()
    wanted = "cd" * 32
    assert reader.mount_state(str(share), True, wanted) == "missing"  # no marker, nothing mounted, no fstab
    (share / ".meshctl-share").write_text(wanted + "\n")
    assert reader.mount_state(str(share), True, wanted) == "shared"
    (share / ".meshctl-share").write_text("ef" * 32 + "\n")  # another head's share
    assert reader.mount_state(str(share), True, wanted) == "missing"
    (share / ".meshctl-share").unlink()
    (tmp_path / "elsewhere").write_text(wanted)
    (share / ".meshctl-share").symlink_to(tmp_path / "elsewhere")  # never read through a link
    assert reader.share_marker(str(share), ".meshctl-share") == ""
    assert reader.mount_state("/", True, wanted) == "not-the-heads"  # a mount point without the marker
