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


def wait_for(what, seconds: float, step: float = 2):
    """WHAT's first true value within SECONDS (asked every STEP), else its last answer."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(step)
    return what()
