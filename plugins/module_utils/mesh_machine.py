# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""A provider machine for node NAME: the one place that creates, starts, stops, replaces and gives
back (deletes) a node's machine at its provider, whoever asks. meshctl calls it through
``meshctl.cloud`` (``launch``, ``terminate``: `meshctl launch`, a burst pool's rent and a
relaunched node on the head, `remove-node --terminate`, a pool given back); Slurm's power saving on
the head calls it from ``meshctl-power`` (role power_save copies it beside the clients). Each
function takes a provider client (``mesh_cloud_<provider>.Client``) and raises its ``CloudError``;
what a caller says of it is the caller's. ``tests/unit/meshctl/test_machine_calls.py`` finds any
other caller of a client's create, start, stop or delete."""

from __future__ import annotations

import time

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_cloud import GONE, CloudError, created_anyway

CREATE_TRIES = 3  # a create answered with a 5xx that made nothing is sent again this often (Runpod's table)


def create(client, request, sleep=time.sleep, tries=CREATE_TRIES):
    """Create the machine REQUEST describes (``mesh_cloud.LAUNCH_KEYS``; its ``name`` is the node's);
    returns its id. A create that failed in a way that may have made it all the same (a 5xx, a lost
    connection) is looked up by the name (``created_anyway``): the error then says what may bill and
    how to delete it. A 5xx that made nothing is a passing failure upstream (Runpod's create: "Retry
    the same candidate with backoff"): sent again, up to TRIES, 5 then 10 s apart. Raises the
    CloudError otherwise (``nothing_made`` set when the lookup found nothing)."""
    for attempt in range(tries):
        try:
            return client.launch(request)
        except CloudError as exc:
            error = created_anyway(client, request["name"], exc)
            if getattr(error, "nothing_made", False) and (error.status or 0) >= 500 and attempt + 1 < tries:
                sleep(5 * 2**attempt)
                continue
            raise error from None
    raise CloudError(f"{client.name}: no create was sent", kind="error")  # tries < 1


def stop(client, instance_id):
    """Stop the machine (its disk kept: the provider's ``stop`` capability)."""
    client.stop(instance_id)


def start(client, instance_id, name=None, start_command=None):
    """Start the stopped machine; returns ``(id, said)``: the id of the machine that runs the node
    now and what was done beyond a start, in words ("" when nothing). A provider whose stopped
    machine keeps only its volume (a pod) is first given START_COMMAND (the volume's rejoin script)
    when it has another, and a pod whose host has no GPU left for it is replaced by a new one on its
    network volume, named NAME (the client's ``start_or_replace``); the old one is deleted."""
    if start_command and getattr(client.capabilities, "keeps_volume", False):
        said = f"start command set to {' '.join(start_command)}" if client.prepare_start(
            instance_id, start_command) else ""  # fmt: skip
        return client.start_or_replace(instance_id, name, start_command), said
    client.start(instance_id)
    return instance_id, ""


def give_back(client, instance_id):
    """Delete the machine: it bills no more (a provider's terminate)."""
    client.terminate(instance_id)


def give_back_named(client, name):
    """Delete every machine of CLIENT's account named NAME that is not gone already (a pool node's,
    found by the node's name); returns their ids."""
    done = []
    for inst in client.list():
        if inst["name"] == name and inst["status"] not in GONE:
            client.terminate(inst["id"])
            done.append(inst["id"])
    return done


def relaunch_spec(client, instance_id):
    """What a launch of the same machine needs (its type and region, the provider's ``spec``), read
    before it is given back (a node whose provider cannot stop it, terminated when idle)."""
    return client.spec(instance_id)
