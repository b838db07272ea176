"""The Slurm roles' templates (slurm_controller, slurm_node, slurm_accounting) rendered from fact
sets with role slurm's settings, checked line by line."""

import os
import re
import shlex
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

from meshctl import resources
from tests.conftest import fixture_text

ROLES = Path(__file__).resolve().parents[3] / "roles"
TEMPLATES = [str(ROLES / role / "templates") for role in ("slurm_controller", "slurm_node", "slurm_accounting")]
DEFAULTS = {
    **yaml.safe_load((ROLES / "slurm_defaults" / "defaults" / "main.yml").read_text()),
    **yaml.safe_load((ROLES / "slurm_accounting" / "defaults" / "main.yml").read_text()),
}
ROLE_VARS = {
    **yaml.safe_load((ROLES / "slurm_defaults" / "vars" / "main.yml").read_text()),
    **yaml.safe_load((ROLES / "slurm_accounting" / "vars" / "main.yml").read_text()),
}


def environment(**options) -> jinja2.Environment:
    """Jinja as Ansible's template module sets it up here: the roles' templates, and this
    collection's filters they call (plugins/module_utils/mesh_slurm_nodes.py)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), **options)
    for plugin in ("filter.slurm_nodes", "filter.burst"):
        for name, function in resources.plugin(plugin).FilterModule().filters().items():
            env.filters[f"meshctl.mesh.{name}"] = function
    env.filters["bool"] = lambda value: value if isinstance(value, bool) else str(value).lower() in ("true", "yes", "1")
    return env


def comment(text):  # the part of Ansible's `comment` filter these templates use
    return "#\n" + "\n".join(f"# {line}" for line in text.splitlines()) + "\n#"


@pytest.fixture
def render():
    env = environment(undefined=jinja2.StrictUndefined, trim_blocks=True)
    env.filters["comment"] = comment
    env.filters["quote"] = lambda text: shlex.quote(str(text))  # Ansible's quote

    def _render(name, **variables):
        variables.setdefault("mesh_burst_pools", [])
        variables.setdefault("mesh_burst_nodes", [])
        variables.setdefault("slurm_node_registers_dynamic", variables.get("slurm_membership_used") == "dynamic"
                             and variables.get("inventory_hostname") not in variables["mesh_burst_nodes"])  # fmt: skip
        text = env.get_template(name).render(ansible_managed="Ansible managed", **variables)
        return [line for line in text.splitlines() if line and not line.startswith("#")]

    return _render


@pytest.fixture
def mesh(hw):
    def facts(lscpu, free, smi=None):
        return hw.node_facts(
            lscpu=fixture_text(lscpu), free=fixture_text(free), nvidia_smi=fixture_text(smi) if smi else None
        )

    hostvars = {
        "desk": {
            "mesh_address": "100.101.1.10",
            "mesh_provider": "local",
            "mesh_hw": facts("lscpu/desktop-amd-ryzen9-5950x-smt.txt", "free/procps4-64gb-workstation-no-swap.txt"),
        },
        "ps-a6000": {
            "mesh_address": "100.101.1.11",
            "mesh_provider": "paperspace",
            "mesh_hw": facts(
                "lscpu/gcp-tpu-vm-amd-epyc-9b14-kvm-smt.txt",
                "free/procps4-32gb-proxmox.txt",
                "nvidia-smi-L/4x-rtx-3090.txt",
            ),
        },
    }
    return hostvars


def common(hostvars, gpu_nodes):
    return {
        "hostvars": hostvars,
        "slurm_nodes": sorted(hostvars),
        "slurm_gpu_nodes": gpu_nodes,
        "slurm_partition_name": "main",
        "slurm_gpu_partition_name": "gpu",
        "slurm_conf_dir": "/etc/slurm",
        "slurm_partition_access": "",
        "slurm_jobless_nodes": [],
        "slurm_feature_controller": ROLE_VARS["slurm_feature_controller"],
    }


def test_nodes_conf(render, mesh):
    lines = render("nodes.conf.j2", **common(mesh, ["ps-a6000"]))
    assert lines == [
        "NodeName=desk NodeAddr=100.101.1.10 CPUs=32 Sockets=1 CoresPerSocket=16 ThreadsPerCore=2 RealMemory=60964"
        " Feature=local State=UNKNOWN",
        "NodeName=ps-a6000 NodeAddr=100.101.1.11 CPUs=44 Sockets=1 CoresPerSocket=22 ThreadsPerCore=2"
        " RealMemory=30368 Gres=gpu:geforce_rtx_3090:4 Feature=geforce_rtx_3090,paperspace State=UNKNOWN",
        "PartitionName=main Nodes=desk,ps-a6000 Default=YES MaxTime=INFINITE State=UP",
        "PartitionName=gpu Nodes=ps-a6000 MaxTime=INFINITE State=UP",
    ]


def test_no_gpu_partition_without_gpus(render, mesh):
    del mesh["ps-a6000"]
    lines = render("nodes.conf.j2", **common(mesh, []))
    assert not any(line.startswith("PartitionName=gpu") for line in lines)


def test_gres_conf(render, mesh):
    lines = render("gres.conf.j2", **common(mesh, ["ps-a6000"]))
    assert lines == [f"NodeName=ps-a6000 Name=gpu Type=geforce_rtx_3090 File=/dev/nvidia{i}" for i in range(4)]


def slurm_conf(render, mesh, gpu_nodes, membership="dynamic", **extra):
    variables = {
        **common(mesh, gpu_nodes),
        "slurm_cluster_name": "mesh",
        "slurm_controller": "desk",
        "slurm_controller_address": "100.101.1.10",
        "slurm_controller_hostname": "desk",
        "slurm_ctld_port": 6817,
        "slurm_slurmd_port": 6818,
        "slurm_srun_port_range": DEFAULTS["slurm_srun_port_range"],
        "slurm_membership_used": membership,
        "slurm_max_node_count": 1024,
        "slurm_feature_all": "meshctl",
        "slurm_feature_gpu": "gpu",
        "slurm_user": "slurm",
        "slurm_state_dir": "/var/lib/slurm/slurmctld",
        "slurm_spool_dir": "/var/lib/slurm/slurmd",
        "slurm_log_dir": "/var/log/slurm",
        "slurm_node_log_dir": "/var/log/slurmd",
        "slurm_select_type_parameters": "CR_Core_Memory",
        "slurm_proctrack": "proctrack/cgroup",
        "slurm_task": "task/cgroup,task/affinity",
        "slurm_return_to_service": 2,
        "slurm_requeue_exit": DEFAULTS["slurm_requeue_exit"],
        "slurm_slurmd_timeout": DEFAULTS["slurm_slurmd_timeout"],
        "slurm_requeue_delay": DEFAULTS["slurm_requeue_delay"],
        "slurm_health_program": DEFAULTS["slurm_health_program"],
        "slurm_health_check_interval": DEFAULTS["slurm_health_check_interval"],
        "slurm_config_extra": {},
        "slurm_task_prolog_path": "/usr/local/libexec/meshctl/slurm-task-prolog",
        "slurm_accounting": DEFAULTS["slurm_accounting"],
        "slurm_disable_root_jobs": DEFAULTS["slurm_disable_root_jobs"],
        "slurm_job_users_only": False,
        "slurm_dbd_port": DEFAULTS["slurm_dbd_port"],
        "slurm_power_save": False,
        **extra,
    }
    return render("slurm.conf.j2", **variables)


def test_slurm_conf_names_the_controller_by_mesh_address_and_serves_configs(render, mesh):
    lines = slurm_conf(render, mesh, ["ps-a6000"])
    assert "SlurmctldHost=desk(100.101.1.10)" in lines
    assert not any(line.startswith("ControlMachine") for line in lines)
    assert "SelectType=select/cons_tres" in lines
    assert "SlurmctldParameters=enable_configless" in lines
    assert "TaskProlog=/usr/local/libexec/meshctl/slurm-task-prolog" in lines
    assert (lines[2], lines[3]) == ("SlurmctldPort=6817", "SlurmdPort=6818")


def test_dynamic_membership_has_no_node_lines(render, mesh):
    lines = slurm_conf(render, mesh, ["ps-a6000"])
    assert not any(line.startswith(("NodeName=", "Include")) for line in lines)
    assert "MaxNodeCount=1024" in lines and "TreeWidth=65533" in lines
    assert lines[-4:] == [
        "NodeSet=meshctl_nodes Feature=meshctl",
        "NodeSet=meshctl_gpus Feature=gpu",
        "PartitionName=main Nodes=meshctl_nodes Default=YES MaxTime=INFINITE State=UP",
        "PartitionName=gpu Nodes=meshctl_gpus MaxTime=INFINITE State=UP",
    ]
    # A node joining, with or without GPUs, changes nothing in slurm.conf.
    assert slurm_conf(render, mesh, []) == lines
    del mesh["ps-a6000"]
    assert slurm_conf(render, mesh, []) == lines


def test_static_membership_includes_the_node_lines(render, mesh):
    lines = slurm_conf(render, mesh, ["ps-a6000"], membership="static")
    assert lines[-1] == "Include /etc/slurm/nodes.conf"
    assert not any(line.startswith(("NodeSet", "MaxNodeCount")) for line in lines)


def test_a_job_whose_node_fails_is_requeued_and_a_script_may_ask_to_run_again(render, mesh):
    lines = slurm_conf(render, mesh, [])
    assert "JobRequeue=1" in lines and "RequeueExit=85" in lines and "SlurmdTimeout=120" in lines
    assert "AuthInfo=cred_expire=120" in lines  # the requeue delay: Slurm's own default unless set
    assert "AuthInfo=cred_expire=30" in slurm_conf(render, mesh, [], slurm_requeue_delay=30)
    assert "HealthCheckProgram=/usr/local/libexec/meshctl/node-health" in lines and "HealthCheckNodeState=ANY" in lines
    ddp = (ROLES.parent / "examples" / "ddp" / "ddp.sbatch").read_text()
    assert "awk '/^RequeueExit / " in ddp and "#SBATCH --requeue" in ddp  # the example reads the mesh's code


def test_gres_types_always(render, mesh):
    assert "GresTypes=gpu" in slurm_conf(render, mesh, [])


def test_extra_settings_are_sorted_and_written(render, mesh):
    lines = slurm_conf(render, mesh, [], membership="static", slurm_config_extra={"MaxJobCount": 5000, "KillWait": 60})
    assert lines.index("KillWait=60") < lines.index("MaxJobCount=5000") < lines.index("Include /etc/slurm/nodes.conf")


def slurmd_unit(render, mesh, name, membership, template="slurmd.service.conf.j2", **extra):
    feature = extra.pop("slurm_power_feature", "meshctl_on")
    jobless = extra.pop("slurm_jobless_nodes", [])
    extra.setdefault("mesh_pod", False)
    extra.setdefault("mesh_power_plan", {"nodes": {}, "refused": {}})
    extra.setdefault("mesh_burst_nodes", [])
    return render(
        template,
        **extra,
        inventory_hostname=name,
        mesh_provider=mesh[name]["mesh_provider"],
        mesh_hw=mesh[name]["mesh_hw"],
        slurm_membership_used=membership,
        slurm_controller_address="100.101.1.10",
        slurm_ctld_port=6817,
        slurm_feature_all="meshctl",
        slurm_feature_gpu="gpu",
        slurm_feature_controller=ROLE_VARS["slurm_feature_controller"],
        slurm_jobless_nodes=jobless,
        slurm_slurmd_restart_sec=10,
        slurm_power_feature=feature,
        slurm_slurmd_start="/usr/local/libexec/meshctl/slurmd-start",
        slurm_spool_dir="/var/lib/slurm/slurmd",
        slurm_degraded_conf_dir="/run/meshctl/slurmd-degraded",
        slurm_client_conf_link="/run/slurm/conf",
    )


def started(render, mesh, name, membership, **extra):
    """The command slurmd-start runs when every GPU device is there (its first exec)."""
    script = slurmd_unit(render, mesh, name, membership, template="slurmd_start.sh.j2", **extra)
    return "ExecStart=" + next(line.strip()[len("exec ") :] for line in script if line.strip().startswith("exec "))


def test_dynamic_slurmd_registers_itself_with_its_facts(render, mesh):
    lines = slurmd_unit(render, mesh, "ps-a6000", "dynamic")
    start = [line for line in lines if line.startswith("ExecStart=")]
    assert start == ["ExecStart=", "ExecStart=/usr/local/libexec/meshctl/slurmd-start"]
    assert [started(render, mesh, "ps-a6000", "dynamic")] == [
        "ExecStart=/usr/sbin/slurmd -D -s -N ps-a6000 --conf-server 100.101.1.10:6817 -Z --conf "
        '"CPUs=44 Sockets=1 CoresPerSocket=22 ThreadsPerCore=2 RealMemory=30368 Gres=gpu:geforce_rtx_3090:4 '
        'Feature=meshctl,gpu,meshctl_on,geforce_rtx_3090,paperspace"',
    ]
    assert "ConditionPathExists=" in lines and "Restart=always" in lines  # configless; comes back by itself
    desk = started(render, mesh, "desk", "dynamic")
    assert desk.endswith('RealMemory=60964 Feature=meshctl,meshctl_on,local"')  # no GPUs: no Gres, not in the gpu set


def run_start(render, mesh, tmp_path, membership, present, cached=True):
    """slurmd-start of a two-GPU node (two types) run here: its devices are files under tmp_path (those
    in ``present`` exist), slurmd a stand-in that prints its arguments and the gres.conf it reads."""
    hw = dict(mesh["ps-a6000"]["mesh_hw"])
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    hw["gpus"] = [{**hw["gpus"][0], "type": "rtx_a5000", "file": str(dev / "nvidia0")},
                  {**hw["gpus"][1], "type": "rtx_4500_ada", "file": str(dev / "nvidia1")}]  # fmt: skip
    for name in present:
        (dev / name).touch()
    spool, degraded = tmp_path / "spool", tmp_path / "run" / "degraded"
    cache = spool / "conf-cache"
    if cached:  # what slurmd fetched from the head last time (configless)
        cache.mkdir(parents=True, exist_ok=True)
        (cache / "slurm.conf").write_text("ClusterName=mesh\n")
        (cache / "plugstack.conf").write_text("include /etc/slurm/plugstack.conf.d/*.conf\n")
        (cache / "gres.conf").write_text(
            f"NodeName=ps-a6000 Name=gpu Type=rtx_a5000 File={dev}/nvidia0\n"
            f"NodeName=ps-a6000 Name=gpu Type=rtx_4500_ada File={dev}/nvidia1\n"
            f"NodeName=other Name=gpu Type=rtx_a5000 File={dev}/nvidia1\n"
        )
    slurmd = tmp_path / "slurmd"
    slurmd.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\nfor a; do case "$a" in */slurm.conf) '
                      'echo ---; cat "${a%/slurm.conf}/gres.conf";; esac; done\n')  # fmt: skip
    slurmd.chmod(0o755)
    bin_dir = tmp_path / "bin"  # scontrol: records what it is asked
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {tmp_path}/scontrol.log\n')
    (bin_dir / "scontrol").chmod(0o755)
    env = environment(undefined=jinja2.StrictUndefined, trim_blocks=True)
    env.filters["comment"] = comment
    env.filters["quote"] = lambda text: shlex.quote(str(text))
    script = env.get_template("slurmd_start.sh.j2").render(
        ansible_managed="Ansible managed", inventory_hostname="ps-a6000", mesh_provider="paperspace", mesh_hw=hw,
        mesh_pod=False, mesh_power_plan={"nodes": {}}, slurm_membership_used=membership,
        slurm_node_registers_dynamic=membership == "dynamic",
        slurm_controller_address="100.101.1.10", slurm_ctld_port=6817, slurm_feature_all="meshctl",
        slurm_feature_gpu="gpu", slurm_power_feature="meshctl_on", slurm_spool_dir=str(spool),
        slurm_feature_controller="meshctl_controller", slurm_jobless_nodes=[],
        slurm_degraded_conf_dir=str(degraded), slurm_client_conf_link=str(tmp_path / "run" / "slurm" / "conf"),
    ).replace("/usr/sbin/slurmd", str(slurmd))  # fmt: skip
    path = f"{bin_dir}:{os.environ['PATH']}"
    done = subprocess.run(
        ["sh", "-c", script], capture_output=True, text=True, timeout=30, env={**os.environ, "PATH": path}
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), done.stderr


def test_slurmd_starts_configless_when_every_gpu_device_is_there(render, mesh, tmp_path):
    args, said = run_start(render, mesh, tmp_path, "dynamic", ["nvidia0", "nvidia1"])
    assert args[:6] == ["-D", "-s", "-N", "ps-a6000", "--conf-server", "100.101.1.10:6817"]
    assert args[6:8] == ["-Z", "--conf"] and " Gres=gpu:rtx_4500_ada:1,gpu:rtx_a5000:1 " in args[8]
    assert "---" not in args and said == ""


def test_a_node_without_a_gpu_device_starts_from_its_last_configuration_without_it(render, mesh, tmp_path):
    """A rented VM rebooted without its NVIDIA driver: slurmd would wait 20 s for /dev/nvidia1 (named
    in the head's gres.conf) and exit, for good. It registers with what it has instead."""
    args, said = run_start(render, mesh, tmp_path, "dynamic", ["nvidia0"])
    degraded = tmp_path / "run" / "degraded"
    assert args[:4] == ["-D", "-s", "-N", "ps-a6000"] and "--conf-server" not in args
    assert args[4:8] == ["-f", f"{degraded}/slurm.conf", "-Z", "--conf"]
    assert " Gres=gpu:rtx_a5000:1 " in args[8] and "rtx_4500_ada:" not in args[8]
    assert "Feature=meshctl,gpu,meshctl_on,rtx_a5000,rtx_4500_ada,paperspace" in args[8]  # partitions unchanged
    gres = args[args.index("---") + 1 :]
    assert gres == [f"NodeName=ps-a6000 Name=gpu Type=rtx_a5000 File={tmp_path}/dev/nvidia0",
                    f"NodeName=other Name=gpu Type=rtx_a5000 File={tmp_path}/dev/nvidia1"]  # fmt: skip
    assert (degraded / "plugstack.conf").exists() and f"GPU devices missing: {tmp_path}/dev/nvidia1" in said
    # drained before it registers, in the health check's words (Slurm 24.11 will not drain it after)
    assert (tmp_path / "scontrol.log").read_text().splitlines() == [
        f"update nodename=ps-a6000 state=drain reason=meshctl health: GPUs seen 1 of 2, missing {tmp_path}/dev/nvidia1"
    ]
    link = tmp_path / "run" / "slurm" / "conf"  # Slurm's commands on the node read the same files
    assert link.is_symlink() and link.resolve() == degraded.resolve()
    args, _ = run_start(render, mesh, tmp_path, "dynamic", ["nvidia0", "nvidia1"])  # back: configless again
    assert "--conf-server" in args and not link.exists() and not degraded.exists()
    for other in ("none", "static", "fresh"):
        (tmp_path / other).mkdir()
    none, _ = run_start(render, mesh, tmp_path / "none", "dynamic", [])
    assert "Gres=" not in none[none.index("--conf") + 1]  # no GPU left: none registered
    static, _ = run_start(render, mesh, tmp_path / "static", "static", ["nvidia1"])
    assert static[4:6] == ["-f", f"{tmp_path}/static/run/degraded/slurm.conf"] and "-Z" not in static
    # never fetched a configuration: configless, as before (slurmd says what it waits for)
    fresh, said = run_start(render, mesh, tmp_path / "fresh", "dynamic", ["nvidia0"], cached=False)
    assert "--conf-server" in fresh and "no configuration fetched yet" in said


def test_static_slurmd_only_fetches_its_config(render, mesh):
    start = [started(render, mesh, "desk", "static")]
    assert start == ["ExecStart=/usr/sbin/slurmd -D -s -N desk --conf-server 100.101.1.10:6817"]


def test_a_node_without_tun_starts_slurmd_through_tailscaleds_proxy(render, mesh):
    wrapper = ["/usr/bin/proxychains4", "-q", "-f", "/etc/meshctl/tailnet-proxychains.conf"]
    assert [started(render, mesh, "desk", "static", tailscale_outbound_wrapper=wrapper)] == [
        "ExecStart=/usr/bin/proxychains4 -q -f /etc/meshctl/tailnet-proxychains.conf "
        "/usr/sbin/slurmd -D -s -N desk --conf-server 100.101.1.10:6817"
    ]
    # the same command line for supervisor on a pod (one line, what the program file runs)
    command = slurmd_unit(render, mesh, "ps-a6000", "dynamic", template="slurmd_command.j2",
                          tailscale_outbound_wrapper=wrapper)  # fmt: skip
    assert len(command) == 1 and command[0].startswith("/usr/bin/proxychains4 -q -f ")
    assert command[0].endswith('Feature=meshctl,gpu,meshctl_on,geforce_rtx_3090,paperspace"')
    assert slurmd_unit(render, mesh, "desk", "static", template="slurmd_command.j2", tailscale_outbound_wrapper=[]) == [
        "/usr/sbin/slurmd -D -s -N desk --conf-server 100.101.1.10:6817"
    ]


def test_a_pod_slurm_stops_when_idle_reports_its_start_as_its_boot(render, mesh):
    """A container shares its host's uptime: slurmd -b, or slurmctld waits for a boot after its resume."""
    plan = {"nodes": {"desk": {"provider": "runpod", "id": "p1", "idle_stop": 60}}, "refused": {}}
    pod = slurmd_unit(render, mesh, "desk", "static", template="slurmd_command.j2", tailscale_outbound_wrapper=[],
                      mesh_pod=True, mesh_power_plan=plan)  # fmt: skip
    assert pod == ["/usr/sbin/slurmd -D -s -b -N desk --conf-server 100.101.1.10:6817"]
    kept_up = slurmd_unit(render, mesh, "desk", "static", template="slurmd_command.j2", tailscale_outbound_wrapper=[],
                          mesh_pod=True)  # fmt: skip
    assert kept_up == ["/usr/sbin/slurmd -D -s -N desk --conf-server 100.101.1.10:6817"]
    # a pool's pod: rented at Slurm's resume
    pooled = slurmd_unit(render, mesh, "desk", "static", template="slurmd_command.j2", tailscale_outbound_wrapper=[],
                         mesh_pod=True, mesh_burst_nodes=["desk"])  # fmt: skip
    assert pooled == ["/usr/sbin/slurmd -D -s -b -N desk --conf-server 100.101.1.10:6817"]
    vm = started(render, mesh, "desk", "static", mesh_power_plan=plan)  # a VM boots: no -b
    assert vm == "ExecStart=/usr/sbin/slurmd -D -s -N desk --conf-server 100.101.1.10:6817"


def test_task_prolog_exports_the_interface_holding_the_mesh_address(render, tmp_path):
    """Render the TaskProlog and run it with an `ip` that prints a machine with docker0, a public
    NIC and tailscale0: the collective libraries get tailscale0, the one holding the mesh address."""
    import subprocess

    env = environment(trim_blocks=True)
    env.filters["comment"] = comment
    script = env.get_template("task_prolog.sh.j2").render(
        ansible_managed="Ansible managed",
        mesh_address="100.101.1.11",
        slurm_task_environment={"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_FAMILY": "AF_INET"},
        slurm_task_environment_dir=str(tmp_path / "no-such-folder"),
    )
    (tmp_path / "prolog").write_text(script)
    fake_ip = tmp_path / "bin" / "ip"  # test double: what `ip -o -4 addr show` prints on a GPU VM
    fake_ip.parent.mkdir()
    fake_ip.write_text(
        "#!/bin/sh\ncat <<'OUT'\n"
        "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
        "2: ens5    inet 203.0.113.9/24 brd 203.0.113.255 scope global ens5\\       valid_lft forever\n"
        "3: docker0    inet 172.17.0.1/16 brd 172.17.255.255 scope global docker0\\       valid_lft forever\n"
        "4: tailscale0    inet 100.101.1.11/32 scope global tailscale0\\       valid_lft forever\n"
        "OUT\n"
    )
    fake_ip.chmod(0o755)
    run = subprocess.run(["sh", str(tmp_path / "prolog")], capture_output=True, text=True, check=True,
                         env={"PATH": f"{fake_ip.parent}:/usr/bin:/bin"})  # fmt: skip
    assert run.stdout.splitlines() == [
        "export NCCL_SOCKET_IFNAME=tailscale0",
        "export GLOO_SOCKET_IFNAME=tailscale0",
        "export OMPI_MCA_btl_tcp_if_include=tailscale0",
        "export MESH_ADDRESS=100.101.1.11",
        "export NCCL_IB_DISABLE=1",
        "export NCCL_SOCKET_FAMILY=AF_INET",
    ]
    # Userspace Tailscale (a pod): the address is on no interface, so no interface is forced.
    (tmp_path / "prolog").write_text(script.replace("100.101.1.11", "100.101.1.99"))
    run = subprocess.run(["sh", str(tmp_path / "prolog")], capture_output=True, text=True, check=True,
                         env={"PATH": f"{fake_ip.parent}:/usr/bin:/bin"})  # fmt: skip
    assert "IFNAME" not in run.stdout and "export MESH_ADDRESS=100.101.1.99" in run.stdout


@pytest.mark.parametrize("plugin", ["cgroup/v1", "cgroup/v2", "autodetect"])
def test_cgroup_conf_names_the_chosen_cgroup_plugin(render, plugin):
    lines = render("cgroup.conf.j2", slurm_cgroup_plugin=plugin)
    assert lines[0] == f"CgroupPlugin={plugin}"
    assert {"ConstrainCores=yes", "ConstrainDevices=yes", "ConstrainRAMSpace=yes"} <= set(lines)


def test_cgroup_conf_for_slurm_21_08_has_no_cgroup_plugin_setting(render):
    # 21.08 does not know CgroupPlugin (22.05 added it) and would refuse the file.
    assert not any(line.startswith("CgroupPlugin") for line in render("cgroup.conf.j2", slurm_cgroup_plugin=None))


def test_srun_listens_on_the_fixed_range_from_the_role_defaults(render, mesh):
    lines = slurm_conf(render, mesh, [])
    assert DEFAULTS["slurm_srun_port_range"] == "60001-60100"
    assert "SrunPortRange=60001-60100" in lines
    first, last = map(int, DEFAULTS["slurm_srun_port_range"].split("-"))
    assert 1024 < first < last <= 65535


def test_slurmctld_host_is_the_machines_hostname_reached_by_the_mesh_address(render, mesh):
    # A desktop whose hostname is DESKTOP-7F3 is the node `desk`: slurmctld checks its hostname.
    lines = slurm_conf(render, mesh, [], slurm_controller_hostname="DESKTOP-7F3")
    assert "SlurmctldHost=DESKTOP-7F3(100.101.1.10)" in lines


def test_root_runs_no_job_unless_told(render, mesh):
    """DisableRootJobs=YES by default (job users submit jobs); one variable turns it off."""
    assert DEFAULTS["slurm_disable_root_jobs"] is True
    assert "DisableRootJobs=YES" in slurm_conf(render, mesh, [])
    assert "DisableRootJobs=NO" in slurm_conf(render, mesh, [], slurm_disable_root_jobs=False)


def test_accounting_is_off_by_default(render, mesh):
    assert DEFAULTS["slurm_accounting"] is False
    assert not any(line.startswith("Accounting") for line in slurm_conf(render, mesh, []))


def test_accounting_points_slurmctld_at_slurmdbd_on_the_heads_mesh_address(render, mesh):
    lines = slurm_conf(render, mesh, [], slurm_accounting=True)
    assert [line for line in lines if line.startswith("Accounting")] == [
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=100.101.1.10",
        "AccountingStoragePort=6819",
        "AccountingStorageTRES=gres/gpu",  # GPU-hours in sacct's AllocTRES (`meshctl usage`)
    ]


def test_slurmdbd_conf_uses_the_socket_and_no_password(render):
    lines = render(
        "slurmdbd.conf.j2",
        slurm_dbd_port=6819,
        slurm_user="slurm",
        slurm_log_dir="/var/log/slurm",
        slurm_accounting_db_name=DEFAULTS["slurm_accounting_db_name"],
        slurm_accounting_dbd_pid_file=ROLE_VARS["slurm_accounting_dbd_pid_file"],
    )
    settings = dict(line.split("=", 1) for line in lines)
    assert settings["PidFile"] == "/run/slurmdbd/slurmdbd.pid"  # the runtime folder its unit drop-in makes
    assert settings["StorageType"] == "accounting_storage/mysql"
    assert settings["StorageHost"] == "localhost" and settings["StorageUser"] == "slurm"
    assert settings["StorageLoc"] == "slurm_acct_db" and settings["DbdPort"] == "6819"
    assert "StoragePass" not in settings


def test_mariadb_settings_meet_what_slurmdbd_asks(render):
    lines = render(
        "mariadb-slurmdbd.cnf.j2", slurm_accounting_mariadb_settings=DEFAULTS["slurm_accounting_mariadb_settings"]
    )
    assert lines == ["[mysqld]", "innodb_buffer_pool_size = 512M", "innodb_lock_wait_timeout = 900"]


def test_task_prolog_exports_the_environment_files_lines_and_nothing_else(tmp_path):
    """The mlflow role's account file reaches every task; a line that is not NAME=plain-value
    (a command substitution, spaces, a comment) is never printed as an export."""
    import subprocess

    env = environment(trim_blocks=True)
    env.filters["comment"] = comment
    folder = tmp_path / "task-env.d"
    folder.mkdir()
    (folder / "mlflow.env").write_text(
        "MLFLOW_TRACKING_USERNAME=mesh\nMLFLOW_TRACKING_PASSWORD=0123abcd\n"
        "EVIL=$(touch /tmp/owned)\nSPACED=a b\n# a comment\n"
    )
    (folder / "notes.txt").write_text("IGNORED=1\n")
    import getpass

    mine = folder / "users" / getpass.getuser()
    mine.mkdir(parents=True)
    (mine / "mlflow.env").write_text("MLFLOW_TRACKING_USERNAME=me\n")
    (folder / "users" / "someone-else").mkdir()
    (folder / "users" / "someone-else" / "mlflow.env").write_text("MLFLOW_TRACKING_USERNAME=someone-else\n")
    script = env.get_template("task_prolog.sh.j2").render(
        ansible_managed="Ansible managed", mesh_address="100.101.1.11", slurm_task_environment={},
        slurm_task_environment_dir=str(folder),
    )  # fmt: skip
    run = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    exports = [line for line in run.stdout.splitlines() if "MESH_ADDRESS" not in line and "IFNAME" not in line]
    exports = [line for line in exports if "btl_tcp" not in line]
    assert exports == [
        "export MLFLOW_TRACKING_USERNAME=mesh",
        "export MLFLOW_TRACKING_PASSWORD=0123abcd",
        "export MLFLOW_TRACKING_USERNAME=me",
    ]  # the job user's own folder, no one else's


def test_a_node_slurm_may_stop_registers_with_its_idle_time_every_other_with_meshctl_on(render, mesh):
    stoppable = started(render, mesh, "ps-a6000", "dynamic", slurm_power_feature="meshctl_idle_1800")
    kept = started(render, mesh, "desk", "dynamic")
    assert "Feature=meshctl,gpu,meshctl_idle_1800," in stoppable
    assert "Feature=meshctl,meshctl_on,local" in kept


def role_power_values(host: str, idle: dict[str, int]) -> dict:
    """The role's own expressions (vars/main.yml, defaults/main.yml) for HOST, evaluated by Ansible."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    role_vars = yaml.safe_load((ROLES / "slurm_defaults" / "vars" / "main.yml").read_text())
    names = ("slurm_power_feature", "slurm_power_feature_prefix", "slurm_power_save", "slurm_idle_times")
    variables = {
        "mesh_power_plan": {"nodes": {name: {"idle_stop": s} for name, s in idle.items()}, "refused": {}},
        "slurm_membership_used": "dynamic",
        "inventory_hostname": host,
        **{name: role_vars[name] for name in names},
        "slurm_suspend_time": DEFAULTS["slurm_suspend_time"],
    }
    templar = Templar(loader=DataLoader(), variables=variables)
    wanted = ("slurm_power_feature", "slurm_power_save", "slurm_idle_times", "slurm_suspend_time")
    return {name: templar.template(trust_as_template(variables[name])) for name in wanted}


def test_each_node_keeps_its_own_idle_time_and_none_is_stopped_sooner_than_it_asked():
    idle = {"ps-a": 1800, "ps-b": 3600, "ps-c": 1800}
    assert role_power_values("ps-a", idle)["slurm_power_feature"] == "meshctl_idle_1800"
    assert role_power_values("ps-b", idle)["slurm_power_feature"] == "meshctl_idle_3600"
    head = role_power_values("desk", idle)
    assert head["slurm_power_feature"] == "meshctl_on"
    assert head["slurm_idle_times"] == [1800, 3600]  # one partition per idle time, shortest first
    assert head["slurm_suspend_time"] == 3600  # the global fallback: the longest asked for
    assert role_power_values("desk", {})["slurm_power_save"] is False
    assert role_power_values("desk", {})["slurm_suspend_time"] == -1


def test_power_saving_names_the_heads_program_and_keeps_every_other_node_up(render, mesh):
    off = slurm_conf(render, mesh, ["ps-a6000"])
    assert not [line for line in off if line.startswith(("Suspend", "Resume"))]
    assert not [line for line in off if "meshctl_idle" in line or "meshctl_on" in line]
    on = slurm_conf(render, mesh, ["ps-a6000"], slurm_power_save=True, slurm_suspend_time=3600,
                    slurm_suspend_timeout=120, slurm_resume_timeout=900, slurm_idle_times=[1800, 3600],
                    slurm_power_feature_prefix="meshctl_idle_",
                    mesh_power_program="/usr/local/sbin/meshctl-power")  # fmt: skip
    assert [line for line in on if line.startswith(("Suspend", "Resume"))] == [
        "SuspendProgram=/usr/local/sbin/meshctl-power-suspend",
        "ResumeProgram=/usr/local/sbin/meshctl-power-resume",
        "ResumeFailProgram=/usr/local/sbin/meshctl-power-fail",
        "SuspendTime=3600",
        "SuspendTimeout=120",
        "ResumeTimeout=900",
        "SuspendExcParts=meshctl_on",
    ]
    assert "NodeSet=meshctl_on Feature=meshctl_on" in on
    assert "PartitionName=meshctl_on Nodes=meshctl_on Hidden=YES State=INACTIVE" in on
    # Each idle time its own hidden partition: Slurm gives a node its partitions' longest SuspendTime.
    assert on[-4:] == [
        "NodeSet=meshctl_idle_1800 Feature=meshctl_idle_1800",
        "PartitionName=meshctl_idle_1800 Nodes=meshctl_idle_1800 Hidden=YES State=INACTIVE SuspendTime=1800",
        "NodeSet=meshctl_idle_3600 Feature=meshctl_idle_3600",
        "PartitionName=meshctl_idle_3600 Nodes=meshctl_idle_3600 Hidden=YES State=INACTIVE SuspendTime=3600",
    ]


def test_jobs_run_only_as_job_users_refused_at_submission_and_by_the_partitions(render, mesh):
    """DisableRootJobs refuses UID 0 only, and AllowGroups lets SlurmUser through; a node's
    root claimed slurm's and mlflow's UIDs to run jobs on the head. Shown on real daemons in
    molecule/resources/verify_trust.yml."""
    assert DEFAULTS["slurm_job_users_only"] is True
    access = " AllowGroups=meshjobs"
    for membership in ("dynamic", "static"):
        lines = slurm_conf(render, mesh, ["ps-a6000"], membership, slurm_job_users_only=True,
                           slurm_partition_access=access)  # fmt: skip
        assert "JobSubmitPlugins=lua" in lines and "GroupUpdateTime=30" in lines
        assert "SlurmdLogFile=/var/log/slurmd/slurmd.log" in lines  # root's folder, not the slurm user's
        if membership == "dynamic":
            partitions = [line for line in lines if line.startswith(("PartitionName=main", "PartitionName=gpu"))]
            assert len(partitions) == 2 and all(line.endswith(access) for line in partitions)
    nodes = render("nodes.conf.j2", **{**common(mesh, ["ps-a6000"]), "slurm_partition_access": access})
    assert [line for line in nodes if line.startswith("PartitionName")] == [
        "PartitionName=main Nodes=desk,ps-a6000 Default=YES MaxTime=INFINITE State=UP AllowGroups=meshjobs",
        "PartitionName=gpu Nodes=ps-a6000 MaxTime=INFINITE State=UP AllowGroups=meshjobs",
    ]
    lua = render("job_submit.lua.j2", job_users_list=[{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2002}])
    assert "  [2001] = true," in lua and "  [2002] = true," in lua
    assert "  if job_users[job_desc.user_id] ~= nil then" in lua and "  return slurm.ERROR" in lua
    nobody = render("job_submit.lua.j2", job_users_list=[])
    assert nobody[nobody.index("local job_users = {") + 1] == "}"  # no job user yet: nobody may submit


def test_the_head_of_a_mesh_with_a_rented_node_runs_no_job_unless_told():
    head_runs_jobs = resources.plugin("module_utils.mesh_slurm_nodes").head_runs_jobs
    assert DEFAULTS["slurm_head_runs_jobs"] == "auto"
    assert head_runs_jobs("auto", ["local", "generic", "local"]) is True  # a desktop-only mesh keeps them
    for rented in ("lambda", "runpod", "paperspace", "any"):  # any: a burst pool's, from whichever has an offer
        assert head_runs_jobs("auto", ["local", rented]) is False
    assert head_runs_jobs(True, ["runpod"]) is True and head_runs_jobs("yes", ["runpod"]) is True
    assert head_runs_jobs(False, ["local"]) is False and head_runs_jobs("off", []) is False
    with pytest.raises(ValueError, match="slurm_head_runs_jobs is 'sometimes': use auto, true or false"):
        head_runs_jobs("sometimes", [])


def role_head_values(providers: dict[str, str], setting="auto", pools=()) -> dict:
    """Role slurm's own expressions for the head and its jobs (vars/main.yml), rendered with Ansible's
    core filters and this collection's over a mesh whose nodes have PROVIDERS (the first is the head)."""
    from ansible.plugins.filter.core import FilterModule as Core

    env = environment()
    env.filters.update(Core().filters())
    names = list(providers)
    variables = {
        "groups": {"all": names, "head": names[:1], "compute": names},
        "hostvars": {name: {"mesh_provider": provider} for name, provider in providers.items()},
        "slurm_head_runs_jobs": setting,
        "slurm_controller_group": "head",
        "slurm_compute_group": "compute",
        "mesh_burst_pools": list(pools),
    }
    for name in ("slurm_controller", "slurm_nodes", "slurm_head_jobs", "slurm_jobless_nodes"):
        variables[name] = yaml.safe_load(env.from_string(ROLE_VARS[name].strip()).render(**variables))
    return {name: variables[name] for name in ("slurm_head_jobs", "slurm_jobless_nodes")}


def test_the_roles_decide_the_heads_jobs_from_every_nodes_provider():
    own = role_head_values({"desk": "local", "cpu1": "generic"})
    assert own == {"slurm_head_jobs": True, "slurm_jobless_nodes": []}
    rented = role_head_values({"desk": "local", "rp1": "runpod"})
    assert rented == {"slurm_head_jobs": False, "slurm_jobless_nodes": ["desk"]}
    assert role_head_values({"desk": "local", "rp1": "runpod"}, True)["slurm_jobless_nodes"] == []
    assert role_head_values({"desk": "local"}, "false")["slurm_jobless_nodes"] == ["desk"]
    # A burst pool rents machines too, from a provider named or from any (whatever runs now).
    for chosen in (["any"], ["runpod"], ["lambda", "paperspace"]):
        pooled = role_head_values({"desk": "local", "cpu1": "generic"}, pools=[{"name": "h100", "providers": chosen}])
        assert pooled == {"slurm_head_jobs": False, "slurm_jobless_nodes": ["desk"]}, chosen


def test_a_head_that_runs_no_job_registers_in_a_hidden_partition_no_job_may_use(render, mesh):
    head = started(render, mesh, "desk", "dynamic", slurm_jobless_nodes=["desk"])
    assert head.endswith('Feature=meshctl_controller,meshctl_on,local"')  # not meshctl, nor gpu: no partition of jobs
    node = started(render, mesh, "ps-a6000", "dynamic", slurm_jobless_nodes=["desk"])
    assert "Feature=meshctl,gpu,meshctl_on," in node  # the others as before
    lines = slurm_conf(render, mesh, ["ps-a6000"], slurm_jobless_nodes=["desk"])
    assert lines[-2:] == [
        "NodeSet=meshctl_controller Feature=meshctl_controller",
        "PartitionName=meshctl_controller Nodes=meshctl_controller Hidden=YES State=INACTIVE",
    ]
    assert not [line for line in slurm_conf(render, mesh, ["ps-a6000"]) if "meshctl_controller" in line]
    static = render("nodes.conf.j2", **{**common(mesh, ["ps-a6000"]), "slurm_jobless_nodes": ["desk"]})
    assert [line for line in static if line.startswith("PartitionName")] == [
        "PartitionName=main Nodes=ps-a6000 Default=YES MaxTime=INFINITE State=UP",
        "PartitionName=gpu Nodes=ps-a6000 MaxTime=INFINITE State=UP",
        "PartitionName=meshctl_controller Nodes=desk Hidden=YES State=INACTIVE",
    ]
    assert static[0].startswith("NodeName=desk ")  # still a node of Slurm's: its slurmd, its health check


def test_a_pool_node_without_facts_never_blocks_the_heads_slurm_files():
    """A burst pool's node in the inventory whose machine is gone, going or not set up yet has no
    facts: Slurm's files are written from the other nodes' (slurm.conf declares it from its pool)."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    role_vars = yaml.safe_load((ROLES / "slurm_defaults" / "vars" / "main.yml").read_text())
    names = ("slurm_fact_nodes", "slurm_any_container", "slurm_gpu_nodes")
    hostvars = {"head": {"inventory_hostname": "head", "mesh_hw": {"in_container": False, "gpus": []}},
                "gpu1": {"inventory_hostname": "gpu1", "mesh_hw": {"in_container": False, "gpus": [{"file": "x"}]}},
                "h100-1": {"inventory_hostname": "h100-1"}}  # fmt: skip
    variables = {"groups": {"compute": ["head", "gpu1", "h100-1"]}, "slurm_compute_group": "compute",
                 "mesh_burst_nodes": ["h100-1", "h100-2"], "hostvars": hostvars,
                 **{name: trust_as_template(role_vars[name]) for name in names}}  # fmt: skip
    templar = Templar(loader=DataLoader(), variables=variables)
    got = {name: templar.template(trust_as_template(f"{{{{ {name} }}}}")) for name in names}
    assert got == {"slurm_fact_nodes": ["gpu1", "head"], "slurm_any_container": False, "slurm_gpu_nodes": ["gpu1"]}
    variables["mesh_burst_nodes"] = []  # were it not a pool's, its missing facts would fail the run
    with pytest.raises(Exception, match="mesh_hw"):
        Templar(loader=DataLoader(), variables=variables).template(trust_as_template("{{ slurm_gpu_nodes }}"))


def test_slurms_daemons_are_started_by_their_own_names_everywhere():
    """Slurm decides which daemon it runs as by its program's name: a slurmd started as Debian's
    file `slurmd-wlm` (the alternatives' target) loads no node record of its own and registers 0 of
    its GPUs (slurmctld drains it: "gres/gpu count reported lower than configured"), as the rented
    bed's first bare machines did. Nothing of meshctl's starts one by another name."""
    root = Path(__file__).resolve().parents[3]
    other = re.compile(r"\b(slurmd|slurmctld|slurmdbd|slurmstepd)-wlm\b")
    starts = [p.relative_to(root).as_posix() for folder in ("roles", "plugins", "meshctl", "playbooks")
              for p in (root / folder).rglob("*") if p.is_file() and p.suffix not in (".pyc", ".md")
              and other.search(p.read_text(errors="replace"))]  # fmt: skip
    assert starts == [], starts
