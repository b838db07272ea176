#!/usr/bin/env python3
"""What an authenticated request costs the head's MLflow server, with and without its credential cache.

Every request to meshctl's tracking server carries an account (basic auth): MLflow checks the
password against its scrypt hash, by design a slow computation. A training job that logs every
step makes such a request each time. This asks the server N times with one account and reads the
CPU time of the server's processes (the `mlflow` user's) before and after, first with the cache
the role configures (`mlflow_auth_cache_seconds`, MLflow's `auth_cache_ttl_seconds`), then with
`--compare` also with the cache off (0) for the same N, and puts the setting back (MLflow restarts
twice). It prints one table (and `--json`); nothing is asserted: these are figures to read.

    python bench/mlflow_auth.py [--container head] [--requests 100] [--compare] [--json]

Needs a head converged by meshctl running in a Docker container (`make demo`, whose head is
head, or any test bed's head). The password is read inside the container and never leaves it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

# Runs inside the head (its system Python): N requests as the admin account, the server's CPU-seconds.
PROBE = r"""
import base64, configparser, json, os, re, sys, time, urllib.request
n = int(sys.argv[1])
ini = configparser.ConfigParser(interpolation=None)
ini.read("/var/lib/mlflow/basic_auth.ini")
user, password = ini["mlflow"]["admin_username"], ini["mlflow"]["admin_password"]
uri = re.search(r"MLFLOW_TRACKING_URI=(\S+)", open("/etc/profile.d/meshctl-mlflow.sh").read()).group(1)
uid = int(os.popen("id -u mlflow").read())
tick = os.sysconf("SC_CLK_TCK")

def server_cpu():
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            continue
    return total / tick

token = base64.b64encode(f"{user}:{password}".encode()).decode()
ask = urllib.request.Request(uri + "/api/2.0/mlflow/experiments/search?max_results=1",
                             headers={"Authorization": "Basic " + token})
urllib.request.urlopen(ask, timeout=60).read()  # the server's first answer (imports) not counted
before, start = server_cpu(), time.monotonic()
for _ in range(n):
    urllib.request.urlopen(ask, timeout=60).read()
print(json.dumps({"cpu": server_cpu() - before, "seconds": time.monotonic() - start}))
"""

INI = "/var/lib/mlflow/basic_auth.ini"


def on(container: str, *argv: str, stdin: str | None = None) -> str:
    done = subprocess.run(["docker", "exec", "-i", container, *argv], input=stdin, capture_output=True, text=True,
                          check=False)  # fmt: skip
    if done.returncode:
        sys.exit(f"{container}: {' '.join(argv[:3])}... failed: {done.stderr.strip()[-500:]}")
    return done.stdout


def configured(container: str) -> int:
    line = [x for x in on(container, "cat", INI).splitlines() if x.startswith("auth_cache_ttl_seconds")]
    return int(line[0].split("=")[1]) if line else 0


WAIT = (  # the tracking URI from the profile snippet; /health needs no account
    "systemctl restart mlflow; . /etc/profile.d/meshctl-mlflow.sh; for i in $(seq 120); do "
    'python3 -c \'import os, urllib.request; urllib.request.urlopen(os.environ["MLFLOW_TRACKING_URI"] + "/health")\' '
    "2>/dev/null && exit 0; sleep 1; done; exit 1"
)


def cache_off(container: str) -> None:
    """basic_auth.ini kept aside (inside the head), the cache set to 0, MLflow restarted and answering."""
    on(container, "bash", "-c", f"set -e; cp -p {INI} {INI}.bench; sed -i '/^auth_cache_ttl_seconds/d' {INI}; "
       f"echo 'auth_cache_ttl_seconds = 0' >> {INI}; " + WAIT)  # fmt: skip


def put_back(container: str) -> None:
    on(container, "bash", "-c", f"set -e; mv -f {INI}.bench {INI}; " + WAIT)


def measure(container: str, requests: int) -> dict:
    return json.loads(on(container, "python3", "-", str(requests), stdin=PROBE))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--container", default="head")
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--compare", action="store_true", help="also with the cache off (restarts MLflow twice)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ttl = configured(args.container)
    rows = [{"auth_cache_ttl_seconds": ttl, **measure(args.container, args.requests)}]
    if args.compare:
        cache_off(args.container)
        try:
            rows.append({"auth_cache_ttl_seconds": 0, **measure(args.container, args.requests)})
        finally:
            put_back(args.container)
    for row in rows:
        row["requests"] = args.requests
        row["cpu_per_request"] = row["cpu"] / args.requests
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'auth_cache_ttl_seconds':>22} {'requests':>8} {'server CPU-s':>12} {'CPU-s/request':>13} {'wall s':>7}")
    for row in rows:
        print(f"{row['auth_cache_ttl_seconds']:>22} {row['requests']:>8} {row['cpu']:>12.2f} "
              f"{row['cpu_per_request']:>13.4f} {row['seconds']:>7.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
