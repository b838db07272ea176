"""The provider stand-ins' Docker backend (tests/cloud_standin.py): a terminate is answered at once,
as the providers answer it, and the machine's container goes after; ``settle()`` waits for it and
says a removal that failed."""

from __future__ import annotations

import threading

import pytest

from tests.cloud_standin import REMOVAL_TIMEOUT, DockerBackend


class Recording(DockerBackend):
    """`docker` calls recorded instead of run; ``rm`` waits until the test lets it go."""

    def __init__(self, fail: bool = False):
        super().__init__()
        self.calls: list[tuple[str, ...]] = []
        self.timeouts: list[float] = []
        self.release = threading.Event()
        self.fail = fail

    def _docker(self, *args: str, timeout: float = 120) -> None:
        self.timeouts.append(timeout)
        if args[0] == "rm":
            assert self.release.wait(30)
            if self.fail:
                raise RuntimeError("no such container")
        self.calls.append(args)


def test_terminate_answers_before_the_container_is_gone_and_settle_waits_for_it():
    backend = Recording()
    machine = backend.attach("node-1", "i-", "n1", "gpu_1x_h100", 1, 2.0, "192.0.2.5")
    backend.terminate(machine)  # returns while `docker rm` is held
    assert machine.state == "terminated" and backend.calls == []
    backend.release.set()
    backend.settle()
    assert backend.calls == [("rm", "-f", "-v", "node-1")]
    assert backend.timeouts == [REMOVAL_TIMEOUT] and REMOVAL_TIMEOUT > 120  # in the background: time to go


def test_settle_says_a_removal_that_failed():
    backend = Recording(fail=True)
    machine = backend.attach("node-1", "i-", "n1", "gpu_1x_h100", 1, 2.0, "192.0.2.5")
    backend.terminate(machine)
    backend.release.set()
    with pytest.raises(AssertionError, match="docker rm node-1: no such container"):
        backend.settle()


def test_a_new_machine_waits_for_the_removals_before_it():
    made: list[str] = []
    backend = Recording()
    backend.create = lambda machine: made.append(machine.name) or f"node-{machine.name}"
    old = backend.attach("node-1", "i-", "n1", "gpu_1x_h100", 1, 2.0, "192.0.2.5")
    backend.terminate(old)
    new = backend.attach("node-2", "i-", "n2", "gpu_1x_h100", 1, 2.0, "192.0.2.6")
    making = threading.Thread(target=backend.created, args=(new,))
    making.start()
    making.join(0.5)
    assert making.is_alive() and made == []  # held behind the removal
    backend.release.set()
    making.join(30)
    assert made == ["n2"] and backend.calls == [("rm", "-f", "-v", "node-1")]
