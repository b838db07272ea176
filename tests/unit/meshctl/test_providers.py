"""The provider interface (plugins/module_utils/mesh_cloud.py): capabilities, one module per
provider, today's APIs, and the clients and stand-ins both checked against the schema files written
from the providers' documents (tests/schemas/, tests/api_schemas.py)."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshctl import cloud, resources
from meshctl.cli import cli
from meshctl.errors import ProviderError, UsageError
from meshctl.ops import launch
from meshctl.ops.work import reading
from tests import api_schemas
from tests.cloud_standin import KEY, Server, Standin
from tests.conftest import FIXTURES
from tests.unit.meshctl.test_cloud import FakeTime, client_for

ROOT = Path(__file__).resolve().parents[3]
PROVIDERS = ("lambda", "runpod", "paperspace")


def mod(name):
    return resources.plugin(f"module_utils.{name}")


# --- one interface ------------------------------------------------------------------------------


def test_every_provider_is_one_module_with_its_capabilities_and_the_whole_protocol():
    base = mod("mesh_cloud")
    assert base.PROVIDERS == PROVIDERS == cloud.PROVIDERS
    for name in base.PROVIDERS:
        module = base.client_module(name)
        can = module.CAPABILITIES
        assert set(can.as_dict()) == set(base.Capabilities.FIELDS) and can.name == name
        assert (
            can.default_url.startswith("https://") and can.checked >= "2026-11-25" and can.price in ("api", "setting")
        )
        assert module.Client.capabilities is can
        wanted = (
            base.PROTOCOL
            + (base.RELAUNCH_PROTOCOL if can.relaunch else ())
            + (base.VOLUME_PROTOCOL if can.keeps_volume and not can.keeps_disk else ())
            + (base.NETWORK_VOLUME_PROTOCOL if can.network_volumes else ())
        )
        assert all(callable(getattr(module.Client, method, None)) for method in wanted), name
        assert (ROOT / "tests" / "schemas" / f"{name}.json").is_file()  # its stand-in's schema file
        assert f"## {can.title}" in (ROOT / "docs" / "providers.md").read_text()


def test_each_provider_fact_is_said_once():
    """What a provider is (its name compared, its stop, its SSH user, its API's address) is in its
    module only: the rest of meshctl, the filters and the head's programs ask the capabilities."""
    said = re.compile(
        r"""(==|!=|in)\s*\(?\s*["'](lambda|runpod|paperspace)["']|["'](lambda|runpod|paperspace)["']\s*(==|:)|"""
        r"""api\.(lambda|runpod|paperspace)|rest\.runpod|cloud\.lambda\.ai/api|CAN_STOP|hasattr\(api"""
    )
    places = [*ROOT.glob("meshctl/**/*.py"), *ROOT.glob("plugins/filter/*.py"), *ROOT.glob("roles/*/files/*"),
              *ROOT.glob("roles/*/templates/*"), *ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("roles/*/vars/*.yml"),
              ROOT / "plugins/module_utils/mesh_cloud.py"]  # fmt: skip
    found = []
    for path in (place for place in places if place.is_file()):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if said.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def test_what_cannot_stop_is_launched_again_and_what_keeps_a_volume_comes_back_as_a_pod():
    base = mod("mesh_cloud")
    assert base.with_capability("relaunch") == ("lambda",) == cloud.RELAUNCHED
    assert base.with_capability("pod") == ("runpod",)
    assert [p for p in PROVIDERS if base.capabilities(p).can_stop] == ["runpod", "paperspace"]
    assert base.capabilities("paperspace").keeps_disk and not base.capabilities("runpod").keeps_disk
    assert base.capabilities("lambda").registers_keys and base.capabilities("lambda").ssh_user == "ubuntu"


# --- clients and stand-ins against the documents -------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "fixture", "route", "status"),
    [("lambda", "lambda-instances.json", "GET /instances", 200),
     ("lambda", "lambda-ssh-keys.json", "GET /ssh-keys", 200),
     ("lambda", "lambda-error-capacity.json", "POST /instance-operations/launch", 400),
     ("runpod", "runpod-pods.json", "GET /pods", 200),
     ("paperspace", "paperspace-machines.json", "GET /machines", 200)],
)  # fmt: skip
def test_the_documented_answers_match_the_schema_files(provider, fixture, route, status):
    method, path = route.split(" ")
    body = json.loads((FIXTURES / "cloud" / fixture).read_text())
    assert api_schemas.response_problems(provider, method, path, status, body) == []


def exercise(api, client):
    """Every endpoint meshctl uses of API's provider, through the client."""
    can = client.capabilities
    kind = {"lambda": "gpu_1x_a10", "runpod": "NVIDIA RTX A5000", "paperspace": "A4000"}[can.name]
    first = api.add("alpha", kind, 1, 0.5)
    api.add("beta", kind, 1, 0.5)
    api.add("gamma", kind, 1, 0.5)
    request = {"type": kind, "name": "n1", "region": "us-east-1", "ssh_key_names": ["meshctl"], "template_id": "t1",
               "public_key": "ssh-ed25519 AAAA x", "gpus": 1}  # fmt: skip
    new_id = client.launch(request)
    assert {i["id"] for i in client.list()} >= {first.id, new_id}
    assert client.get(new_id)["name"] == "n1"
    client.offers()
    if can.can_stop:
        if not can.keeps_disk:
            assert client.prepare_start(first.id, ["bash", "/workspace/.meshctl/rejoin"]) is False  # it runs
        client.stop(first.id)
        if not can.keeps_disk:
            assert client.prepare_start(first.id, ["bash", "/workspace/.meshctl/rejoin"]) is True
            assert client.prepare_start(first.id, ["bash", "/workspace/.meshctl/rejoin"]) is False
            assert api.patched_running == []
        client.start(first.id)
    if can.registers_keys:
        client.register_key("meshctl-head-1", "ssh-ed25519 AAAA head")
    if can.relaunch:
        client.spec(first.id)
    if can.network_volumes:
        api.add_volume("vol-exercised", "EU-RO-1")
        assert [v["id"] for v in client.volumes()] == ["vol-exercised"]
        client.delete_volume("vol-exercised")
    client.terminate(new_id)
    with pytest.raises(mod("mesh_cloud").CloudError):
        client.get("nosuchinstance")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_clients_requests_and_the_stand_ins_answers_match_the_schema_files(provider):
    with Standin(provider) as api:
        client, _ = client_for(api)
        exercise(api, client)
        api.throttle(times=1)
        client.list()
        for method, path, body in api.bodies:
            assert api_schemas.request_problems(provider, method, path, body) == [], (method, path, body)
        for method, path, status, body in api.answers:
            if path.split("?")[0].endswith("nosuchinstance") or status == 429:
                assert api_schemas.problems(provider, api_schemas.load(provider)["error"], body) == []
                continue
            assert api_schemas.response_problems(provider, method, path, status, body) == [], (method, path, body)
        used = {api_schemas.endpoint(provider, m, p)[0] for m, p, _b in api.bodies}
        assert used == set(api_schemas.load(provider)["endpoints"])  # every endpoint meshctl uses, exercised


def test_runpod_v2_refuses_v1s_start_command_and_takes_args():
    with Standin("runpod") as api:
        pod = api.add("trainer", "NVIDIA RTX A5000", 1, 0.27)
        client, _ = client_for(api)
        with pytest.raises(mod("mesh_cloud").CloudError) as caught:
            client.http.request("PATCH", f"/pods/{pod.id}", {"dockerStartCmd": ["bash", "x"]})
        assert (
            caught.value.status == 422 and caught.value.kind == "invalid" and "dockerStartCmd" in caught.value.message
        )
        assert ("POST", f"/v2/pods/{pod.id}/action", {"action": "stop"}) not in api.bodies
        client.stop(pod.id)
        assert api.bodies[-1] == ("POST", f"/v2/pods/{pod.id}/action", {"action": "stop"})
        client.prepare_start(pod.id, ["bash", "/workspace/.meshctl/rejoin"])
        assert pod.args == "bash /workspace/.meshctl/rejoin" and client.start_command(pod.id) == pod.start_cmd
        with pytest.raises(mod("mesh_cloud").CloudError) as caught:
            client.stop(pod.id)  # an EXITED pod cannot stop: 409
        assert caught.value.kind == "conflict" and "cannot stop a pod that is EXITED" in caught.value.message


def test_a_runpod_launch_asks_for_ssh_a_volume_and_its_cloud():
    with Standin("runpod") as api:
        client, _ = client_for(api)
        new_id = client.launch({"type": "NVIDIA RTX A5000", "name": "n1", "gpus": 2, "cloud": "community",
                                "public_key": "ssh-ed25519 AAAA x"})  # fmt: skip
        body = api.bodies[-1][2]
        assert body["gpu"] == {"id": "NVIDIA RTX A5000", "count": 2} and body["cloud"] == "COMMUNITY"
        assert (
            body["startSsh"] is True
            and "22/tcp" in body["ports"]
            and body["env"] == {"PUBLIC_KEY": "ssh-ed25519 AAAA x"}
        )
        assert body["mounts"] == {"persistent": {"size": 20, "path": "/workspace"}}
        assert client.get(new_id)["cloud"] == "COMMUNITY" and client.get(new_id)["price_per_hour"] == pytest.approx(
            0.32
        )
        with pytest.raises(mod("mesh_cloud").CloudError, match="no cloud 'cheap'"):
            client.launch({"type": "NVIDIA RTX A5000", "name": "n2", "cloud": "cheap"})


def test_paperspace_pages_are_walked_and_start_and_stop_send_an_empty_json_body():
    with Standin("paperspace") as api:
        for n in range(5):
            api.add(f"m{n}", "A4000", 1, 0.76)
        client, _ = client_for(api)
        assert [m["name"] for m in client.list()] == [f"m{n}" for n in range(5)]
        ids = list(api.backend.machines)
        assert [p for m, p in api.requests if m == "GET"] == [
            "/v1/machines?limit=120", f"/v1/machines?limit=120&after={ids[1]}",
            f"/v1/machines?limit=120&after={ids[3]}"]  # fmt: skip
        machine = next(iter(api.backend.machines))
        client.stop(machine)
        assert api.bodies[-1] == ("PATCH", f"/v1/machines/{machine}/stop", {})


def test_paperspace_gpus_come_from_the_accelerators_and_limit_alone_is_no_quota():
    ps = mod("mesh_cloud_paperspace")
    machine = json.loads((FIXTURES / "cloud" / "paperspace-machines.json").read_text())["items"][0]
    machine = {
        **machine,
        "machineType": "A100-80Gx8",
        "accelerators": [{"name": "A100 80GB", "count": 4, "memory": 80}],
    }
    row = ps.normalize(machine)
    assert row["gpus"] == 4 and row["gpu_type"] == "A100 80GB"
    assert ps.normalize({**machine, "accelerators": None})["gpus"] == 8  # none reported: the type's name
    assert ps.describe(400, {"code": "BAD_REQUEST", "message": "name exceeds the length limit"})[1] == "error"
    assert ps.describe(400, {"code": "BAD_REQUEST", "message": "Machine limit reached for this team"})[1] == "quota"


def test_lambda_says_an_inactive_account_and_a_booting_instance_is_to_be_waited_for(mesh, monkeypatch):
    lam = mod("mesh_cloud_lambda")
    payload = {"error": {"code": "global/account-inactive", "message": "Your account is inactive."}}
    assert lam.describe(403, payload) == ("Your account is inactive.", "auth")
    with Standin("lambda") as api:
        monkeypatch.setenv("MESHCTL_LAMBDA_API_URL", api.url)
        cloud.add_account(mesh, {}, "lambda", KEY, check=False)
        api.add("gpu9", "gpu_1x_a10", 1, 0.75, state="booting")
        with pytest.raises(UsageError) as caught:
            cloud.find_instance(mesh, {}, "lambda", "gpu9")
        assert "wait until it runs" in caught.value.hint


def test_a_rate_limit_header_with_nothing_left_holds_the_next_request():
    base = mod("mesh_cloud")
    assert base.rate_limit_wait('"minute";r=0;t=12, "hour";r=2800;t=1812') == 12
    assert base.rate_limit_wait('"minute";r=3;t=12') == 0 and base.rate_limit_wait(None) == 0
    with Standin("runpod") as api:
        api.rate_limit = '"minute";r=0;t=7, "hour";r=2800;t=1812'
        client, timer = client_for(api)
        client.list()
        client.list()
        assert 7.0 in timer.slept


def test_a_long_rate_limit_window_or_retry_after_is_said_with_when_to_try_again_not_ignored():
    """Before: a RateLimit window over an hour and a Retry-After over 300 s were read as nothing (a
    day's window used up: no wait; Retry-After 1812 s: a 1 s retry). Now either is honoured within
    one call's deadline, else the call fails at once saying when to try again."""
    base = mod("mesh_cloud")
    assert base.rate_limit_wait('"minute";r=3;t=12, "day";r=0;t=50000') == 50000  # a day window, used up
    with Standin("runpod") as api:
        api.rate_limit = '"minute";r=3;t=12, "day";r=0;t=50000'
        client, timer = client_for(api)
        client.list()
        with pytest.raises(base.CloudError) as caught:
            client.list()
        assert caught.value.kind == "rate-limit" and "the next is allowed in 13.9 h" in caught.value.message
        assert caught.value.hint.startswith("try again in 13.9 h") and 50000.0 not in timer.slept
        assert len(api.requests) == 1  # the second was not sent
    with Standin("runpod") as api:
        api.throttle(times=1, retry_after="1812")
        client, timer = client_for(api)
        with pytest.raises(base.CloudError) as caught:
            client.list()
        assert caught.value.kind == "rate-limit" and "try again in 30 min" in caught.value.hint
        assert timer.slept == [] and len(api.requests) == 1  # not a 1 s retry


class Redirecting(BaseHTTPRequestHandler):
    """Answers every request with a redirect to TARGET; records what reached it."""

    seen: list = []  # noqa: RUF012

    def log_message(self, *args):
        pass

    def do_GET(self):
        Redirecting.seen.append((self.server.server_port, self.headers.get("Authorization")))
        if self.path.startswith("/moved"):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"pods": []}')
            return
        self.send_response(302)
        self.send_header("Location", f"http://127.0.0.1:{self.server.other}/moved/pods")
        self.end_headers()


def test_a_redirect_is_refused_and_the_key_goes_nowhere_else():
    servers = [Server(("127.0.0.1", 0), Redirecting) for _ in range(2)]
    servers[0].other, servers[1].other = servers[1].server_port, servers[1].server_port
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = mod("mesh_cloud")
        http = base.Http("runpod", f"http://127.0.0.1:{servers[0].server_port}/v2", KEY,
                         mod("mesh_cloud_runpod").describe, retries=0)  # fmt: skip
        with pytest.raises(base.CloudError) as caught:
            mod("mesh_cloud_runpod").Client(KEY, http=http).list()
        assert "redirect (302)" in caught.value.message and "does not follow" in caught.value.message
        assert [port for port, _key in Redirecting.seen] == [servers[0].server_port]  # the other got nothing
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


# --- a create that failed yet made the machine -------------------------------------------------


@pytest.mark.parametrize("provider", ["runpod", "paperspace"])
def test_after_a_5xx_on_a_create_the_instance_is_looked_up_and_named_with_how_to_delete_it(mesh, monkeypatch, provider):
    with Standin(provider) as api:
        monkeypatch.setenv(f"MESHCTL_{provider.upper()}_API_URL", api.url)
        cloud.add_account(mesh, {}, provider, KEY, check=False)
        api.fail_create_after = 502
        options = {"region": "ny2", "template_id": "t1"}
        with pytest.raises(ProviderError) as caught:
            cloud.launch(mesh, {}, provider, "A4000" if provider == "paperspace" else "NVIDIA RTX A5000", "n1", options)
        made = next(iter(api.backend.machines))
        assert f"now has an instance named n1: {made} (running); it may bill" in caught.value.message
        assert f"meshctl add-node {provider}:{made} --name n1" in caught.value.hint
        assert sum(1 for m, p in api.requests if m == "POST") == 1  # never sent twice


def test_a_4xx_on_a_create_is_said_as_it_is_without_a_look_up(mesh, monkeypatch):
    with Standin("runpod") as api:
        monkeypatch.setenv("MESHCTL_RUNPOD_API_URL", api.url)
        cloud.add_account(mesh, {}, "runpod", KEY, check=False)
        api.backend.capacity = 0
        with pytest.raises(ProviderError, match="no longer any instances available") as caught:
            cloud.launch(mesh, {}, "runpod", "NVIDIA RTX A5000", "n1", {})
        assert "try another type" in caught.value.hint and api.requests[-1][0] == "POST"


# --- offers ---------------------------------------------------------------------------------------


@pytest.fixture
def two_providers(mesh, monkeypatch):
    with Standin("lambda") as lam, Standin("runpod") as rp:
        monkeypatch.setenv("MESHCTL_LAMBDA_API_URL", lam.url)
        monkeypatch.setenv("MESHCTL_RUNPOD_API_URL", rp.url)
        cloud.add_account(mesh, {}, "lambda", KEY, check=False)
        cloud.add_account(mesh, {}, "runpod", KEY, check=False)
        yield lam, rp


def test_gpu_names_match_whole():
    assert cloud.gpu_matches("a10", "NVIDIA A10 (24 GB PCIe)", "gpu_1x_a10")
    assert not cloud.gpu_matches("a10", "NVIDIA A100 80GB PCIe", "A100 PCIe")
    assert cloud.gpu_matches("RTX A5000", "RTX A5000") and cloud.gpu_matches("h100", "gpu_8x_h100_sxm5")
    assert cloud.parse_gpu("H100:8") == ("H100", 8) and cloud.parse_gpu("A10") == ("A10", None)
    with pytest.raises(UsageError, match="TYPE:COUNT"):
        cloud.parse_gpu("H100:x")


def test_offers_across_providers_cheapest_per_gpu_first(mesh, two_providers):
    rows, problems = cloud.offers(mesh, {}, "H100", 8)
    assert problems == {}
    assert [(o.provider, o.type, o.cloud, o.gpus, o.price_per_hour, o.available) for o in rows] == [
        ("runpod", "NVIDIA H100 80GB HBM3", "SECURE", 8, pytest.approx(21.52), True),
        ("lambda", "gpu_8x_h100_sxm5", "", 8, 23.92, True),
    ]
    everything, _ = cloud.offers(mesh, {}, None, None)
    assert [o.price_per_gpu for o in everything if o.available] == sorted(o.price_per_gpu for o in everything
                                                                          if o.available)  # fmt: skip
    assert ("runpod", "COMMUNITY") in {(o.provider, o.cloud) for o in everything}  # the clouds apart
    a100 = [o for o in everything if "A100" in o.gpu]
    assert a100 and not any(o.available for o in a100)
    h100_pcie = next(o for o in everything if o.type == "gpu_1x_h100_pcie")
    assert not h100_pcie.available and h100_pcie.regions == []  # Lambda: no region with capacity


def test_the_cheapest_available_offer_under_a_price(mesh, two_providers):
    rows, _ = cloud.offers(mesh, {}, "A5000", 1)
    assert cloud.cheapest(rows).cloud == "COMMUNITY" and cloud.cheapest(rows).price_per_hour == 0.16
    assert cloud.cheapest(rows, max_price=0.1) is None


def test_offers_command_prints_one_table_and_json(mesh, two_providers):
    out = CliRunner().invoke(cli, ["offers", "--gpu", "H100:8", "--json", "--mesh", str(mesh.path)])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert [o["provider"] for o in data["offers"]] == ["runpod", "lambda"]
    text = CliRunner().invoke(cli, ["offers", "--mesh", str(mesh.path)], terminal_width=200)
    assert text.exit_code == 0 and "gpu_1x_a10" in text.output and "COMMUNITY" in text.output


def test_launch_gpu_names_the_offer_its_price_and_asks_first(mesh, two_providers):
    _lam, rp = two_providers
    refused = CliRunner().invoke(cli, ["launch", "--gpu", "A5000", "--name", "n1", "--mesh", str(mesh.path)])
    assert refused.exit_code == UsageError.exit_code
    assert "cheapest available A5000: 1 x RTX A5000 at runpod (NVIDIA RTX A5000, COMMUNITY), $0.16/h" in refused.output
    assert "pass -y" in refused.output and ("POST", "/v2/pods") not in rp.requests
    too_dear = CliRunner().invoke(cli, ["launch", "--gpu", "H100:8", "--max-price", "20", "--name", "n1", "-y",
                                        "--mesh", str(mesh.path)])  # fmt: skip
    assert (
        too_dear.exit_code == UsageError.exit_code and "at most $20.00/h; the cheapest is $21.52/h" in too_dear.output
    )


def test_launch_checks_the_account_first_and_asks_with_the_price_of_the_named_type(mesh, two_providers, tmp_path):
    _lam, rp = two_providers
    asked = CliRunner().invoke(cli, ["launch", "runpod", "--type", "NVIDIA RTX A5000", "--name", "n1",
                                     "--mesh", str(mesh.path)])  # fmt: skip
    assert asked.exit_code == UsageError.exit_code, asked.output  # no terminal to ask on: -y needed
    assert "rent a NVIDIA RTX A5000 at Runpod at $0.27/h as n1?" in asked.output  # Secure Cloud's price
    assert ("POST", "/v2/pods") not in rp.requests
    (mesh.path / "secrets" / "providers" / "runpod.key").unlink()
    without = CliRunner().invoke(cli, ["launch", "runpod", "--type", "NVIDIA RTX A5000", "--name", "n1", "-y",
                                       "--mesh", str(mesh.path)])  # fmt: skip
    assert without.exit_code == UsageError.exit_code
    assert "the mesh has no runpod account" in without.output and "meshctl provider add runpod" in without.output
    for name in ("lambda",):
        (mesh.path / "secrets" / "providers" / f"{name}.key").unlink()
    none = CliRunner().invoke(cli, ["launch", "--gpu", "A10", "--name", "n1", "-y", "--mesh", str(mesh.path)])
    assert none.exit_code == UsageError.exit_code and "no provider account" in none.output
    assert "offers --all" not in none.output


def test_remove_node_terminate_asks_first(mesh, two_providers):
    _lam, rp = two_providers
    pod = rp.add("gpu1", "NVIDIA RTX A5000", 1, 0.27)
    nodes, mesh_vars = mesh.load()
    from meshctl.model import Node

    nodes.append(Node("gpu1", pod.ip, port=pod.port, provider="runpod", state="active", pod=True,
                      instance=f"runpod:{pod.id}", mesh_address="100.64.0.2"))  # fmt: skip
    mesh.save(nodes, mesh_vars)
    out = CliRunner().invoke(cli, ["remove-node", "gpu1", "--terminate", "--mesh", str(mesh.path)])
    assert out.exit_code == UsageError.exit_code and f"delete runpod:{pod.id} at its provider" in out.output
    assert "gpu1" in mesh.inventory.read_text() and pod.state == "running"


def test_a_machine_says_its_provider_by_the_marks_its_capabilities_name():
    import os
    import subprocess

    from meshctl import preflight

    out = subprocess.run(["sh", "-s"], input=preflight.probe_script(), capture_output=True, text=True, check=False,
                         env={**os.environ, "RUNPOD_POD_ID": "abc"}).stdout  # fmt: skip
    facts = preflight.parse_probe(out)
    assert facts["env_mark"] == "RUNPOD_" and preflight.detect_provider(facts) == "runpod"
    assert preflight.is_pod(facts) and preflight.is_pod({"pid1": "systemd", "tun": "yes"}, "runpod")
    assert preflight.detect_provider({"dmi": "Paperspace Inc. Standard PC"}) == "paperspace"
    assert preflight.detect_provider({"hostname": "lambda-gpu-1"}) == "lambda"
    assert preflight.detect_provider({"dmi": "QEMU Standard PC"}) == "generic"


def test_a_launch_missing_what_its_provider_needs_names_the_options_before_asking(mesh, two_providers):
    lam, _rp = two_providers
    out = CliRunner().invoke(cli, ["launch", "lambda", "--type", "gpu_1x_a10", "--name", "n1", "-y",
                                   "--mesh", str(mesh.path)])  # fmt: skip
    assert out.exit_code == UsageError.exit_code
    assert "a Lambda launch needs --region, --ssh-key-name" in out.output and lam.requests == []
    assert "launching" not in out.output  # nothing said of a launch that never was


def test_a_providers_words_lose_escapes_and_bidi_marks_before_anyone_shows_them():
    base = mod("mesh_cloud")
    hostile = {"title": "x", "status": 400, "detail": "no\x1b]52;c;aWQK\x07 capacity\u061c\u202e here",
               "errors": ["bad\x9b31m field"]}  # fmt: skip
    message, kind = mod("mesh_cloud_runpod").describe(400, hostile)
    assert message == "no capacity here (bad field)" and kind == "capacity"  # sequences whole, payload too
    assert all(ch.isprintable() for ch in message)
    assert base.message_of({"error": {"message": "\x1b[2J\u202e"}}, ("error", "message")) == "no message"


def test_what_meshctl_prints_loses_the_arabic_letter_mark_and_the_other_invisible_formats():
    from meshctl import display

    assert display.clean("gpu\u061c1\u2066x\u2069\u2060\ufff9") == "gpu1x"


def test_asking_the_providers_is_said_on_a_terminal_while_it_lasts(mesh, two_providers, monkeypatch, capsys):
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    cloud.ask_each(mesh, {}, "list")
    assert "asking lambda, runpod ..." in capsys.readouterr().err


# --- launch by candidates (`launch --gpu`): the offers in order until one is created ------------


def candidates_of(mesh, gpu: str, count: int = 1):
    """What `launch --gpu` tries, in its order: every available offer, cheapest first, with its options."""
    from meshctl.ops.launch import offer_options

    rows, _ = cloud.offers(mesh, {}, gpu, count)
    options = {"region": None, "ssh_key_names": ["laptop"], "public_key": "ssh-ed25519 AAAA x"}
    return [(o, o.provider, o.type, offer_options(o, options, None)) for o in rows if o.available]


def creates(api) -> list:
    return [body for method, path, body in api.bodies if method == "POST" and path.endswith(("/pods", "/launch"))]


def test_a_candidate_without_capacity_is_skipped_and_the_next_offer_rented(mesh, two_providers):
    _lam, rp = two_providers
    rp.refuse({"cloud": "COMMUNITY"}, "capacity")
    said = []
    offer, inst = cloud.launch_first(mesh, {}, candidates_of(mesh, "A5000"), "n1", say=said.append)
    assert (offer.provider, offer.cloud, offer.price_per_hour) == ("runpod", "SECURE", 0.27)
    assert [b["cloud"] for b in creates(rp)] == ["COMMUNITY", "SECURE"]  # in price order, one each
    assert len([m for m in rp.backend.machines.values() if m.state != "terminated"]) == 1 and inst["name"] == "n1"
    assert len(said) == 1 and said[0].startswith("skipped runpod (NVIDIA RTX A5000, COMMUNITY) at $0.16/h: ")
    assert "no longer any instances available" in said[0] and said[0].endswith("trying the next offer")


def test_a_pool_the_account_may_not_rent_from_is_skipped_not_taken_for_a_bad_key(mesh, two_providers):
    _lam, rp = two_providers
    rp.refuse({"cloud": "COMMUNITY"}, "pool")
    said = []
    offer, _inst = cloud.launch_first(mesh, {}, candidates_of(mesh, "A5000"), "n1", say=said.append)
    assert offer.cloud == "SECURE" and [b["cloud"] for b in creates(rp)] == ["COMMUNITY", "SECURE"]
    assert "(403)" in said[0] and "check the key" not in said[0]


def test_candidates_go_across_providers_and_every_refusal_is_named_when_none_is_created(mesh, two_providers):
    lam, rp = two_providers
    rp.refuse({"cloud": "SECURE"}, "capacity")
    lam.refuse({"instance_type_name": "gpu_8x_h100_sxm5"}, "capacity")
    with pytest.raises(ProviderError) as caught:
        cloud.launch_first(mesh, {}, candidates_of(mesh, "H100", 8), "n1")
    assert caught.value.message.startswith("no offer could be rented (2 tried): runpod (NVIDIA H100 80GB HBM3, SECURE)")
    assert "lambda (gpu_8x_h100_sxm5, us-south-2) at $23.92/h: " in caught.value.message
    assert "--max-price" in caught.value.hint
    assert [m for m in [*rp.backend.machines.values(), *lam.backend.machines.values()] if m.state != "terminated"] == []


def test_a_create_that_may_have_made_a_machine_stops_the_candidates(mesh, two_providers):
    """A 5xx after the create was done: the instance exists and bills; no second machine is made."""
    _lam, rp = two_providers
    rp.fail_create_after = 502
    with pytest.raises(ProviderError) as caught:
        cloud.launch_first(mesh, {}, candidates_of(mesh, "A5000"), "n1")
    assert "now has an instance named n1" in caught.value.message and len(creates(rp)) == 1
    assert len([m for m in rp.backend.machines.values() if m.state != "terminated"]) == 1


def test_a_create_that_failed_and_made_nothing_is_sent_again_then_moves_on(mesh, two_providers):
    """A 5xx before anything was made ("Transient upstream failure. Retry the same candidate with
    backoff", Runpod's create table): looked up by name (none), sent again to the same candidate;
    after CREATE_TRIES of them, the next candidate."""
    _lam, rp = two_providers
    candidates = candidates_of(mesh, "A5000")
    timer = FakeTime()
    rp.fail_next = [(502, rp._error(502, "upstream request failed"), {})]
    said = []
    offer, _inst = cloud.launch_first(mesh, {}, candidates, "n1", say=said.append, sleep=timer.sleep,
                                      clock=timer.clock)  # fmt: skip
    assert offer == candidates[0][0] and said == []  # the same candidate, on its second try
    bodies = [b for m, p, b in rp.bodies if (m, p) == ("POST", "/v2/pods")]
    assert len(bodies) == 2 and bodies[0] == bodies[1] and timer.slept[:1] == [5.0]
    rp.refuse_create += [({}, 502, rp._error(502, "upstream request failed"))] * cloud.CREATE_TRIES
    offer, _inst = cloud.launch_first(mesh, {}, candidates, "n2", say=said.append, sleep=timer.sleep,
                                      clock=timer.clock)  # fmt: skip
    assert offer == candidates[1][0] and "no instance named n2 exists at runpod now" in said[0]


def test_any_other_refusal_stops_at_once(mesh, two_providers):
    _lam, rp = two_providers
    candidates = candidates_of(mesh, "A5000")
    rp.fail_next = [(401, rp._unauthorized(), {})]
    with pytest.raises(ProviderError, match=r"\(401\)") as caught:
        cloud.launch_first(mesh, {}, candidates, "n1")
    assert "check the key" in caught.value.hint and len(creates(rp)) == 1


def test_runpods_create_table_a_400_tries_the_next_a_402_stops():
    """The create's own table (tests/schemas/runpod.json's note): a 400 is a rule broken or a GPU not
    placed (try the next), a 402 an empty balance (no candidate will do: stop)."""
    with Standin("runpod") as api:
        client, _timer = client_for(api)
        request = {"type": "NVIDIA RTX A5000", "name": "n1", "cloud": "SECURE"}
        api.fail_next = [(400, api._error(400, "create pod: could not place the pod"), {})]
        with pytest.raises(resources.plugin("module_utils.mesh_cloud").CloudError) as placed:
            client.launch(request)
        assert placed.value.kind in resources.plugin("module_utils.mesh_cloud").CANDIDATE_KINDS
        api.fail_next = [(402, api._error(402, "insufficient balance"), {})]
        with pytest.raises(resources.plugin("module_utils.mesh_cloud").CloudError) as broke:
            client.launch(request)
        assert broke.value.kind not in resources.plugin("module_utils.mesh_cloud").CANDIDATE_KINDS
        assert api.backend.machines == {}


def test_a_pools_size_is_runpods_placement_filter_per_gpu_and_the_pod_says_what_it_got():
    """gpu.minVcpuCountPerGpu and gpu.minRamPerGpu (the create, revision 4962c60a): "a placement filter,
    not a resource request"; the pod's gpu.vcpuCount and gpu.memory are its totals."""
    base = mod("mesh_cloud")
    with Standin("runpod") as api:
        client, _timer = client_for(api)
        request = {"type": "NVIDIA RTX A5000", "name": "n1", "gpus": 2, "cpus": 24, "memory_gb": 100.5}
        new = client.launch(request)
        (body,) = [b for m, p, b in api.bodies if (m, p) == ("POST", "/v2/pods")]
        assert body["gpu"] == {"id": "NVIDIA RTX A5000", "count": 2, "minVcpuCountPerGpu": 12, "minRamPerGpu": 51}
        pod = next(a[3] for a in api.answers if a[:3] == ("POST", "/v2/pods", 201))
        assert pod["gpu"]["vcpuCount"] >= 24 and pod["gpu"]["memory"] >= 100.5 and pod["id"] == new
        # More than any host has per GPU: nothing placed, a 400 the candidates walk on from.
        with pytest.raises(base.CloudError) as caught:
            client.launch({**request, "name": "n2", "cpus": 64})
        assert caught.value.kind == "capacity" and caught.value.request_or_capacity
        assert len(api.backend.machines) == 1


def test_every_candidate_refused_with_runpods_400_is_read_as_the_requests_problem(mesh, two_providers):
    """The create's table: "if every candidate returns 400, read the last detail as a problem with the
    request rather than as absent capacity"."""
    _lam, rp = two_providers
    candidates = candidates_of(mesh, "A5000")
    assert len(candidates) == 2 and {c[1] for c in candidates} == {"runpod"}
    rp.refuse_create += [({}, 400, rp._error(400, "create pod: gpu count must be a power of two"))] * 2
    with pytest.raises(ProviderError) as caught:
        cloud.launch_first(mesh, {}, candidates, "n1")
    assert "read as a problem with the request" in caught.value.message
    assert "power of two" in caught.value.message and "check what was asked" in caught.value.hint
    # One candidate refused for capacity and another for the request alike: the usual words.
    rp.refuse_create += [({}, 400, rp._error(400, "create pod: could not be placed"))]
    rp.fail_next = []
    offer, _inst = cloud.launch_first(mesh, {}, candidates, "n1")
    assert offer == candidates[1][0]


def test_a_runpod_request_over_its_size_limit_is_refused_before_it_is_sent():
    """Runpod answers 413 before authentication for a body over 102400 bytes: meshctl knows the size
    of what it sends and says what to shorten; the API's own 413 reads as the request's fault too."""
    base = mod("mesh_cloud")
    runpod = mod("mesh_cloud_runpod")
    with Standin("runpod") as api:
        client, _timer = client_for(api)
        with pytest.raises(base.CloudError) as caught:
            client.launch({"type": "NVIDIA RTX A5000", "name": "n1", "public_key": "k" * (runpod.MAX_BODY + 1)})
        assert caught.value.kind == "invalid" and caught.value.status == 413
        assert "most of it its env" in caught.value.message and "shorten the pod's env" in caught.value.hint
        assert not [r for r in api.requests if r[0] == "POST"]
        assert runpod.describe(413, api._error(413, "request body too large"))[1] == "invalid"


def test_runpods_args_are_read_in_both_shapes_and_an_errored_pod_can_start():
    """args: a bare shell string (CMD) or {"entrypoint": [...], "cmd": [...]}; answers carry both it
    and the deconstructed entrypoint and cmd. start is valid from EXITED and from ERROR, and the
    head's start command is given to a stopped pod only."""
    runpod = mod("mesh_cloud_runpod")
    assert runpod.args_of({"args": "bash /workspace/.meshctl/rejoin"}) == ["bash", "/workspace/.meshctl/rejoin"]
    assert runpod.args_of({"args": '{"entrypoint": ["/bin/sh", "-c"], "cmd": ["exec sleep 1"]}'}) == [
        "/bin/sh", "-c", "exec sleep 1"]  # fmt: skip
    assert runpod.args_of({"args": "ignored", "entrypoint": ["/start.sh"], "cmd": []}) == ["/start.sh"]
    with pytest.raises(mod("mesh_cloud").CloudError):
        runpod.args_of({"args": '{"entrypoint": "not a list"}'})
    with Standin("runpod") as api:
        client, _timer = client_for(api)
        pod = api.add("n1", "NVIDIA RTX A5000", 1, 0.27, state="error")
        assert client.get(pod.id)["status"] == "unhealthy"
        assert client.prepare_start(pod.id, ["bash", "/workspace/.meshctl/rejoin"]) is False
        client.start(pod.id)
        assert pod.state == "running" and not [r for r in api.requests if r[0] == "PATCH"]


def test_runpods_availability_is_asked_per_cloud_and_gpu_count(mesh, two_providers):
    """The catalog's availability is Secure Cloud's for one GPU unless the cloud and the count are
    asked, and its ceiling (maxCount) is no stock: asked per cloud for the GPUs wanted, an offer is
    available only where they are free (the stand-in's RTX A5000: 2 free in Community Cloud, whose
    ceiling is 4)."""
    _lam, rp = two_providers
    rp.stock[("NVIDIA RTX A5000", "COMMUNITY")] = 2
    rows, _ = cloud.offers(mesh, {}, "A5000", 4, "runpod")
    assert [(o.cloud, o.gpus, o.available) for o in rows] == [("SECURE", 4, True), ("COMMUNITY", 4, False)]
    asked = [p for m, p in rp.requests if p.startswith("/v2/catalog/gpus")]
    assert len(asked) == 2 and all("count=4" in p for p in asked)
    assert {re.search(r"cloud=(\w+)", p).group(1) for p in asked} == {"SECURE", "COMMUNITY"}
    rows, _ = cloud.offers(mesh, {}, "A5000", 2, "runpod")
    assert [(o.cloud, o.available) for o in rows] == [("COMMUNITY", True), ("SECURE", True)]


def test_a_runpod_launch_sends_the_data_centre_the_user_named(mesh, two_providers):
    _lam, rp = two_providers
    cloud.launch(mesh, {}, "runpod", "NVIDIA RTX A5000", "n1", {"region": "EU-RO-1", "public_key": "ssh-ed25519 A x"})
    cloud.launch(mesh, {}, "runpod", "NVIDIA RTX A5000", "n2", {"public_key": "ssh-ed25519 A x"})
    sent = creates(rp)
    assert sent[0]["dataCenterIds"] == ["EU-RO-1"] and "dataCenterIds" not in sent[1]  # the scheduler chooses


def test_lambdas_billing_address_and_unknown_launch_names_are_said_as_such(mesh, monkeypatch):
    """Lambda's launch answers (its spec's LaunchInstance errors): 403 global/invalid-address is the
    account's billing address, not the key; global/object-does-not-exist on a launch names an
    instance type, region or key name Lambda does not know, not a missing instance."""
    with Standin("lambda") as api:
        client, _timer = client_for(api)
        request = {"type": "gpu_1x_a10", "name": "n1", "region": "us-east-1", "ssh_key_names": ["laptop"]}
        address = {"error": {"code": "global/invalid-address", "message": "Your billing address is invalid.",
                             "suggestion": "Make sure your billing address is valid."}}  # fmt: skip
        api.fail_next = [(403, address, {})]
        with pytest.raises(mod("mesh_cloud").CloudError) as caught:
            client.launch(request)
        assert caught.value.kind == "billing" and "billing details" in caught.value.hint
        assert "check the key" not in caught.value.hint
        unknown = {"error": {"code": "global/object-does-not-exist", "message": "Specified SSH key does not exist."}}
        api.fail_next = [(404, unknown, {})]
        with pytest.raises(mod("mesh_cloud").CloudError) as caught:
            client.launch(request)
        assert caught.value.kind == "invalid" and "no key named laptop" in caught.value.hint
        assert api.backend.machines == {}


def test_a_preempted_lambda_instance_is_shown_as_such_and_taken_for_gone(mesh, monkeypatch):
    """Lambda's status `preempted` (its spec's InstanceStatus): shown as such, not `unknown`, and gone
    as a terminated one is: no node follows it, no launch waits for it."""
    lam = mod("mesh_cloud_lambda")
    with Standin("lambda") as api:
        monkeypatch.setenv("MESHCTL_LAMBDA_API_URL", api.url)
        cloud.add_account(mesh, {}, "lambda", KEY, check=False)
        machine = api.add("gpu9", "gpu_1x_a10", 1, 0.75, state="preempted")
        (row,) = [r for r in cloud.machines(mesh, *mesh.load())[0] if r.id == machine.id]
        assert row.status == "preempted"
        assert lam.normalize(api.render(machine))["provider_status"] == "preempted"
        assert "preempted" in mod("mesh_cloud").GONE
        with pytest.raises(UsageError) as caught:
            cloud.find_instance(mesh, {}, "lambda", "gpu9")
        assert "is preempted" in caught.value.message and "launch a new one" in caught.value.hint


def test_paperspace_is_asked_for_availability_before_a_create(mesh, monkeypatch):
    """GET /machine-availability?machineType&region (the API reference's Machine Types page): no
    machine free there is a capacity refusal before anything is created (a candidate to skip)."""
    with Standin("paperspace") as api:
        client, _timer = client_for(api)
        assert client.available("A4000", "ny2") is True
        api.backend.capacity = 0
        with pytest.raises(mod("mesh_cloud").CloudError) as caught:
            client.launch({"type": "A4000", "name": "n1", "region": "ny2", "template_id": "t1"})
        assert caught.value.kind == "capacity" and "no A4000 free in ny2" in caught.value.message
        assert not [r for r in api.requests if r[0] == "POST"]  # nothing was asked to be created
        assert "/v1/machine-availability?machineType=A4000&region=ny2" in [p for _m, p in api.requests]


def test_paperspace_offers_the_types_the_mesh_prices_where_they_are_available_now(mesh, monkeypatch):
    """Paperspace's API lists no machine types or prices: a type the mesh prices (paperspace_prices)
    is offered, in the datacenters GET /machine-availability says have one now; a CPU type, or one
    it does not price, never is. A pool or `launch --gpu` can then rent one as any other offer."""
    with Standin("paperspace") as api:
        monkeypatch.setenv("MESHCTL_PAPERSPACE_API_URL", api.url)
        cloud.add_account(mesh, {}, "paperspace", KEY)
        ps = mod("mesh_cloud_paperspace")
        api.availability = {"H100": {"West Coast (CA1)"}, "A100-80Gx8": set()}
        prices = {"H100": 5.95, "A100-80Gx8": 25.44, "C5": 0.08}
        rows, problems = cloud.offers(mesh, {"paperspace_prices": prices}, "H100", 1)
        assert problems == {}
        assert [(o.type, o.gpu, o.gpus, o.price_per_hour, o.regions, o.available) for o in rows] == [
            ("H100", "H100", 1, 5.95, ["West Coast (CA1)"], True)]  # fmt: skip
        everything, _ = cloud.offers(mesh, {"paperspace_prices": prices}, None, None)
        assert {o.type: o.available for o in everything} == {"H100": True, "A100-80Gx8": False}  # no C5
        asked = [p for _m, p in api.requests if p.startswith("/v1/machine-availability")]
        assert "/v1/machine-availability?machineType=C5&region=East+Coast+%28NY2%29" not in asked
        assert len([p for p in asked if "machineType=H100&" in p]) >= len(ps.REGIONS)  # each datacenter asked
        assert cloud.offers(mesh, {}, "H100", 1)[0] == []  # nothing priced: nothing offered
        shown = CliRunner().invoke(cli, ["offers", "--mesh", str(mesh.path)], env={"COLUMNS": "200"})
        assert "set `paperspace_prices: {TYPE: $/h}` in group_vars/all.yml" in shown.output, shown.output
        (mesh.path / "group_vars").mkdir(exist_ok=True)
        (mesh.path / "group_vars" / "all.yml").write_text("paperspace_prices: {H100: 5.95}\n")
        shown = CliRunner().invoke(cli, ["offers", "--mesh", str(mesh.path), "--gpu", "H100"], env={"COLUMNS": "200"})
        assert "paperspace" in shown.output and "5.95" in shown.output and "paperspace_prices" not in shown.output
        assert ps.gpu_name("A100-80Gx8") == "A100-80G" and ps.gpu_name("H100") == "H100"


def test_a_paperspace_start_answered_currently_starting_is_no_failure():
    """PATCH /machines/{id}/start answers 409 "This machine is currently starting." while the machine
    is on its way: the start is done. A 409 on a machine that is not starting stays an error."""
    with Standin("paperspace") as api:
        booting = api.add("n1", "A4000", 1, 0.76, state="booting")
        client, _ = client_for(api)
        client.start(booting.id)
        assert ("PATCH", f"/v1/machines/{booting.id}/start", 409) in [a[:3] for a in api.answers]
        assert booting.state == "booting"
        # The same answer while the machine is off (a start that will not come) is said.
        api.fail_next.append((409, {"code": "CONFLICT", "message": "This machine is currently starting."}, {}))
        stopped = api.add("n2", "A4000", 1, 0.76, state="stopped")
        with pytest.raises(mod("mesh_cloud").CloudError) as caught:
            client.start(stopped.id)
        assert caught.value.kind == "conflict" and "currently starting" in caught.value.message


def test_a_paperspace_machine_is_created_without_mailing_its_password():
    """emailPassword defaults to true (the create's schema, from Paperspace's document): meshctl sends
    false, as nobody logs in with that password."""
    schema = api_schemas.load("paperspace")["endpoints"]["POST /machines"]["request"]["properties"]
    assert schema["emailPassword"]["default"] is True
    with Standin("paperspace") as api:
        client, _ = client_for(api)
        client.launch({"type": "A4000", "name": "n1", "region": "ny2", "template_id": "t1"})
        assert api.emailed == [False]
        (body,) = [b for m, path, b in api.bodies if (m, path) == ("POST", "/v1/machines")]
        assert body["emailPassword"] is False


def test_machines_says_what_a_stopped_instance_still_bills(mesh, two_providers):
    """Stopped is not free: Runpod bills a stopped pod's volume disk (its Manage Pods page)."""
    _lam, rp = two_providers
    rp.add("rp9", "NVIDIA RTX A5000", 1, 0.27, state="stopped")
    rp.add("rp8", "NVIDIA RTX A5000", 1, 0.27)
    out = CliRunner().invoke(cli, ["machines", "--mesh", str(mesh.path)], terminal_width=200)
    assert out.exit_code == 0, out.output
    (line,) = [x for x in out.output.splitlines() if "is stopped; still billed" in x]
    assert "(rp9) is stopped; still billed: its volume disk" in line
    data = json.loads(CliRunner().invoke(cli, ["machines", "--json", "--mesh", str(mesh.path)]).output)
    bills = {m["name"]: m["stopped_bills"] for m in data["machines"]}
    assert bills["rp9"].startswith("its volume disk") and bills["rp8"] == ""


def test_the_providers_table_says_each_clients_document_and_date_as_its_module_does():
    table = (Path(__file__).resolve().parents[3] / "docs" / "providers.md").read_text()
    for name in PROVIDERS:
        can = mod(f"mesh_cloud_{name}").CAPABILITIES
        (row,) = [line for line in table.splitlines() if line.startswith(f"| {can.title} |")]
        assert row.rstrip().endswith(f"| {can.checked} |") and can.default_url in row, (row, can.checked)


def error_rows() -> list[list[str]]:
    text = (Path(__file__).resolve().parents[3] / "docs" / "providers.md").read_text()
    section = text.split("## Errors, and what meshctl says to do", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith(("| provider", "| ---"))]  # fmt: skip
    return [row for row in rows if len(row) == 5]


def test_the_error_table_has_a_row_per_documented_answer():
    rows = error_rows()
    assert len(rows) >= 20 and {r[0] for r in rows} == set(PROVIDERS)


@pytest.mark.parametrize("row", error_rows(), ids=lambda r: f"{r[0]}-{r[1]}-{r[3]}")
def test_each_documented_error_gets_its_kind_and_advice(row):
    provider, status, said, kind, advice = row
    words = said.strip("`")
    payload = {
        "lambda": {"error": {"code": words, "message": "refused"}},
        "runpod": {"title": "Error", "status": int(status), "detail": words},
        "paperspace": {"code": "ERROR", "message": words},
    }[provider]
    http = mod("mesh_cloud").Http(provider, "https://api.invalid/v1", KEY, mod(f"mesh_cloud_{provider}").describe)
    error = http._error("GET", "/instances", int(status), payload)
    assert error.kind == kind, (row, error.kind, error.message)
    assert advice.strip("`") in error.hint or advice.strip("`") in error.message, (row, error.hint)


def test_a_lambda_offer_is_tried_in_each_region_with_capacity(mesh, two_providers, account_clock):
    """Lambda's capacity is per type and region: the launch tries the next region before the next offer,
    12 s after the first (a refused launch counts against the account's one per 12 s too)."""
    from meshctl.ops import launch

    lam, _rp = two_providers
    lam.launch_spacing, lam.clock = 12.0, account_clock.clock
    lam.refuse({"region_name": "us-east-1"}, "capacity")
    rows, _ = cloud.offers(mesh, {}, "A10", 1, "lambda")
    options = {"region": None, "ssh_key_names": ["meshctl"]}
    candidates = [(o, o.provider, o.type, launch.offer_options(o, options, where)) for o in rows if o.available
                  for where in o.regions]  # fmt: skip
    assert [c[3]["region"] for c in candidates] == ["us-east-1", "us-west-1"]
    said = []
    offer, _inst = cloud.launch_first(mesh, {}, candidates, "n1", say=said.append)
    assert offer.type == "gpu_1x_a10" and [b["region_name"] for b in creates(lam)] == ["us-east-1", "us-west-1"]
    assert said[0].startswith("skipped lambda (gpu_1x_a10, us-east-1) at $0.75/h: ")
    assert account_clock.slept == [12.0] and 429 not in [a[2] for a in lam.answers]


def test_launch_cpus_and_memory_leave_out_smaller_offers_and_go_to_runpod_as_placement_filters(mesh, two_providers):
    """--cpus/--memory: an offer that says its size (Lambda's specs: 30 vCPUs, 200 GiB a GPU) and has
    less is left out, said why; Runpod's offers say none, so its create carries them as placement
    filters per GPU (gpu.minVcpuCountPerGpu, minRamPerGpu)."""
    lam, rp = two_providers
    args = ["launch", "--gpu", "A10", "--name", "n1", "-y", "--mesh", str(mesh.path)]
    small = CliRunner().invoke(cli, [*args, "--cpus", "64"], env={"COLUMNS": "200"})
    assert small.exit_code == UsageError.exit_code, small.output
    assert "left out lambda (gpu_1x_a10): it has 30 vCPUs (64 asked)" in small.output
    assert "no available offer of A10 with at least 64 vCPUs" in small.output
    assert not [r for r in lam.requests if r[0] == "POST"]
    typed = CliRunner().invoke(cli, ["launch", "lambda", "--type", "gpu_1x_a10", "--region", "us-east-1",
                                     "--ssh-key-name", "meshctl", "--memory", "512", "--name", "n1", "-y",
                                     "--mesh", str(mesh.path)], env={"COLUMNS": "200"})  # fmt: skip
    assert typed.exit_code == UsageError.exit_code, typed.output
    assert "lambda's gpu_1x_a10 has 200 GB of memory (512 asked)" in typed.output
    assert not [r for r in lam.requests if r[0] == "POST"]
    chosen = launch.plan(reading(mesh), launch.new_request("n1", None, None, "A5000", options={"cpus": 12,
                         "memory_gb": 40.0}), say=lambda _line: None, warn=lambda _line: None)  # fmt: skip
    offer, provider, kind, options = chosen.candidates[0]
    assert provider == "runpod" and offer.vcpus is None  # Runpod's catalog says no size: kept
    cloud.launch(mesh, {}, provider, kind, "n1", {**options, "public_key": "ssh-ed25519 A x"})
    assert creates(rp)[-1]["gpu"] == {"id": "NVIDIA RTX A5000", "count": 1, "minVcpuCountPerGpu": 12,
                                      "minRamPerGpu": 40}  # fmt: skip


def test_nothing_of_runpods_retired_rest_v1_or_its_graphql_api_is_left():
    """Runpod retired REST v1 (rest.runpod.io/v1) on 2026-11-15 and ends GraphQL in 2027: the client
    speaks v2 only, and nothing else in meshctl, the collection or the tests names either."""
    old = re.compile(r"rest\.runpod\.io|api\.runpod\.io/graphql|graphql|/v1/pods|dockerArgs|podFindAndDeployOnDemand",
                     re.IGNORECASE)  # fmt: skip
    places = [*ROOT.glob("meshctl/**/*.py"), *ROOT.glob("plugins/**/*.py"), *ROOT.glob("roles/**/*.*"),
              *ROOT.glob("tests/cloud_standin.py"), ROOT / "tests" / "schemas" / "runpod.json"]  # fmt: skip
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in places if path.is_file()
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             if old.search(line)]  # fmt: skip
    assert found == []
    assert mod("mesh_cloud_runpod").CAPABILITIES.default_url == "https://api.runpod.io/v2"


def test_no_role_or_playbook_names_a_provider_in_what_it_runs():
    """A provider's quirks are its module's (plugins/module_utils/mesh_cloud_<name>.py): the roles'
    and playbooks' YAML and templates ask the capabilities and the filters, never a provider by name
    (a comment or a description may name one)."""
    named = re.compile(r"""["'](lambda|runpod|paperspace)["']|==\s*(lambda|runpod|paperspace)\b""", re.IGNORECASE)
    places = [*ROOT.glob("roles/**/*.yml"), *ROOT.glob("roles/**/*.j2"), *ROOT.glob("playbooks/*.yml")]
    found = []
    for path in places:
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            code = line.split(" #", 1)[0] if not line.lstrip().startswith(("#", "{#")) else ""
            if "description:" not in code and named.search(code):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert places and found == []


def test_each_provider_declares_its_own_launch_options_and_launch_help_shows_the_named_ones():
    """A provider's options live in its module (LAUNCH_OPTIONS): `meshctl launch` takes them from
    there, `meshctl launch runpod --help` lists Runpod's and no other's, and an option of another
    provider is refused naming the provider's own."""
    base = mod("mesh_cloud")
    flags = {}
    for name in base.PROVIDERS:
        module = base.client_module(name)
        for option in module.LAUNCH_OPTIONS:
            assert option["key"] in base.LAUNCH_KEYS and option["help"].startswith(f"{module.CAPABILITIES.title}: ")
            assert option["flag"] not in flags and option["flag"] not in base.COMMON_LAUNCH_OPTIONS.values()
            flags[option["flag"]] = name
        assert set(module.CAPABILITIES.launch_needs) <= {o["key"] for o in module.LAUNCH_OPTIONS} | {"region"}
    assert set(flags) == {"--ssh-key-name", "--template-id", "--image", "--cloud"}
    every = CliRunner().invoke(cli, ["launch", "--help"], env={"COLUMNS": "200"}).output
    assert all(flag in every for flag in flags)
    for name in base.PROVIDERS:
        own = CliRunner().invoke(cli, ["launch", name, "--help"], env={"COLUMNS": "200"}).output
        assert "--gpu" in own and "--cpus" in own and "--region" in own  # the common ones
        assert {f for f in flags if f in own} == {f for f, p in flags.items() if p == name}, (name, own)
    with pytest.raises(UsageError, match="--template-id is Paperspace's, not runpod's") as caught:
        launch.provider_options({"template_id": "t1", "image": None, "ssh_key_names": ()}, "runpod")
    assert "runpod takes --image, --cloud" in caught.value.hint
    assert launch.provider_options({"cloud": "community", "ssh_key_names": ("a",)}, None) == {
        "cloud": "COMMUNITY", "ssh_key_names": ["a"]}  # fmt: skip


def test_a_launch_refuses_another_providers_option_before_asking_anything(mesh, two_providers):
    lam, rp = two_providers
    out = CliRunner().invoke(cli, ["launch", "runpod", "--type", "NVIDIA RTX A5000", "--ssh-key-name", "laptop",
                                   "--name", "n1", "-y", "--mesh", str(mesh.path)])  # fmt: skip
    assert out.exit_code == UsageError.exit_code and "--ssh-key-name is Lambda's, not runpod's" in out.output
    assert lam.requests == [] and rp.requests == []


def test_launch_gpu_with_cloud_rents_in_that_cloud_only(mesh, two_providers):
    """--cloud secure with --gpu: the cheaper Community Cloud offer is not a candidate."""
    chosen = launch.plan(reading(mesh), launch.new_request("n1", None, None, "A5000", options={"cloud": "SECURE"}),
                         say=lambda _line: None, warn=lambda _line: None)  # fmt: skip
    assert [(c[1], c[3]["cloud"]) for c in chosen.candidates] == [("runpod", "SECURE")] and chosen.price == 0.27


@pytest.mark.parametrize(("provider", "said"), [("lambda", "preempted"), ("runpod", None), ("paperspace", "stopped")])
def test_the_stand_in_takes_a_machine_away_as_its_provider_does_and_the_client_reads_it_so(provider, said):
    """A machine taken away from outside meshctl (what the outlive tests stage): Lambda lists the
    instance preempted, Runpod no longer has the pod, Paperspace has the machine off; the client
    reads each in meshctl's words (GONE, or stopped), and the answers still match the schema."""
    with Standin(provider) as api:
        kept = api.add("kept", "gpu_1x_a10" if provider == "lambda" else "A4000", 1, 0.75)
        lost = api.add("lost", "gpu_1x_a10" if provider == "lambda" else "A4000", 1, 0.75)
        client, _ = client_for(api)
        api.take_away(lost)
        listed = {i["name"]: i["status"] for i in client.list()}
        if said is None:
            assert "lost" not in listed
            with pytest.raises(mod("mesh_cloud").CloudError) as gone:
                client.get(lost.id)
            assert gone.value.kind == "not-found"
        else:
            assert listed["lost"] == said == client.get(lost.id)["status"]
        assert said in (None, "stopped", *mod("mesh_cloud").GONE)
        assert listed["kept"] == "running"
        for method, path, status, body in api.answers:
            if status < 400:
                assert api_schemas.response_problems(provider, method, path, status, body) == [], (method, path, body)
        assert not kept.silent


def test_a_machine_that_stops_answering_still_runs_at_its_provider():
    with Standin("lambda") as api:
        quiet = api.add("quiet", "gpu_1x_a10", 1, 0.75)
        client, _ = client_for(api)
        api.take_away(quiet, silent=True)
        assert quiet.silent and client.get(quiet.id)["status"] == "running"
