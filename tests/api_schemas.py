"""The providers' API schemas (tests/schemas/<provider>.json), written from each provider's published
document (its address and the date it was read are in the file), and the checks against them.

The stand-ins (tests/cloud_standin.py) refuse requests that do not match, as the real APIs do, and
the unit tests check both the stand-ins' answers and the clients' requests here: a client and its
stand-in cannot drift together, only both away from the document, which a reader of the file sees.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import jsonschema

SCHEMAS = Path(__file__).resolve().parent / "schemas"


@cache
def load(provider: str) -> dict:
    return json.loads((SCHEMAS / f"{provider}.json").read_text(encoding="utf-8"))


def _template(route: str) -> re.Pattern:
    method, path = route.split(" ", 1)
    return re.compile(method + " " + re.sub(r"\\\{[a-z_]+\\\}", r"[^/?]+", re.escape(path)) + r"$")


def endpoint(provider: str, method: str, path: str) -> tuple[str, dict] | None:
    """(route, its schema) of METHOD PATH (the API's base stripped, no query), or None: not an
    endpoint meshctl uses."""
    doc = load(provider)
    path = path.split("?", 1)[0]
    if path.startswith(doc["base"]):
        path = path[len(doc["base"]) :]
    for route, spec in doc["endpoints"].items():
        if _template(route).match(f"{method} {path}"):
            return route, spec
    return None


def problems(provider: str, schema: dict, value) -> list[str]:
    """What in VALUE does not match SCHEMA (a part of the provider's file, its $defs in scope)."""
    whole = {"$defs": load(provider)["$defs"], **schema}
    validator = jsonschema.Draft202012Validator(whole)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in validator.iter_errors(value)]


def request_problems(provider: str, method: str, path: str, body) -> list[str]:
    found = endpoint(provider, method, path)
    if found is None:
        return [f"{method} {path} is no endpoint of {provider}'s schema"]
    route, spec = found
    if "request" not in spec:
        return [] if body in (None, {}) else [f"{route} takes no body"]
    return problems(provider, spec["request"], {} if body is None else body)


def response_problems(provider: str, method: str, path: str, status: int, body) -> list[str]:
    found = endpoint(provider, method, path)
    if found is None:
        return [f"{method} {path} is no endpoint of {provider}'s schema"]
    route, spec = found
    if status >= 400:
        return problems(provider, load(provider)["error"], body)
    schema = spec["response"].get(str(status))
    if schema is None:
        return [f"{route} answers no {status} in the document"]
    return problems(provider, schema, body)
