"""meshctl launch: rent a machine through its provider's API and add it to the mesh."""

from __future__ import annotations

from pathlib import Path

import click

from meshctl import cloud, display, membership, runner
from meshctl.errors import MeshctlError, UsageError
from meshctl.mesh import Mesh, check_name
from meshctl.options import mesh_option, ssh_key_option, verbose_option, wait_option


@click.command("launch")
@click.argument("provider", type=click.Choice(cloud.PROVIDERS))
@click.option("--type", "kind", required=True,
              help="Instance type (Lambda: gpu_1x_a10), GPU type id (Runpod: NVIDIA RTX A5000) or machine type "
              "(Paperspace: A4000).")  # fmt: skip
@click.option("--name", required=True, help="The instance's name at the provider, and the node's name.")
@click.option("--region", help="Region (Lambda: us-east-1; Paperspace: ny2).")
@click.option("--ssh-key-name", "ssh_key_names", multiple=True, help="Lambda: a key registered at Lambda.")
@click.option("--template-id", help="Paperspace: the OS template's id.")
@click.option("--image", help=f"Runpod: the container image (default {cloud.RUNPOD_IMAGE}).")
@ssh_key_option
@mesh_option
@wait_option
@verbose_option
def command(provider, kind, name, region, ssh_key_names, template_id, image, ssh_key, mesh_dir, wait,
            verbosity) -> None:  # fmt: skip
    """Create an instance at PROVIDER, wait for its SSH, and add it as node NAME (as add-node does)."""
    check_name(name)
    mesh = Mesh.find(mesh_dir)
    options = {"region": region, "ssh_key_names": list(ssh_key_names), "template_id": template_id, "image": image}
    if provider == "runpod" and ssh_key:  # Runpod's images authorize the key given as PUBLIC_KEY
        public = Path(ssh_key + ".pub")
        if not public.is_file():
            raise UsageError(f"{public} is missing", hint="Runpod needs the public half of --ssh-key beside it")
        options["public_key"] = public.read_text().strip()
    nodes, mesh_vars = mesh.load()
    if any(n.name == name for n in nodes):
        raise UsageError(f"a node named {name} is already in the mesh", hint="pick another --name")
    display.echo(f"launching {kind} at {provider} as {name} ...")
    inst = cloud.launch(mesh, mesh_vars, provider, kind, name, options)
    display.echo(f"{provider} instance {inst['id']} runs at {inst['ssh_host']}:{inst['ssh_port']}; waiting for SSH")
    cloud.wait_for_ssh(inst["ssh_host"], inst["ssh_port"], cloud.LAUNCH_TIMEOUT)
    target = f"{provider}:{inst['id']}"
    try:
        with mesh.lock(f"launch {name}", wait=wait):
            nodes, mesh_vars = mesh.load()
            plan = membership.plan_add(mesh, nodes, target, name, None, ssh_key, None, mesh_vars)
            display.preflight_table(plan.report)
            membership.add_node(mesh, nodes, mesh_vars, plan, runner.Progress(), verbosity=verbosity)
    except MeshctlError as exc:
        exc.hint = (exc.hint + "; " if exc.hint else "") + (
            f"the instance {target} runs and bills: `meshctl add-node {target} --name {name}` retries, "
            f"`meshctl machines` shows it"
        )
        raise
    display.echo(f"{name} is active; `meshctl status` shows the mesh")
