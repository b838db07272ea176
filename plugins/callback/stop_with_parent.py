# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE)
"""End a run, its workers and what they started, when the process that started ansible-playbook ends."""

from __future__ import annotations

DOCUMENTATION = r"""
name: stop_with_parent
type: aggregate
short_description: End the run with the process that started ansible-playbook
description:
  - Ansible puts each worker (one per task and host) in a session of its own, and passes a SIGTERM
    or SIGINT it receives on to each worker's process group. Any other end of ansible-playbook (a
    SIGHUP when the terminal it ran on closes, a SIGKILL) leaves the workers, and the ssh or the
    module each runs, going on alone.
  - This callback makes both ends the one Ansible handles. When the process that started
    ansible-playbook ends, the kernel sends it SIGTERM (Linux's parent-death signal); a SIGHUP
    becomes a SIGTERM. Either way Ansible stops every worker's process group and then itself.
  - Enabled when its parent's process ID is known (O(parent_pid)). If that process has already ended
    when the callback loads, the run ends at once.
  - meshctl enables it for each of its runs, so that a meshctl killed mid-run leaves no run behind
    that would meet the next one on the nodes.
version_added: 0.1.0
requirements:
  - enabled in C(callbacks_enabled) (ansible.cfg) or C(ANSIBLE_CALLBACKS_ENABLED)
options:
  parent_pid:
    description:
      - The process ID of ansible-playbook's parent when it was started. Without it the callback
        does nothing. Outside Linux only the SIGHUP is turned into a SIGTERM.
    type: int
    env:
      - name: MESHCTL_PARENT_PID
"""

import ctypes
import ctypes.util
import os
import signal
import sys

from ansible.plugins.callback import CallbackBase

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def on_parent_death(signum: int) -> bool:
    """Have the kernel send SIGNUM to this process when its parent ends (Linux); False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0


def terminate_self(_signum=None, _frame=None) -> None:
    """A SIGTERM to this process: Ansible's handler passes it to every worker, then ends the run."""
    os.kill(os.getpid(), signal.SIGTERM)


def tie(parent_pid: int | None) -> bool:
    """End this process (and, through Ansible, its workers) with PARENT_PID; whether it is tied."""
    if not parent_pid:
        return False
    signal.signal(signal.SIGHUP, terminate_self)
    tied = on_parent_death(signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent ended before the kernel was told: nobody waits for this run
        terminate_self()
    return tied


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "meshctl.mesh.stop_with_parent"
    CALLBACK_NEEDS_ENABLED = True

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        tie(self.get_option("parent_pid"))
