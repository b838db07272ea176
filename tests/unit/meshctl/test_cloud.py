"""Provider clients (plugins/module_utils/mesh_cloud*.py) and meshctl's accounts and machines
(meshctl/cloud.py): on the documented answers (tests/fixtures/cloud) and against the stand-in
APIs (tests/cloud_standin.py), over real HTTP."""

import json
import os
import stat
import subprocess
import threading

import pytest
from click.testing import CliRunner

from meshctl import cloud, resources
from meshctl.cli import cli
from meshctl.errors import ProviderError, UsageError
from meshctl.model import Node
from meshctl.ops.work import Work, reading
from tests import api_schemas
from tests.cloud_standin import KEY, Standin
from tests.conftest import FIXTURES
from tests.unit.meshctl.test_cli import fake_preflight, fake_runner  # noqa: F401 (fixtures)


def mod(name):
    return resources.plugin(f"module_utils.{name}")


def documented(name):
    return json.loads((FIXTURES / "cloud" / name).read_text())


class FakeTime:
    """A clock that only moves when slept on: pacing and backoff, measured without waiting."""

    def __init__(self):
        self.now = 1000.0
        self.slept = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(round(seconds, 3))
        self.now += seconds


def client_for(standin, key=KEY, timer=None):
    base = mod("mesh_cloud")
    provider = mod(f"mesh_cloud_{standin.provider}")
    timer = timer or FakeTime()
    http = base.Http(standin.provider, standin.url, key, provider.describe, min_interval=1.0, retries=3,
                     clock=timer.clock, sleep=timer.sleep)  # fmt: skip
    return provider.Client(key, http=http), timer


# --- the documented answers -------------------------------------------------------------------


def test_lambda_instances_as_documented():
    rows = [mod("mesh_cloud_lambda").normalize(i) for i in documented("lambda-instances.json")["data"]]
    assert rows[0] == {
        "provider": "lambda", "id": "0920582c7ff041399e34823a0be62549", "name": "gpu-a", "status": "running",
        "provider_status": "active", "ssh_host": "198.51.100.2", "ssh_port": 22, "ssh_user": "ubuntu", "gpus": 8,
        "gpu_type": "H100 (80 GB SXM5)", "price_per_hour": 23.92, "cloud": "", "volume": "",
    }  # fmt: skip
    assert rows[1]["status"] == "starting" and rows[1]["ssh_host"] is None and rows[1]["name"] == ""


def test_lambda_ssh_keys_and_an_instances_launch_spec_as_documented():
    class Answers:  # the documented answers, as Http.request returns them
        def __init__(self):
            self.sent = []

        def request(self, method, path, body=None):
            self.sent.append((method, path, body))
            if path == "/ssh-keys":
                return documented("lambda-ssh-keys.json") if method == "GET" else {"data": body}
            return {"data": documented("lambda-instances.json")["data"][0]}

    http = Answers()
    client = mod("mesh_cloud_lambda").Client("k", http=http)
    assert client.ssh_keys() == {"macbook-pro": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDgnK2GsoAq8l5AnjN7u1VYb4BfBD2Sn7n"
                                 "mVOtxmPjrz user@example.com"}  # fmt: skip
    client.add_ssh_key("meshctl-head", "ssh-ed25519 AAAA head")
    assert http.sent[-1] == ("POST", "/ssh-keys", {"name": "meshctl-head", "public_key": "ssh-ed25519 AAAA head"})
    spec = client.spec("0920582c7ff041399e34823a0be62549")
    assert spec == {"instance_type": "gpu_8x_h100_sxm5", "region": "us-tx-1", "name": "gpu-a"}


def test_a_lambda_launch_spec_that_is_not_plain_is_refused():
    with Standin("lambda") as api:
        machine = api.add("n1; rm -rf /", "gpu_1x_a10", 1, 1.29)
        client, _ = client_for(api)
        with pytest.raises(mod("mesh_cloud").CloudError, match="plain name"):
            client.spec(machine.id)


def test_lambda_launches_name_one_registered_key():
    with Standin("lambda") as api:
        client, _ = client_for(api)
        with pytest.raises(mod("mesh_cloud").CloudError, match="Exactly one SSH key"):
            client.launch({"type": "gpu_1x_a10", "name": "n1", "region": "us-east-1",
                           "ssh_key_names": ["not-registered"]})  # fmt: skip
        client.add_ssh_key("meshctl-head", "ssh-ed25519 AAAA head")
        assert client.ssh_keys()["meshctl-head"] == "ssh-ed25519 AAAA head"
        new_id = client.launch({"type": "gpu_1x_a10", "name": "n1", "region": "us-west-1",
                                "ssh_key_names": ["meshctl-head"]})  # fmt: skip
        assert api.backend.machines[new_id].public_keys == ["ssh-ed25519 AAAA head"]
        assert client.spec(new_id) == {"instance_type": "gpu_1x_a10", "region": "us-west-1", "name": "n1"}


def test_lambda_capacity_error_as_documented():
    message, kind = mod("mesh_cloud_lambda").describe(400, documented("lambda-error-capacity.json"))
    assert kind == "capacity" and message.startswith("Not enough capacity") and "try your request again" in message


def test_runpod_v2_pods_as_documented():
    rows = [mod("mesh_cloud_runpod").normalize(p) for p in documented("runpod-pods.json")["pods"]]
    assert rows[0] == {
        "provider": "runpod", "id": "xedezhzb9la3ye", "name": "trainer-1", "status": "running",
        "provider_status": "RUNNING", "ssh_host": "195.26.233.3", "ssh_port": 34446, "ssh_user": "root", "gpus": 1,
        "gpu_type": "NVIDIA GeForce RTX 4090", "price_per_hour": 0.69, "cloud": "COMMUNITY", "volume": "",
    }  # fmt: skip
    assert rows[1]["status"] == "stopped" and rows[1]["ssh_host"] is None and rows[1]["ssh_port"] is None
    assert rows[1]["gpus"] == 2 and rows[1]["price_per_hour"] == 0.0 and rows[1]["cloud"] == "SECURE"


def test_runpod_ssh_from_the_runtime_ports_when_there_is_no_direct_entry():
    pod = {**documented("runpod-pods.json")["pods"][0]}
    pod["ssh"] = {"proxy": None, "direct": None}
    assert mod("mesh_cloud_runpod").normalize(pod)["ssh_host"] == "195.26.233.3"
    pod["runtime"] = None
    assert mod("mesh_cloud_runpod").normalize(pod)["ssh_port"] is None


@pytest.mark.parametrize(
    ("status", "word"),
    [("PROVISIONING", "starting"), ("STARTING", "starting"), ("RUNNING", "running"), ("EXITED", "stopped"),
     ("ERROR", "unhealthy"), ("TERMINATED", "terminated")],
)  # fmt: skip
def test_every_documented_runpod_status_has_its_word(status, word):
    pod = {**documented("runpod-pods.json")["pods"][1], "status": status}
    assert mod("mesh_cloud_runpod").normalize(pod)["status"] == word
    assert status in api_schemas.load("runpod")["$defs"]["PodStatus"]["enum"]


def test_runpod_problems_are_shown_with_their_detail_and_kind():
    describe = mod("mesh_cloud_runpod").describe
    problem = {"title": "Unprocessable Entity", "status": 422, "detail": "request body does not match",
               "errors": ["$: additional properties 'dockerStartCmd' not allowed"]}  # fmt: skip
    assert describe(422, problem) == ("request body does not match ($: additional properties 'dockerStartCmd' not "
                                      "allowed)", "invalid")  # fmt: skip
    assert describe(402, {"title": "Payment Required", "status": 402, "detail": "Insufficient balance"})[1] == "billing"
    assert describe(409, {"title": "Conflict", "status": 409, "detail": "cannot start"})[1] == "conflict"
    assert describe(400, {"title": "Bad Request", "status": 400, "detail": "This GPU could not be placed: no "
                          "capacity"})[1] == "capacity"  # fmt: skip
    assert describe(500, None) == ("no message", "error")


def test_paperspace_machines_as_documented_with_a_price_table():
    page = documented("paperspace-machines.json")
    ps = mod("mesh_cloud_paperspace")
    rows = [ps.normalize(m, {"A6000": 1.89}) for m in page["items"]]
    assert rows[0]["status"] == "running" and rows[0]["ssh_user"] == "paperspace" and rows[0]["gpus"] == 1
    assert rows[0]["price_per_hour"] == 1.89 and rows[0]["ssh_host"] == "203.0.113.7"
    assert rows[1]["status"] == "stopped" and rows[1]["gpus"] == 8 and rows[1]["price_per_hour"] is None
    assert [ps.gpu_count(t) for t in ("C5", "A4000", "A100-80Gx8", "")] == [0, 1, 8, 0]


@pytest.mark.parametrize(
    ("change", "field", "shown"),
    [
        ({"name": "gpu\x1b]52;c;aWQK\x07"}, "name", ""),
        ({"ip": "198.51.100.2; rm -rf /"}, "ssh_host", None),
        ({"instance_type": {"price_cents_per_hour": "lots", "specs": {"gpus": 10**9}}}, "gpus", 0),
    ],
    ids=["escape-in-name", "command-in-ip", "absurd-numbers"],
)
def test_a_providers_answer_outside_its_shape_is_made_safe(change, field, shown):
    data = {**documented("lambda-instances.json")["data"][0], **change}
    assert mod("mesh_cloud_lambda").normalize(data)[field] == shown


def test_an_instance_id_outside_its_shape_is_refused():
    data = {**documented("lambda-instances.json")["data"][0], "id": "../../etc/passwd"}
    with pytest.raises(mod("mesh_cloud").CloudError, match="instance id meshctl refuses"):
        mod("mesh_cloud_lambda").normalize(data)


def test_the_api_url_is_overridable_and_checked():
    base = mod("mesh_cloud")
    assert base.api_url("lambda", "https://cloud.lambda.ai/api/v1", {}) == "https://cloud.lambda.ai/api/v1"
    assert base.api_url("lambda", "x", {"MESHCTL_LAMBDA_API_URL": "http://127.0.0.1:9/api/v1/"}) == (
        "http://127.0.0.1:9/api/v1"
    )
    with pytest.raises(base.CloudError, match="MESHCTL_RUNPOD_API_URL='file:///etc' is not an http"):
        base.api_url("runpod", "x", {"MESHCTL_RUNPOD_API_URL": "file:///etc"})


# --- the clients against the stand-ins, over HTTP --------------------------------------------


@pytest.mark.parametrize("provider", ["lambda", "runpod", "paperspace"])
def test_each_client_lists_gets_and_terminates(provider):
    with Standin(provider) as api:
        a = api.add("alpha", "gpu_8x_h100_sxm5" if provider == "lambda" else "A6000", 8, 23.92)
        api.add("beta", "gpu_1x_a10" if provider == "lambda" else "A4000", 1, 0.75)
        client, _ = client_for(api)
        listed = client.list()
        assert [i["name"] for i in listed] == ["alpha", "beta"] and all(i["status"] == "running" for i in listed)
        assert client.get(a.id)["id"] == a.id
        client.terminate(a.id)
        assert [i["name"] for i in client.list()] == ["beta"]


@pytest.mark.parametrize("provider", ["runpod", "paperspace"])
def test_stop_and_start_where_the_provider_has_them(provider):
    with Standin(provider) as api:
        machine = api.add("alpha", "A4000", 1, 0.5)
        client, _ = client_for(api)
        client.stop(machine.id)
        assert client.get(machine.id)["status"] == "stopped"
        client.start(machine.id)
        assert client.get(machine.id)["status"] == "running"


def test_lambda_has_no_stop_and_says_what_to_do():
    with Standin("lambda") as api:
        machine = api.add("alpha", "gpu_1x_a10", 1, 0.75)
        client, _ = client_for(api)
        with pytest.raises(mod("mesh_cloud").CloudError) as caught:
            client.stop(machine.id)
        assert caught.value.kind == "unsupported" and "--terminate" in caught.value.hint
        assert api.requests == []  # nothing was sent: there is no such endpoint


def test_a_runpod_pod_comes_back_on_another_ssh_port_with_its_container_disk_wiped():
    with Standin("runpod") as api:
        pod = api.add("trainer", "NVIDIA RTX A5000", 1, 0.27)
        pod.disk["/var/lib/tailscale/tailscaled.state"] = "x"
        client, _ = client_for(api)
        before = client.get(pod.id)["ssh_port"]
        client.stop(pod.id)
        assert client.get(pod.id)["ssh_port"] is None and pod.disk == {}
        client.start(pod.id)
        assert client.get(pod.id)["ssh_port"] not in (None, before)


def test_a_429_is_waited_out_and_requests_are_paced():
    with Standin("lambda") as api:
        api.add("alpha", "gpu_1x_a10", 1, 0.75)
        api.throttle(times=2, retry_after="3")
        client, timer = client_for(api)
        assert len(client.list()) == 1
        assert [r[0] for r in api.requests] == ["GET"] * 3  # two 429s, then the answer
        assert timer.slept == [3.0, 3.0]  # Retry-After, each time (the pace is inside it)
        client.list()
        assert timer.slept[-1] == 1.0  # the next request waits out Lambda's one a second


def test_rate_limited_for_good_is_an_error_with_its_fix():
    with Standin("runpod") as api:
        api.throttle(times=10)
        client, _ = client_for(api)
        with pytest.raises(mod("mesh_cloud").CloudError) as caught:
            client.list()
        assert caught.value.kind == "rate-limit" and "wait a minute" in caught.value.hint
        assert len(api.requests) == 4  # retries=3


@pytest.mark.parametrize("provider", ["lambda", "runpod", "paperspace"])
def test_a_wrong_key_is_named_with_the_fix(provider):
    with Standin(provider) as api:
        client, _ = client_for(api, key="wrong-key-123456")
        with pytest.raises(mod("mesh_cloud").CloudError) as caught:
            client.list()
        assert caught.value.kind == "auth" and caught.value.status == 401
        assert f"meshctl provider add {provider} --key-file FILE" in caught.value.hint


@pytest.mark.parametrize(
    ("provider", "launch"),
    [
        (
            "lambda",
            lambda c: c.launch(
                {"type": "gpu_1x_a10", "name": "n1", "region": "us-east-1", "ssh_key_names": ["meshctl"]}
            ),
        ),
        ("runpod", lambda c: c.launch({"type": "NVIDIA RTX A5000", "name": "n1", "image": "runpod/pytorch:2.1.0"})),
        ("paperspace", lambda c: c.launch({"type": "A4000", "name": "n1", "region": "ny2", "template_id": "tkni3aa4"})),
    ],
)
def test_launch_and_no_capacity(provider, launch):
    with Standin(provider) as api:
        api.backend.capacity = 1
        client, _ = client_for(api)
        new_id = launch(client)
        assert client.get(new_id)["name"] == "n1"
        with pytest.raises(mod("mesh_cloud").CloudError) as caught:
            launch(client)
        assert caught.value.kind == "capacity" and "try another type" in caught.value.hint


def test_lambda_launches_are_twelve_seconds_apart(account_clock):
    with Standin("lambda") as api:
        api.launch_spacing, api.clock = 12.0, account_clock.clock
        client, _timer = client_for(api)
        client.launch({"type": "gpu_1x_a10", "name": "n1", "region": "us-east-1", "ssh_key_names": ["meshctl"]})
        client.launch({"type": "gpu_1x_a10", "name": "n2", "region": "us-east-1", "ssh_key_names": ["meshctl"]})
        assert account_clock.slept == [12.0]
        assert [a[2] for a in api.answers if a[1].endswith("/launch")] == [200, 200]


def test_the_twelve_seconds_hold_across_clients_and_concurrent_launches(account_clock):
    """Lambda's limit is the account's: a new client per candidate (cloud.launch_first) or a second
    rent at the same time (the head's relaunch service) waits out the last launch of any of them."""
    with Standin("lambda") as api:
        api.launch_spacing, api.clock = 12.0, account_clock.clock
        first, _ = client_for(api)
        first.launch({"type": "gpu_1x_a10", "name": "n1", "region": "us-east-1", "ssh_key_names": ["meshctl"]})
        second, _ = client_for(api)  # a new client, as for the next candidate
        second.launch({"type": "gpu_1x_a10", "name": "n2", "region": "us-east-1", "ssh_key_names": ["meshctl"]})
        mod("mesh_cloud_lambda").LaunchPacer._last.clear()  # another process: only the account's file knows
        third, _ = client_for(api)
        third.launch({"type": "gpu_1x_a10", "name": "n3", "region": "us-east-1", "ssh_key_names": ["meshctl"]})
        errors = []

        def rent(name):
            try:
                client_for(api)[0].launch({"type": "gpu_1x_a10", "name": name, "region": "us-east-1",
                                           "ssh_key_names": ["meshctl"]})  # fmt: skip
            except Exception as exc:
                errors.append(exc)

        threads = [threading.Thread(target=rent, args=(f"c{n}",)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert [a[2] for a in api.answers if a[1].endswith("/launch")] == [200] * 6  # never a 429
        assert account_clock.slept == [12.0] * 5


def test_a_lambda_launch_takes_one_key_and_the_nodes_name_as_its_hostname(account_clock):
    with Standin("lambda") as api:
        client, _ = client_for(api)
        with pytest.raises(mod("mesh_cloud").CloudError) as caught:
            client.launch({"type": "gpu_1x_a10", "name": "n1", "region": "us-east-1",
                           "ssh_key_names": ["meshctl", "laptop"]})  # fmt: skip
        assert caught.value.kind == "invalid" and "exactly one SSH key (2 given" in caught.value.message
        assert not [r for r in api.requests if r[1].endswith("/launch")]  # refused before the call
        new = client.launch({"type": "gpu_1x_a10", "name": "gpu2", "region": "us-east-1", "ssh_key_names": ["meshctl"]})
        assert api.backend.machines[new].hostname == "gpu2"
        client.launch({"type": "gpu_1x_a10", "name": "Not A Hostname", "region": "us-east-1",
                       "ssh_key_names": ["meshctl"]})  # fmt: skip
        (_m, _p, body) = [b for b in api.bodies if b[1].endswith("/launch")][-1]
        assert "hostname" not in body  # Lambda gives it an address-based one


def test_an_upstream_provider_error_is_passing_and_the_launch_is_sent_again(account_clock):
    """Lambda's document: a provider/ code comes from upstream ("provider/internal-unavailable",
    "Try again shortly"): the same candidate is asked again, unless the instance appeared meanwhile."""
    upstream = {"error": {"code": "provider/internal-unavailable", "message": "Provider unavailable",
                          "suggestion": "Try again shortly"}}  # fmt: skip
    assert mod("mesh_cloud_lambda").describe(503, upstream)[1] == "transient"
    with Standin("lambda") as api:
        client, _ = client_for(api)
        api.refuse_create.append(({}, 503, upstream))
        new = client.launch({"type": "gpu_1x_a10", "name": "n1", "region": "us-east-1", "ssh_key_names": ["meshctl"]})
        assert api.backend.machines[new].name == "n1"
        assert [a[2] for a in api.answers if a[1].endswith("/launch")] == [503, 200]
        assert account_clock.slept == [12.0]  # the second try is a launch too: paced
        api.refuse_create += [({}, 503, upstream)] * 3
        with pytest.raises(mod("mesh_cloud").CloudError) as caught:
            client.launch({"type": "gpu_1x_a10", "name": "n2", "region": "us-east-1", "ssh_key_names": ["meshctl"]})
        assert caught.value.kind == "transient" and "try again shortly" in caught.value.hint
        assert [a[2] for a in api.answers if a[1].endswith("/launch")][-3:] == [503, 503, 503]


def test_an_api_that_cannot_be_reached_is_said_with_its_variable():
    base = mod("mesh_cloud")
    timer = FakeTime()
    http = base.Http("paperspace", "http://127.0.0.1:9/v1", KEY, mod("mesh_cloud_paperspace").describe, retries=1,
                     clock=timer.clock, sleep=timer.sleep)  # fmt: skip
    with pytest.raises(base.CloudError) as caught:
        mod("mesh_cloud_paperspace").Client(KEY, http=http).list()
    assert caught.value.kind == "unreachable" and "MESHCTL_PAPERSPACE_API_URL" in caught.value.hint


# --- meshctl: accounts, machines, add-node PROVIDER:NAME --------------------------------------


@pytest.fixture
def runpod(monkeypatch):
    with Standin("runpod") as api:
        monkeypatch.setenv("MESHCTL_RUNPOD_API_URL", api.url)
        yield api


def key_file(tmp_path, key=KEY):
    path = tmp_path / "runpod.key"
    path.write_text(key + "\n")
    path.chmod(0o600)
    return str(path)


def pod_node(mesh, runpod, name):
    """A Runpod pod at the stand-in, and the mesh's node for it (the account stored)."""
    cloud.add_account(mesh, {}, "runpod", KEY)
    pod = runpod.add(name, "NVIDIA RTX A5000", 1, 0.27)
    nodes, mesh_vars = mesh.load()
    nodes.append(Node(name, pod.ip, port=pod.port, provider="runpod", state="active", pod=True,
                      instance=f"runpod:{pod.id}", mesh_address="100.64.0.2"))  # fmt: skip
    mesh.save(nodes, mesh_vars)
    return pod, nodes, mesh_vars


def test_provider_add_stores_a_key_the_provider_accepts(mesh, runpod, tmp_path):
    runpod.add("trainer", "NVIDIA RTX A5000", 1, 0.27)
    result = CliRunner().invoke(cli, ["provider", "add", "runpod", "--key-file", key_file(tmp_path),
                                      "--mesh", str(mesh.path)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "the key works (1 instances)" in result.output and KEY not in result.output
    stored = cloud.key_path(mesh, "runpod")
    assert stored.read_text().strip() == KEY and stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert stat.S_IMODE(stored.parent.stat().st_mode) == 0o700
    assert cloud.configured(mesh) == ["runpod"]


def test_a_key_the_provider_refuses_is_not_stored(mesh, runpod, tmp_path):
    result = CliRunner().invoke(cli, ["provider", "add", "runpod", "--key-file", key_file(tmp_path, "bad-key-12345"),
                                      "--mesh", str(mesh.path)])  # fmt: skip
    assert result.exit_code == ProviderError.exit_code, result.output
    assert "runpod refused GET /pods (401)" in result.output and "bad-key-12345" not in result.output
    assert not cloud.key_path(mesh, "runpod").exists()


def test_a_key_passed_where_its_file_belongs_is_refused(mesh, tmp_path):
    result = CliRunner().invoke(cli, ["provider", "add", "lambda", "--key-file", "secret_abc123_longkey",
                                      "--mesh", str(mesh.path)])  # fmt: skip
    assert result.exit_code == 2 and "not the key itself" in result.output


def test_machines_lists_instances_their_node_cost_and_the_forgotten(mesh, runpod, tmp_path):
    cloud.add_account(mesh, {}, "runpod", KEY)
    mine = runpod.add("trainer", "NVIDIA RTX A5000", 2, 0.54)
    runpod.add("forgotten", "NVIDIA RTX 4090", 1, 0.69)
    runpod.add("parked", "NVIDIA RTX 4090", 1, 0.69, state="stopped")
    nodes, mesh_vars = mesh.load()
    nodes.append(Node("trainer", mine.ip, port=mine.port, provider="runpod", state="active", pod=True,
                      instance=f"runpod:{mine.id}", mesh_address="100.64.0.2"))  # fmt: skip
    mesh.save(nodes, mesh_vars)
    result = CliRunner().invoke(cli, ["machines", "--json", "--mesh", str(mesh.path)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    by = {m["name"]: m for m in out["machines"]}
    assert by["trainer"]["node"] == "trainer" and by["forgotten"]["node"] is None
    assert by["parked"]["status"] == "stopped" and by["trainer"]["gpus"] == 2
    assert out["cost_per_hour"] == pytest.approx(0.54 + 0.69)  # running ones only
    assert out["not_in_mesh"] == [f"runpod:{by['forgotten']['id']}"]
    text = CliRunner().invoke(cli, ["machines", "--mesh", str(mesh.path)], env={"COLUMNS": "200"}).output
    assert "NOT IN MESH" in text and "running: $1.23/h" in text


def test_one_provider_failing_does_not_hide_the_others(mesh, runpod, monkeypatch):
    cloud.add_account(mesh, {}, "runpod", KEY)
    runpod.add("trainer", "NVIDIA RTX A5000", 1, 0.27)
    cloud.add_account(mesh, {}, "lambda", KEY, check=False)
    monkeypatch.setenv("MESHCTL_LAMBDA_API_URL", "http://127.0.0.1:9/api/v1")
    made = cloud.client

    def no_waiting(*args):
        c = made(*args)
        c.http.sleep = lambda seconds: None  # its retries, without the seconds between them
        return c

    monkeypatch.setattr(cloud, "client", no_waiting)
    rows, problems = cloud.machines(mesh, *mesh.load())
    assert [r.name for r in rows] == ["trainer"] and "cannot be reached" in problems["lambda"]
    shown = CliRunner().invoke(cli, ["machines", "--mesh", str(mesh.path)], terminal_width=200)
    assert shown.exit_code == 8 and "running: $0.27/h (and what lambda bill: not known, no answer)" in shown.output


@pytest.mark.parametrize("command", ["machines", "offers"])
def test_every_provider_down_is_exit_8_and_says_none_answered(mesh, monkeypatch, command):
    cloud.add_account(mesh, {}, "lambda", KEY, check=False)
    cloud.add_account(mesh, {}, "runpod", KEY, check=False)
    monkeypatch.setenv("MESHCTL_LAMBDA_API_URL", "http://127.0.0.1:9/api/v1")
    monkeypatch.setenv("MESHCTL_RUNPOD_API_URL", "http://127.0.0.1:9/v1")
    made = cloud.client

    def no_waiting(*args):
        c = made(*args)
        c.http.sleep = lambda seconds: None
        return c

    monkeypatch.setattr(cloud, "client", no_waiting)
    shown = CliRunner().invoke(cli, [command, "--mesh", str(mesh.path)], terminal_width=200)
    assert shown.exit_code == 8, shown.output
    assert "no provider answered: lambda:" in shown.output and "runpod:" in shown.output
    assert "listed above" not in shown.output and "meshctl provider list" in shown.output


def test_add_node_of_an_instance_takes_its_address_user_and_provider(mesh, runpod):
    cloud.add_account(mesh, {}, "runpod", KEY)
    pod = runpod.add("trainer", "NVIDIA RTX A5000", 1, 0.27)
    ssh, provider, ref, is_pod, _cloud = cloud.target_of(mesh, {}, "runpod:trainer")
    assert (ssh, provider, ref, is_pod) == (f"root@{pod.ip}:{pod.port}", "runpod", f"runpod:{pod.id}", True)
    assert cloud.target_of(mesh, {}, f"runpod:{pod.id}")[2] == ref  # by id too
    assert cloud.target_of(mesh, {}, "root@10.0.0.5:22") is None


@pytest.mark.usefixtures("fake_preflight", "fake_runner")
def test_add_node_of_a_community_cloud_pod_says_a_third_party_runs_its_host(mesh, runpod):
    """A pod on Runpod's Community Cloud runs on someone else's host; add-node says so."""
    cloud.add_account(mesh, {}, "runpod", KEY)
    pod = runpod.add("trainer", "NVIDIA RTX A5000", 1, 0.16)
    pod.cloud = "COMMUNITY"
    assert cloud.target_of(mesh, {}, "runpod:trainer")[4] == "COMMUNITY"
    out = CliRunner().invoke(cli, ["add-node", "runpod:trainer", "--mesh", str(mesh.path)], terminal_width=200)
    assert out.exit_code == 0, out.output
    assert ", Community Cloud) ..." in out.output and cloud.THIRD_PARTY_HOST in out.output
    secure = runpod.add("other", "NVIDIA RTX A5000", 1, 0.27)  # Secure Cloud: Runpod's own data centres
    assert secure.cloud == "SECURE"
    again = CliRunner().invoke(cli, ["add-node", "runpod:other", "--name", "t2", "--mesh", str(mesh.path)],
                               terminal_width=200)  # fmt: skip
    assert again.exit_code == 0, again.output
    assert ", Secure Cloud) ..." in again.output and cloud.THIRD_PARTY_HOST not in again.output


@pytest.mark.parametrize(
    ("setup", "wanted", "message"),
    [
        (lambda api: None, "nope", "runpod has no instance named 'nope' (it has: none)"),
        (lambda api: api.add("t", "A", 1, 0.1, state="stopped"), "t", "runpod instance t is stopped (EXITED)"),
        (lambda api: [api.add("t", "A", 1, 0.1), api.add("t", "A", 1, 0.1)], "t", "2 instances named 't'"),
    ],
    ids=["missing", "stopped", "ambiguous"],
)
def test_add_node_of_an_instance_that_cannot_be_added_says_why(mesh, runpod, setup, wanted, message):
    cloud.add_account(mesh, {}, "runpod", KEY)
    setup(runpod)
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cloud.target_of(mesh, {}, f"runpod:{wanted}")


def test_add_node_of_a_provider_without_an_account_names_the_command(mesh):
    with pytest.raises(UsageError) as caught:
        cloud.target_of(mesh, {}, "lambda:gpu-a")
    assert "meshctl provider add lambda --key-file FILE" in caught.value.hint


def test_a_nodes_instance_is_kept_in_mesh_yml_and_checked(mesh):
    nodes, mesh_vars = mesh.load()
    nodes.append(Node("gpu1", "203.0.113.7", provider="paperspace", instance="paperspace:psok2vd8"))
    mesh.save(nodes, mesh_vars)
    assert mesh.load()[0][1].instance == "paperspace:psok2vd8"
    assert "meshctl_instance: paperspace:psok2vd8" in mesh.inventory.read_text()
    bad = Node("gpu2", "203.0.113.8", instance="paperspace:$(reboot)")
    with pytest.raises(Exception, match="is not PROVIDER:ID"):
        bad.validate()


def test_provider_keys_stay_out_of_process_arguments_and_output(mesh, runpod, tmp_path):
    result = CliRunner().invoke(cli, ["provider", "list", "--mesh", str(mesh.path)])
    assert "no provider accounts" in result.output
    nothing = CliRunner().invoke(cli, ["machines", "--mesh", str(mesh.path)])  # no empty table, no $0.00/h
    assert nothing.exit_code == 0 and "no provider accounts" in nothing.output and "$" not in nothing.output
    CliRunner().invoke(cli, ["provider", "add", "runpod", "--key-file", key_file(tmp_path), "--mesh", str(mesh.path)])
    listed = CliRunner().invoke(cli, ["provider", "list", "--mesh", str(mesh.path)]).output
    assert "runpod" in listed and KEY not in listed
    removed = CliRunner().invoke(cli, ["provider", "remove", "runpod", "--mesh", str(mesh.path)])
    assert removed.exit_code == 0 and not cloud.key_path(mesh, "runpod").exists()
    assert os.environ.get("MESHCTL_RUNPOD_API_URL") == runpod.url


# --- launch and terminate ---------------------------------------------------------------------


def test_launch_waits_until_the_instance_runs_with_an_ssh_address(mesh, runpod):
    cloud.add_account(mesh, {}, "runpod", KEY)
    timer = FakeTime()
    inst = cloud.launch(mesh, {}, "runpod", "NVIDIA RTX A5000", "n1", {"public_key": "ssh-ed25519 AAAA x"},
                        clock=timer.clock, sleep=timer.sleep)  # fmt: skip
    assert inst["status"] == "running" and inst["name"] == "n1" and inst["ssh_port"]
    assert ("POST", "/v2/pods") in runpod.requests


def test_launch_with_no_capacity_says_so(mesh, runpod):
    cloud.add_account(mesh, {}, "runpod", KEY)
    runpod.backend.capacity = 0
    with pytest.raises(ProviderError) as caught:
        cloud.launch(mesh, {}, "runpod", "NVIDIA H100", "n1", {})
    assert "no longer any instances available" in caught.value.message and "try another type" in caught.value.hint


def test_a_lambda_launch_needs_its_region_and_key_name(mesh, monkeypatch):
    with Standin("lambda") as api:
        monkeypatch.setenv("MESHCTL_LAMBDA_API_URL", api.url)
        cloud.add_account(mesh, {}, "lambda", KEY, check=False)
        with pytest.raises(UsageError, match="needs a region and a key registered at Lambda"):
            cloud.launch(mesh, {}, "lambda", "gpu_1x_a10", "n1", {"region": "us-east-1"})
        assert api.requests == []


def test_waiting_for_ssh_gives_up_with_what_to_do():
    timer = FakeTime()

    def refused(address, timeout):
        raise ConnectionRefusedError

    with pytest.raises(ProviderError, match="did not answer on SSH within 60 s") as caught:
        cloud.wait_for_ssh("203.0.113.9", 22, 60, connect=refused, clock=timer.clock, sleep=timer.sleep)
    assert "add-node PROVIDER:NAME" in caught.value.hint and sum(timer.slept) >= 60


def test_remove_node_terminate_refuses_a_node_without_an_instance_before_changing_anything(mesh):
    from meshctl.ops import remove

    nodes, mesh_vars = mesh.load()
    nodes.append(Node("cpu1", "10.0.0.5", state="active", mesh_address="10.0.0.5"))
    mesh.save(nodes, mesh_vars)
    before = mesh.inventory.read_text()
    with pytest.raises(UsageError, match="--terminate: cpu1 is no provider's instance"):
        remove.remove_node(reading(mesh), "cpu1", False, 0, None, terminate=True)
    assert mesh.inventory.read_text() == before


def test_remove_node_terminate_deletes_the_instance_after_the_removal(mesh, runpod, monkeypatch):
    from meshctl import runner
    from meshctl.ops import remove

    pod, _nodes, _mesh_vars = pod_node(mesh, runpod, "gpu1")
    ran = []

    def fake_run(playbook, inventory, mesh_dir=None, **kw):
        ran.append(playbook)
        return runner.RunResult("successful", 0, stats={"head": {"ok": 1}, "gpu1": {"ok": 1}})

    monkeypatch.setattr(runner, "run_playbook", fake_run)
    said = []
    remove.remove_node(reading(mesh), "gpu1", False, 0, None, say=said.append, terminate=True)
    assert ran == ["remove_node.yml"] and pod.state == "terminated"
    assert [n.name for n in mesh.load()[0]] == ["head"]
    assert said[-1] == f"gpu1: instance runpod:{pod.id} deleted at its provider"


def test_a_launch_is_never_sent_twice_after_a_server_error():
    with Standin("paperspace") as api:
        api.refuse_create.append(({}, 502, {"code": "BAD_GATEWAY", "message": "upstream"}))
        client, _timer = client_for(api)
        with pytest.raises(mod("mesh_cloud").CloudError, match=r"refused POST /machines \(502\)"):
            client.launch({"type": "A4000", "name": "n1", "region": "ny2", "template_id": "t1"})
        assert [r for r in api.requests if r[0] == "POST"] == [("POST", "/v1/machines")]  # sent once
        assert api.backend.machines == {}
        api.fail_next = [(502, {"code": "BAD_GATEWAY", "message": "upstream"}, {})]
        assert client.list() == [] and len(api.requests) == 4  # a read is asked again (after availability, the create)


def test_paperspace_prices_come_from_group_vars(mesh, monkeypatch):
    with Standin("paperspace") as api:
        monkeypatch.setenv("MESHCTL_PAPERSPACE_API_URL", api.url)
        api.add("desk-a6000", "A6000", 1, 0)
        cloud.add_account(mesh, {}, "paperspace", KEY)
        (mesh.path / "group_vars").mkdir(exist_ok=True)
        (mesh.path / "group_vars" / "all.yml").write_text("paperspace_prices: {A6000: 1.89}\n")
        rows, problems = cloud.machines(mesh, *mesh.load())
        assert problems == {} and [(r.name, r.price_per_hour) for r in rows] == [("desk-a6000", 1.89)]


class Notes:
    def __init__(self):
        self.lines = []

    def note(self, line):
        self.lines.append(line)


def test_a_pod_started_again_on_another_port_is_recorded_there_with_its_host_keys(mesh, runpod, tmp_path):
    """apply's first step: the provider says where the instance runs now; the node is recorded
    there and the host keys known for its old address are carried over (the machine must still
    show one of them: SSH checks it)."""
    from meshctl import hostkeys
    from meshctl.ops import apply

    pod, nodes, mesh_vars = pod_node(mesh, runpod, "trainer")
    key = tmp_path / "hostkey"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    public = key.with_suffix(".pub").read_text().split()
    mesh.known_hosts.write_text(f"{pod.ip} {public[0]} {public[1]}\n")
    notes = Notes()
    assert apply.follow_moves(Work(mesh, nodes, mesh_vars), notes) == []  # where it was recorded: nothing to do
    runpod.backend.stop(pod)
    runpod.backend.start(pod, new_port=True)  # Runpod: another SSH port after a start
    nodes, mesh_vars = mesh.load()
    assert apply.follow_moves(Work(mesh, nodes, mesh_vars), notes, check=True) == []  # a dry run records nothing
    assert apply.follow_moves(Work(mesh, nodes, mesh_vars), notes) == ["trainer"]
    again = {n.name: n for n in mesh.load()[0]}["trainer"]
    assert (again.host, again.port) == (pod.ip, pod.port) and pod.port != 22
    assert (
        [f.sha256 for f in hostkeys.recorded(mesh.known_hosts, pod.ip, pod.port)]
        == [f.sha256 for f in hostkeys.recorded(mesh.known_hosts, pod.ip, 22)]
        != []
    )
    assert f"trainer: runpod runs it at {pod.ip}:{pod.port} now (recorded {pod.ip}:22)" in notes.lines[-1]
    runpod.backend.stop(pod)  # stopped: no address to follow, the record stays
    assert apply.follow_moves(Work(mesh, mesh.load()[0], mesh_vars), notes) == []


def test_a_pod_the_head_put_on_a_new_pod_of_its_volume_is_followed_by_name_with_its_host_keys(
        mesh, runpod, tmp_path):  # fmt: skip
    """The head's power program replaced a pod whose host had no GPU left (a new pod of its network
    volume, named as the node): apply records the node there, carrying the host keys known for it
    (the pod keeps them on its volume; SSH refuses a machine without one). With no host key known,
    a pod bearing the node's name is not taken."""
    from meshctl import hostkeys
    from meshctl.ops import apply

    pod, nodes, mesh_vars = pod_node(mesh, runpod, "trainer")
    runpod.backend.terminate(pod)
    new = runpod.add("trainer", "NVIDIA RTX A5000", 1, 0.27)
    new.ip, new.port = "100.100.60.77", 40022
    notes = Notes()
    assert apply.follow_moves(Work(mesh, nodes, mesh_vars), notes) == []  # nothing known of the node's keys
    assert f"runpod runs runpod:{new.id} at 100.100.60.77:40022, named trainer, and no host key" in notes.lines[-1]
    key = tmp_path / "hostkey"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    public = key.with_suffix(".pub").read_text().split()
    mesh.known_hosts.write_text(f"{pod.ip} {public[0]} {public[1]}\n")
    assert apply.follow_moves(Work(mesh, nodes, mesh_vars), notes) == ["trainer"]
    again = {n.name: n for n in mesh.load()[0]}["trainer"]
    assert (again.instance, again.host, again.port) == (f"runpod:{new.id}", "100.100.60.77", 40022)
    assert [f.sha256 for f in hostkeys.recorded(mesh.known_hosts, "100.100.60.77", 40022)] == [
        f.sha256 for f in hostkeys.recorded(mesh.known_hosts, pod.ip, 22)]  # fmt: skip
    assert f"trainer: runpod runs it as runpod:{new.id} at 100.100.60.77:40022 now, a new instance" in notes.lines[-1]


def test_a_provider_key_file_others_can_read_is_refused_with_the_fix(tmp_path, mesh):
    """It was taken without a word (a Tailscale key file is refused)."""
    path = tmp_path / "runpod.key"
    path.write_text(KEY + "\n")
    path.chmod(0o644)
    result = CliRunner().invoke(cli, ["provider", "add", "runpod", "--key-file", str(path), "--no-check",
                                      "--mesh", str(mesh.path)])  # fmt: skip
    assert result.exit_code == 2 and "can be read by others (mode 0644)" in result.output
    assert f"chmod 600 {path}" in result.output and not cloud.key_path(mesh, "runpod").exists()


# --- network volumes: storage that bills by the month, used or not --------------------------------


def with_volume(runpod, pod, volume_id, size=20, tier="STANDARD"):
    """POD mounts a network volume VOLUME_ID of the account (the stand-in's, as the console makes one)."""
    runpod.add_volume(volume_id, "EU-RO-1", size, tier)
    pod.mounts = {"network": [{"volumeId": volume_id, "path": "/workspace"}]}


def test_runpod_network_volumes_as_documented(runpod):
    client, _timer = client_for(runpod)
    runpod.add_volume("vol-small", "EU-RO-1", 20)
    runpod.add_volume("vol-large", "US-KS-2", 2048)
    runpod.add_volume("vol-fast", "US-KS-2", 100, "HIGH_PERFORMANCE")
    status, answer = runpod.route("GET", "/v2/network-volumes", None)
    assert status == 200 and api_schemas.response_problems("runpod", "GET", "/v2/network-volumes", 200, answer) == []
    found = {v["id"]: v for v in client.volumes()}
    assert set(found["vol-small"]) == set(mod("mesh_cloud").VOLUME_KEYS)
    # The document's prices: $0.07/GB/month for the first TB, $0.05 beyond; no figure for HPS.
    assert found["vol-small"]["price_per_month"] == 1.40 and found["vol-small"]["region"] == "EU-RO-1"
    assert found["vol-large"]["price_per_month"] == round(1024 * 0.07 + 1024 * 0.05, 2)
    assert found["vol-fast"]["price_per_month"] is None and found["vol-fast"]["tier"] == "HIGH_PERFORMANCE"
    client.delete_volume("vol-small")
    assert "vol-small" not in runpod.network_volumes
    assert ("DELETE", "/v2/network-volumes/vol-small") in runpod.requests
    with pytest.raises(mod("mesh_cloud").CloudError) as gone:
        client.delete_volume("vol-small")
    assert gone.value.kind == "not-found"


def test_a_pod_says_the_network_volume_it_mounts(runpod):
    client, _timer = client_for(runpod)
    pod = runpod.add("trainer", "NVIDIA RTX A5000", 1, 0.27)
    bare = runpod.add("bare", "NVIDIA RTX A5000", 1, 0.27)
    with_volume(runpod, pod, "vol-e2e")
    assert client.get(pod.id)["volume"] == "vol-e2e" and client.get(bare.id)["volume"] == ""
    pod.mounts = {"network": [{"volumeId": "../../etc", "path": "/workspace"}]}  # no id: none said
    assert client.get(pod.id)["volume"] == ""


def test_machines_lists_the_network_volumes_and_says_the_one_nothing_uses(mesh, runpod):
    pod, _nodes, _mesh_vars = pod_node(mesh, runpod, "gpu1")
    with_volume(runpod, pod, "vol-used")
    runpod.add_volume("vol-left", "EU-RO-1", 50)
    result = CliRunner().invoke(cli, ["machines", "--json", "--mesh", str(mesh.path)])
    assert result.exit_code == 0, result.output
    volumes = {v["id"]: v for v in json.loads(result.output)["volumes"]}
    assert volumes["vol-used"]["used_by"] == ["gpu1"] and volumes["vol-left"]["used_by"] == []
    text = CliRunner().invoke(cli, ["machines", "--mesh", str(mesh.path)], env={"COLUMNS": "200"}).output
    assert "network volumes: $4.90/month, whether or not anything uses them" in text
    assert "runpod network volume vol-left (volume-vol-left, 50 GB, EU-RO-1, $3.50/month) is used by no " \
           "instance: it bills until it is deleted" in text  # fmt: skip
    assert "vol-used (volume-vol-used, 20 GB, EU-RO-1, $1.40/month) is used by no" not in text
    # status and usage read them in the same lookup as the prices
    lookup = cloud.PriceLookup(mesh, *mesh.load())
    lookup.result()
    assert {v.id: v.used_by for v in lookup.volumes} == {"vol-used": ["gpu1"], "vol-left": []}
    pod.state = "terminated"  # the pod gone, its volume stays and bills
    rows, _problems = cloud.machines(mesh, *mesh.load())
    assert {v.id: v.used_by for v in cloud.volumes(mesh, {}, rows)[0]} == {"vol-used": [], "vol-left": []}


def fake_removal(monkeypatch):
    from meshctl import runner

    ran = []

    def fake_run(playbook, inventory, mesh_dir=None, **kw):
        ran.append(playbook)
        return runner.RunResult("successful", 0, stats={"head": {"ok": 1}, "gpu1": {"ok": 1}})

    monkeypatch.setattr(runner, "run_playbook", fake_run)
    return ran


def test_remove_node_terminate_asks_what_becomes_of_a_network_volume_before_changing_anything(
    mesh, runpod, monkeypatch
):
    ran = fake_removal(monkeypatch)
    pod, _nodes, _mesh_vars = pod_node(mesh, runpod, "gpu1")
    with_volume(runpod, pod, "vol-data")
    before = mesh.inventory.read_text()
    args = ["remove-node", "gpu1", "--terminate", "-y", "--mesh", str(mesh.path)]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == UsageError.exit_code, result.output
    assert "mounts runpod network volume vol-data (volume-vol-data, 20 GB, EU-RO-1, $1.40/month)" in result.output
    assert "--delete-volume" in result.output and "--keep-volume" in result.output
    assert ran == [] and mesh.inventory.read_text() == before and pod.state == "running"
    assert "vol-data" in runpod.network_volumes
    wrong = CliRunner().invoke(cli, ["remove-node", "gpu1", "--keep-volume", "-y", "--mesh", str(mesh.path)])
    assert wrong.exit_code == UsageError.exit_code and "--keep-volume goes with --terminate" in wrong.output
    assert ran == [] and mesh.inventory.read_text() == before


def test_remove_node_terminate_delete_volume_deletes_both(mesh, runpod, monkeypatch):
    ran = fake_removal(monkeypatch)
    pod, _nodes, _mesh_vars = pod_node(mesh, runpod, "gpu1")
    with_volume(runpod, pod, "vol-data")
    args = ["remove-node", "gpu1", "--terminate", "--delete-volume", "-y", "--mesh", str(mesh.path)]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert ran == ["remove_node.yml"] and pod.state == "terminated" and runpod.network_volumes == {}
    assert "gpu1: runpod network volume vol-data (volume-vol-data, 20 GB, EU-RO-1, $1.40/month) deleted" in \
        result.output  # fmt: skip


def test_remove_node_terminate_keep_volume_keeps_it_and_says_it_bills(mesh, runpod, monkeypatch):
    fake_removal(monkeypatch)
    pod, _nodes, _mesh_vars = pod_node(mesh, runpod, "gpu1")
    with_volume(runpod, pod, "vol-data")
    args = ["remove-node", "gpu1", "--terminate", "--keep-volume", "-y", "--mesh", str(mesh.path)]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert pod.state == "terminated" and "vol-data" in runpod.network_volumes
    assert "kept, as --keep-volume said: it bills until it is deleted" in result.output


def test_remove_node_terminate_delete_volume_keeps_one_another_pod_mounts(mesh, runpod, monkeypatch):
    fake_removal(monkeypatch)
    pod, _nodes, _mesh_vars = pod_node(mesh, runpod, "gpu1")
    with_volume(runpod, pod, "vol-shared")
    other = runpod.add("notebook", "NVIDIA RTX A5000", 1, 0.27, state="stopped")
    other.mounts = {"network": [{"volumeId": "vol-shared", "path": "/workspace"}]}
    args = ["remove-node", "gpu1", "--terminate", "--delete-volume", "-y", "--mesh", str(mesh.path)]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert pod.state == "terminated" and "vol-shared" in runpod.network_volumes
    assert "kept, mounted by notebook too" in result.output


def test_a_leaving_nodes_machine_its_provider_says_is_stopped_or_gone_is_not_reached(mesh, runpod, monkeypatch):
    """remove-node asks the provider first: a machine stopped, terminated or gone (and none running
    under the node's name) is not tried over SSH (the run gets meshctl_leaving_gone), and the words
    say what its provider said."""
    pod, _nodes, _mesh_vars = pod_node(mesh, runpod, "gpu1")
    node = next(n for n in mesh.load()[0] if n.name == "gpu1")
    assert cloud.machine_gone(mesh, {}, node) == ""  # it runs
    pod.state = "stopped"
    assert cloud.machine_gone(mesh, {}, node) == "stopped at runpod"
    again = runpod.add("gpu1", "NVIDIA RTX A5000", 1, 0.27)  # a machine named as the node runs: reach it
    assert cloud.machine_gone(mesh, {}, node) == ""
    again.state = "terminated"
    pod.state = "terminated"
    assert cloud.machine_gone(mesh, {}, node) == "gone from runpod"  # the stand-in lists it no more
    runpod.fail_next = [(401, runpod._error(401, "invalid api key"), {})]  # cannot be asked: reach it as before
    assert cloud.machine_gone(mesh, {}, node) == ""
    runpod.fail_next = []
    seen = []

    def fake_run(playbook, inventory, mesh_dir=None, **kw):
        seen.append(kw.get("extravars") or {})
        from meshctl import runner

        return runner.RunResult("successful", 0, stats={"head": {"ok": 1}})

    from meshctl import runner
    from meshctl.ops import remove

    monkeypatch.setattr(runner, "run_playbook", fake_run)
    said = []
    remove.remove_node(reading(mesh), "gpu1", False, 0, None, say=said.append)
    assert seen[0]["meshctl_leaving_gone"] is True
    assert said[0].startswith("gpu1: its machine is gone from runpod: its slurmd, Tailscale login, munge key")
    assert [n.name for n in mesh.load()[0]] == ["head"]
