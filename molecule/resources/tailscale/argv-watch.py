#!/usr/bin/env python3
"""TEST HELPER (molecule only): records every process command line seen on this node.

Run as a systemd service while the tailscale role and rotations run; verify then checks that no
auth key ever appeared in any process's argv. Samples /proc every 20 ms and writes each new
command line once to /var/log/meshctl-test-argv.log.
"""

import os
import time

LOG = "/var/log/meshctl-test-argv.log"


def command_lines() -> list[bytes]:
    """Every process's command line now, as /proc holds it (NUL-separated words), with os.open and
    os.read: half the CPU of a file object (tests/e2e/test_cli_ssh.py samples with it too)."""
    lines = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{pid}/cmdline", os.O_RDONLY)
            try:
                chunks = [os.read(fd, 1 << 16)]
                while len(chunks[-1]) == 1 << 16:  # a longer command line: the rest of it
                    chunks.append(os.read(fd, 1 << 16))
            finally:
                os.close(fd)
        except OSError:  # the process ended
            continue
        lines.append(b"".join(chunks))
    return lines


def main() -> None:
    seen: set[bytes] = set()
    with open(LOG, "ab", buffering=0) as log:
        while True:  # 50 passes a second
            for words in command_lines():
                line = words.replace(b"\0", b" ").strip()
                if line and line not in seen:
                    seen.add(line)
                    log.write(line + b"\n")
            time.sleep(0.02)


if __name__ == "__main__":
    main()
