"""End-to-end tests: the CLI over real SSH against Docker nodes."""

import subprocess
import time


def wait_for_ssh(address: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if subprocess.run(["ssh-keyscan", "-T", "2", address], capture_output=True, text=True).stdout.strip():
            return
        time.sleep(1)
    raise AssertionError(f"no sshd at {address} after {seconds}s")
