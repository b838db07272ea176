"""Hostile and broken provider answers: one bounded reader for all three clients
(depth, size, numbers), one deadline per call, no price of 0, and the head's power program saying
any failure and going on with its other nodes. Each case here crashed or hung before."""

import io
import json
import threading
import urllib.error
from email.message import Message
from http.server import BaseHTTPRequestHandler

import pytest

from meshctl import resources
from tests.cloud_standin import KEY, Server, Standin
from tests.unit.collection.test_power_save import program  # noqa: F401 (fixture)
from tests.unit.meshctl.test_cloud import FakeTime

PROVIDERS = ("lambda", "runpod", "paperspace")


def mod(name):
    return resources.plugin(f"module_utils.{name}")


class Answer:
    """What urllib's opener returns: a body read in pieces, each piece taking SECONDS on TIMER."""

    def __init__(self, body: bytes, timer=None, piece=None, seconds=0.0):
        self.body, self.timer, self.piece, self.seconds = io.BytesIO(body), timer, piece, seconds
        self.headers = Message()

    def read1(self, size):
        if self.timer:
            self.timer.now += self.seconds
        return self.body.read(min(size, self.piece or size))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def client(provider, opener, timer=None):
    timer = timer or FakeTime()
    http = mod("mesh_cloud").Http(provider, "https://api.invalid/v1", KEY, mod(f"mesh_cloud_{provider}").describe,
                                  retries=4, clock=timer.clock, sleep=timer.sleep, opener=opener)  # fmt: skip
    return mod(f"mesh_cloud_{provider}").Client(KEY, http=http), timer


HOSTILE = {
    "nested 100000 deep": b"[" * 100000 + b"]" * 100000,
    "nested objects": b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "an integer of 5000 digits": b'{"data": [{"id": "i1", "gpus": ' + b"9" * 5000 + b"}]}",
    "a float of 400 digits": b'{"data": [], "x": 0.' + b"1" * 400 + b"}",
    "NaN": b'{"data": [], "price": NaN}',
    "Infinity": b'{"data": [], "price": -Infinity}',
    "not JSON": b"<html>maintenance</html>",
}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_every_client_refuses_a_hostile_answer_as_a_bad_answer(provider, case):
    api, _timer = client(provider, lambda request, timeout: Answer(HOSTILE[case]))
    with pytest.raises(mod("mesh_cloud").CloudError) as caught:
        api.list()
    assert caught.value.kind == "bad-answer" and provider in caught.value.message


def test_the_reader_keeps_what_is_plain_and_strings_may_hold_brackets():
    read = mod("mesh_cloud").read_json
    text = b'{"name": "[[[[{{{{\\"]]", "n": [[1, 2.5e3]], "deep": ' + b"[" * 30 + b"]" * 30 + b"}"
    assert read(text, "runpod")["n"] == [[1, 2500.0]] and read(text, "runpod")["name"] == '[[[[{{{{"]]'
    assert read(b"  ", "runpod") is None


def test_a_machine_type_of_5000_digits_is_a_machine_of_one_gpu_with_no_type():
    paperspace = mod("mesh_cloud_paperspace")
    machine = paperspace.normalize({"id": "ps1", "name": "n1", "state": "ready", "machineType": "A100x" + "9" * 5000})
    assert machine["gpus"] == 1 and machine["gpu_type"] == ""


def test_a_drip_fed_answer_ends_at_the_deadline():
    """One byte every 10 s: each read is under the socket's time-out, the whole is not."""
    timer = FakeTime()
    api, _ = client("runpod", lambda request, timeout: Answer(b"[" + b" " * 1000 + b"]", timer, 1, 10.0), timer)
    start = timer.now
    with pytest.raises(mod("mesh_cloud").CloudError) as caught:
        api.list()
    assert caught.value.kind == "unreachable" and "still answering after 120 s" in caught.value.message
    assert timer.now - start <= 130


def test_retry_after_300_four_times_is_not_waited_out():
    timer = FakeTime()
    sent = []

    def throttled(request, timeout):
        sent.append(timeout)
        headers = Message()
        headers["Retry-After"] = "300"
        raise urllib.error.HTTPError(request.full_url, 429, "Too Many Requests", headers, io.BytesIO(b"{}"))

    api, _ = client("lambda", throttled, timer)
    with pytest.raises(mod("mesh_cloud").CloudError) as caught:
        api.list()
    assert caught.value.kind == "rate-limit" and "(its Retry-After: 300 s)" in caught.value.message
    assert caught.value.hint.startswith("try again in 5 min")  # said, not waited: when to try again
    assert timer.slept == [] and len(sent) == 1  # a wait past the deadline is not begun
    assert all(timeout <= 120 for timeout in sent)


def test_short_waits_still_retry_within_the_deadline():
    timer = FakeTime()
    answers = iter([429, 429, 200])

    def flaky(request, timeout):
        status = next(answers)
        if status == 429:
            headers = Message()
            headers["Retry-After"] = "2"
            raise urllib.error.HTTPError(request.full_url, 429, "Too Many Requests", headers, io.BytesIO(b"{}"))
        return Answer(json.dumps({"data": []}).encode())

    api, _ = client("lambda", flaky, timer)
    assert api.list() == [] and timer.slept == [2.0, 2.0]


def test_an_offer_at_no_price_is_not_an_offer():
    base = mod("mesh_cloud")
    assert base.offer("runpod", "NVIDIA A40", "A40", 1, 0) is None
    assert base.offer("runpod", "NVIDIA A40", "A40", 1, "0.0") is None
    assert base.offer("runpod", "NVIDIA A40", "A40", 1, 0.35)["price_per_hour"] == 0.35
    assert base.number(10**400) is None  # a number too big for a float is no number, not OverflowError


class Nested(BaseHTTPRequestHandler):
    """An API that answers every request with JSON nested 100000 deep."""

    def log_message(self, *args):
        pass

    def _nested(self):
        # The request's body read first: a socket closed with unread data in it is reset, and the
        # client may then see "Connection reset by peer" before the answer (seen under load).
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"[" * 100000 + b"]" * 100000
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _nested


def test_the_power_program_marks_down_a_node_whose_provider_answered_badly_and_goes_on(program):  # noqa: F811
    """Before: RecursionError, no log line, no DOWN, and the next node never started."""
    (program.conf / "keys" / "runpod.key").write_text(KEY + "\n")
    hostile = Server(("127.0.0.1", 0), Nested)
    threading.Thread(target=hostile.serve_forever, daemon=True).start()
    try:
        with Standin("paperspace") as api:
            machine = api.add("n2", "A4000", 1, 0.76, state="stopped")
            plan = {"n1": {"instance": "runpod:pod1", "provider": "runpod", "id": "pod1", "idle_stop": 60},
                    "n2": {"instance": f"paperspace:{machine.id}", "provider": "paperspace", "id": machine.id,
                           "idle_stop": 60}}  # fmt: skip
            (program.conf / "nodes.json").write_text(json.dumps(plan))
            (program.conf / "api-urls.json").write_text(json.dumps(
                {"paperspace": api.url, "runpod": f"http://127.0.0.1:{hostile.server_port}/v1"}))  # fmt: skip
            done = program("resume", "n1,n2")
            assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
            assert machine.state in ("starting", "running")  # n2 was still started
    finally:
        hostile.shutdown()
        hostile.server_close()
    calls, log = program.calls.read_text(), program.log.read_text()
    assert "update nodename=n1 state=down reason=meshctl: runpod could not start it" in calls
    assert "nested deeper than 32 levels" in log and "resume n2 (paperspace:" in log
    assert "nodename=n2 state=down" not in calls


def test_the_power_program_says_a_broken_entry_and_goes_on(program):  # noqa: F811
    (program.conf / "nodes.json").write_text(json.dumps({"n1": {"provider": "runpod"}, "n2": ["not", "a", "node"]}))
    done = program("suspend", "n1,n2")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    calls = program.calls.read_text()
    assert "nodename=n1 state=down reason=meshctl: runpod could not stop it: KeyError" in calls
    assert "nodename=n2 state=down" in calls


@pytest.mark.parametrize(
    ("reason", "tries"),
    [
        (__import__("socket").gaierror(-3, "Temporary failure in name resolution"), 1),  # offline: once
        (ConnectionRefusedError(111, "Connection refused"), 1),
        (TimeoutError("timed out"), 5),  # may answer next time: 1 + 4 retries
        (ConnectionResetError(104, "reset"), 5),
    ],
)
def test_a_provider_this_machine_cannot_reach_at_all_is_asked_once(reason, tries):
    """Offline: a name that does not resolve, or a refusal, answers the same when
    asked again, so a read fails at once instead of after 1 + 2 + 4 + 8 s of retries."""
    asked = []

    def opener(request, timeout):
        asked.append(request.full_url)
        raise urllib.error.URLError(reason)

    api, timer = client("lambda", opener)
    with pytest.raises(mod("mesh_cloud").CloudError, match="cannot be reached") as caught:
        api.list()
    assert caught.value.kind == "unreachable"
    assert len(asked) == tries
    assert (timer.slept == []) == (tries == 1)  # no wait at all when asked once
