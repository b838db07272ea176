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
  - Each worker is tied to ansible-playbook as it is forked (by its main thread). A worker forked
    while ansible-playbook was ending (after Ansible passed its SIGTERM on, so that Ansible never
    knew it) would otherwise wait forever to hand its result to a process that is gone. A worker
    whose ansible-playbook ended before it was tied ends at once. The kernel tells the worker with a
    SIGHUP, which runs the worker's own SIGTERM handling (its process group ended, then itself)
    unless that already runs; a second SIGTERM, when ansible-playbook ends right after passing its
    own on, would end the worker in the middle of it and leave what its task started running.
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
import threading

from ansible.plugins.callback import CallbackBase

PR_SET_PDEATHSIG = 1  # linux/prctl.h
# The name of the SIGTERM handler Ansible gives each worker (executor/process/worker.py).
TERM_HANDLER = "_term"


_libc: ctypes.CDLL | None = None


def libc() -> ctypes.CDLL:
    """The C library, loaded once: by the run's process when it ties itself, before it forks, so that
    a worker finds it loaded (ctypes.util.find_library runs `ldconfig -p`, a process of its own, which
    every worker of a run paid for)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


def on_parent_death(signum: int) -> bool:
    """Have the kernel send SIGNUM to this process when its parent ends (Linux); False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    return libc().prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0


def terminate_self(_signum=None, _frame=None) -> None:
    """A SIGTERM to this process: Ansible's handler passes it to every worker, then ends the run."""
    os.kill(os.getpid(), signal.SIGTERM)


_forker: tuple[int, bool] | None = None  # (the process that forks, whether from its main thread), for the child


def _before_fork() -> None:
    global _forker
    _forker = (os.getpid(), threading.current_thread() is threading.main_thread())


def run_gone(_signum=None, frame=None) -> None:
    """A worker's parent-death signal: its SIGTERM handling (Ansible's ``_term``: the worker's process
    group ended, then the worker), unless that runs already (it first puts SIGTERM back to its
    default, so a SIGTERM then would end the worker before its group); where the worker has none
    yet (nothing of its task started), its end."""
    running = frame
    while running is not None:
        if running.f_code.co_name == TERM_HANDLER:
            return
        running = running.f_back
    handler = signal.getsignal(signal.SIGTERM)
    if callable(handler) and getattr(handler, "__name__", "") == TERM_HANDLER:
        handler(signal.SIGTERM, frame)
    os._exit(1)


def tie_forked(run_pid: int) -> bool:
    """In a process just forked: when RUN_PID (ansible-playbook) forked it from its main thread (a
    worker), end with it (``run_gone`` on the parent-death signal, a SIGHUP); when RUN_PID ended
    already, end now (nobody reads what it would hand back). A fork by any other process or thread
    is left alone (the parent-death signal would follow the thread). Whether it is tied."""
    forker = _forker
    if forker is None or forker[0] != run_pid or not forker[1]:
        return False
    signal.signal(signal.SIGHUP, run_gone)
    tied = on_parent_death(signal.SIGHUP)
    if os.getppid() != run_pid:
        os._exit(1)
    return tied


def tie(parent_pid: int | None) -> bool:
    """End this process (and, through Ansible, its workers) with PARENT_PID; whether it is tied.
    Every worker it forks from now on ends with it (``tie_forked``)."""
    if not parent_pid:
        return False
    signal.signal(signal.SIGHUP, terminate_self)
    tied = on_parent_death(signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent ended before the kernel was told: nobody waits for this run
        terminate_self()
    run_pid = os.getpid()
    os.register_at_fork(before=_before_fork, after_in_child=lambda: tie_forked(run_pid))
    return tied


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "meshctl.mesh.stop_with_parent"
    CALLBACK_NEEDS_ENABLED = True

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        tie(self.get_option("parent_pid"))
