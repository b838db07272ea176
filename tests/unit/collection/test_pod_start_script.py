"""The pod's meshctl-pod-start --is-active (what `meshctl status` reads on a pod): one supervisorctl
for all the programs asked about, one line each as `systemctl is-active` prints them."""

import os
import subprocess
from pathlib import Path

import jinja2

TEMPLATE = Path(__file__).resolve().parents[3] / "roles" / "pod" / "templates" / "meshctl-pod-start.j2"

SUPERVISORCTL = """#!/bin/sh
echo "$@" >> "$CALLS"
[ "$#" -eq 1 ] && [ "$1" = status ] || exit 9
echo 'munge                            RUNNING   pid 81, uptime 0:10:02'
echo 'slurmd                           STOPPED   Nov 28 08:00 PM'
echo 'tailscaled                       FATAL     Exited too quickly'
exit 3
"""


def test_is_active_asks_supervisor_once_and_says_each_programs_state(tmp_path):
    script = tmp_path / "meshctl-pod-start"
    env = jinja2.Environment(undefined=jinja2.ChainableUndefined, trim_blocks=True)
    env.filters["comment"] = lambda text: "# " + str(text)
    script.write_text(env.from_string(TEMPLATE.read_text()).render(ansible_managed="Ansible managed"))
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "supervisorctl"
    fake.write_text(SUPERVISORCTL)
    fake.chmod(0o755)
    calls = tmp_path / "calls"
    environ = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "CALLS": str(calls)}
    done = subprocess.run(["sh", str(script), "--is-active", "munge", "slurmd", "tailscaled", "mlflow"],
                          env=environ, capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout.split("\n")[:4] == ["active", "stopped", "fatal", "unknown"]
    assert calls.read_text().splitlines() == ["status"]  # one call, not one per program
