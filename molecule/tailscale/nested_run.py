#!/usr/bin/env python3
"""TEST HELPER (molecule only): run a playbook through ansible-runner and keep what it wrote.

    nested_run.py NAME PLAYBOOK [ansible-playbook options...]

The private data dir ($MOLECULE_EPHEMERAL_DIRECTORY/runs/NAME) is kept, so verify can search the
runner's artifacts (stdout, job events) for secrets. Prints the run's output; exits with its rc.
"""

import os
import shlex
import shutil
import sys

import ansible_runner


def main() -> int:
    name, playbook, *options = sys.argv[1:]
    ephemeral = os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]
    private = os.path.join(ephemeral, "runs", name)
    shutil.rmtree(private, ignore_errors=True)
    os.makedirs(private, mode=0o700)
    result = ansible_runner.run(
        private_data_dir=private,
        playbook=os.path.abspath(playbook),
        inventory=os.path.join(ephemeral, "inventory"),
        cmdline=shlex.join(options) or None,
        envvars={"ANSIBLE_NOCOLOR": "1"},
        quiet=True,
    )
    with open(os.path.join(private, "artifacts", result.config.ident, "stdout")) as handle:
        print(handle.read())
    return result.rc


if __name__ == "__main__":
    sys.exit(main())
