"""TEST HELPER (e2e): put molecule's stand-in for tailscale/tailscaled on a Docker node."""

import shlex
import subprocess
from pathlib import Path

STANDIN = Path(__file__).resolve().parents[2] / "molecule" / "resources" / "tailscale" / "tailscale-standin.py"
TAILSCALED_UNIT = """[Unit]
Description=Tailscale node agent (test stand-in)
[Service]
EnvironmentFile=/etc/default/tailscaled
ExecStart=/usr/sbin/tailscaled --state=/var/lib/tailscale/tailscaled.state --port=${PORT} $FLAGS
[Install]
WantedBy=multi-user.target
"""


def install_standin(container: str, keys: list[str], unit: bool = True) -> None:
    """The test double laid out as the package would, accepting `keys`; with `unit`, a systemd
    unit for tailscaled (a pod has no systemd: meshctl's roles run it under supervisor)."""
    subprocess.run(["docker", "cp", str(STANDIN), f"{container}:/usr/local/bin/tailscale-standin"], check=True)
    script = (
        "set -e; chmod 755 /usr/local/bin/tailscale-standin; "
        "ln -sf /usr/local/bin/tailscale-standin /usr/bin/tailscale; "
        "ln -sf /usr/local/bin/tailscale-standin /usr/sbin/tailscaled; "
        "mkdir -p /etc/meshctl-test; umask 077; cat > /etc/meshctl-test/tailscale-valid-keys; umask 022; "
    )
    if unit:
        script += (
            "printf 'PORT=41641\\nFLAGS=\\n' > /etc/default/tailscaled; "
            f"printf %s {shlex.quote(TAILSCALED_UNIT)} > /etc/systemd/system/tailscaled.service; "
            "systemctl daemon-reload"
        )
    subprocess.run(["docker", "exec", "-i", container, "sh", "-c", script], input="".join(f"{k}\n" for k in keys),
                   text=True, check=True)  # fmt: skip
