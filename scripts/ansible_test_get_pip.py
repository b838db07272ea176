"""ansible-test's pip bootstrap without its download (scripts/sanity).

ansible-test makes each sanity test's virtualenv without pip, then runs a bootstrap script it
downloads from ci-files.testing.ansible.com: pypa's get-pip.py, which installs pip with the
arguments it is given. This machine cannot reach that host (only the package indexes), so
scripts/sanity puts this file where ansible-test caches the download: pip from the interpreter's
own ensurepip, then `pip install ARGS` with the machine's pip configuration (its index, its CA).
"""

import ensurepip
import importlib
import os
import runpy
import sys

ensurepip.bootstrap(upgrade=True)
os.environ.pop("PIP_CONFIG_FILE", None)  # ensurepip shuts pip's configuration out; the install needs it
importlib.invalidate_caches()
ARGS = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]  # get-pip.py's own options
sys.argv = ["pip", "install", "--upgrade", *ARGS]
runpy.run_module("pip", run_name="__main__", alter_sys=True)
