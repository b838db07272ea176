"""Run playbooks with ansible-runner: a fresh private data dir per run, live progress, failures named.

Secrets never travel as extravars or command-line arguments: roles read them from the mesh's
``secrets/`` folder by path. The private data dir (0700) holds ansible-runner's artifacts for the
run only and is removed afterwards.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from meshctl import core, health, hostkeys, interrupt, resources, ssh, timing
from meshctl.errors import EnvironmentProblem, Interrupted, PlaybookError, unreachable
from meshctl.model import Unsafe, facts_problems
from meshctl.progress import COUNTS, Progress, diff_lines  # noqa: F401 (commands' reporter: runner.Progress)


def __getattr__(name: str):
    """``ansible_runner``, imported when a run needs it (a read such as `status` does not: 40 ms)."""
    if name == "ansible_runner":
        import ansible_runner

        return ansible_runner
    raise AttributeError(name)


# Facts that roles set for meshctl to read back (the tailscale role's before/after of a join).
REPORT_FACTS = ("tailscale_report", "slurm_accounting_usage_report", "doctor_report")
# The hardware facts the mesh_facts module returns; meshctl records them per node after a run.
HW_FACT = "mesh_hw"
# What `meshctl status` is to read on a node (playbooks/tasks/status_request.yml); recorded too.
STATUS_REQUEST_FACT = "mesh_status_request"
# What a role has to tell the user of the run, a list of lines each (role slurm_ready's: the nodes
# it left drained as they were); shown after the run, each once, as plain text.
NOTES_FACTS = ("slurm_ready_notes",)
NOTES_AT_MOST = 64


@dataclass
class Failure:
    host: str
    task: str
    message: str


@dataclass
class RunResult:
    status: str
    rc: int
    failures: list[Failure] = field(default_factory=list)
    stats: dict[str, dict[str, int]] = field(default_factory=dict)
    changed: dict[str, list[str]] = field(default_factory=dict)
    reports: dict[str, dict] = field(default_factory=dict)  # per host: facts named in REPORT_FACTS
    notes: list[str] = field(default_factory=list)  # what meshctl learned from the run, for the user
    hw: dict[str, dict] = field(default_factory=dict)  # per host: the mesh_hw facts it reported
    records: dict[str, dict] = field(default_factory=dict)  # per host: its status record (status.yml)
    refused_records: dict[str, str] = field(default_factory=dict)  # per host: why its record was refused
    status_requests: dict[str, dict] = field(default_factory=dict)  # per host: STATUS_REQUEST_FACT
    log: Path | None = None  # the run's full output, kept under the mesh (logs/)
    profile: list[str] = field(default_factory=list)  # where its seconds went (timing.Timing.lines)

    @property
    def ok(self) -> bool:
        return self.status == "successful" and self.rc == 0

    @property
    def unreachable(self) -> list[str]:
        return sorted(h for h, c in self.stats.items() if c.get("unreachable"))

    @property
    def failed(self) -> list[str]:
        """Hosts with a failed task (unreachable ones not counted)."""
        return sorted({f.host for f in self.failures} - set(self.unreachable))

    def succeeded(self, host: str) -> bool:
        counts = self.stats.get(host, {})
        return bool(counts) and not counts.get("failed") and not counts.get("unreachable")


# What Ansible says of a failure when the task's own words are elsewhere (stderr, the items).
GENERIC_MESSAGES = ("non-zero return code", "All items completed", "One or more items failed",
                    "MODULE FAILURE", "See stdout/stderr for the exact error")  # fmt: skip


def _generic(text: str) -> bool:
    return any(text.strip().startswith(g) for g in GENERIC_MESSAGES)


# A frame of a Python traceback ('  File "...", line N, in f'), which the source line and carets follow.
TRACEBACK_FRAME = re.compile(r'^\s*File "[^"]*", line \d+')


def _without_frames(text: str) -> str:
    """TEXT without a Python traceback's frames, when it holds one: what remains is what went wrong
    (a Mitogen call's error gives the exception first, then the frames; Python's own, last)."""
    lines = text.splitlines()
    if not any(TRACEBACK_FRAME.match(line) for line in lines):
        return text
    kept, depth = [], None  # depth: the indentation of the frame line being skipped, if any
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if TRACEBACK_FRAME.match(line):
            depth = indent
        elif depth is not None and line.strip() and indent > depth:
            continue  # the frame's source line, its carets
        elif line.strip() != "Traceback (most recent call last):" and line.strip():
            depth = None
            kept.append(line.strip())
    return "\n".join(kept) or text


def _message(res: dict) -> str:
    """The failing task's own words: a loop's failed items' (not "All items completed"), a command's
    stderr (not "non-zero return code"), else its message."""
    results = res.get("results")
    if isinstance(results, list):  # a loop: what the failed items said, not "One or more items failed"
        failed = [r for r in results if isinstance(r, dict) and (r.get("failed") or r.get("rc") not in (None, 0))]
        said = [_message(r) for r in failed]
        if said:
            return "; ".join(dict.fromkeys(said[:3]))[:800]
    for key in ("msg", "stderr", "module_stderr", "stdout"):
        value = str(res.get(key) or "").strip()
        if not value or (key == "msg" and _generic(value) and any(res.get(k) for k in ("stderr", "module_stderr"))):
            continue
        # A message whole (SSH's own words on a changed host key span lines: session.py reads them),
        # a stream's last line.
        return (
            _without_frames(value)[:800]
            if key == "msg"
            else [line for line in value.splitlines() if line.strip()][-1][:500]
        )
    return "failed (no message)"


class Events:
    """One run's events as meshctl reads them (the session's, its ``RunResult``): every host's
    counts, failures and changed tasks, and what the roles leave for meshctl (reports, hardware
    facts, status records and requests, each checked); each event also shown by REPORTER."""

    def __init__(self, reporter: Progress | None = None) -> None:
        self.reporter = reporter or Progress(out=io.StringIO(), live=False)
        self.counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.reporter.counts = self.counts
        self.failures: list[Failure] = []
        self.changed: dict[str, list[str]] = defaultdict(list)
        self.reports: dict[str, dict] = {}
        self.hw: dict[str, dict] = {}
        self.records: dict[str, dict] = {}  # host -> its status record (health.FACT)
        self.refused_records: dict[str, str] = {}  # host -> why its record is outside the schema
        self.status_requests: dict[str, dict] = {}  # host -> what status is to read there (STATUS_REQUEST_FACT)
        self.notes: list[str] = []  # what the roles had to tell the user (NOTES_FACTS)
        self.timing = timing.Timing()  # where the run's seconds went (per play and role, for each host)

    def event(self, event: dict) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data", {})
        host = data.get("host", "")
        self.reporter.seen(kind, host, data, event.get("stdout") or "")
        self.timing.seen(kind, data, event.get("created"))
        if kind == "runner_on_ok":
            res = data.get("res", {})
            facts = res.get("ansible_facts") or {}
            for name in REPORT_FACTS:
                if isinstance(facts.get(name), dict):
                    self.reports[host] = facts[name]
            if HW_FACT in facts:
                self._hardware(host, data.get("task", ""), facts[HW_FACT])
            for notes in (facts.get(name) for name in NOTES_FACTS):
                for note in notes if isinstance(notes, list) else []:
                    said = core.mesh_text.clean(note).strip()[:500] if isinstance(note, str) else ""
                    if said and said not in self.notes and len(self.notes) < NOTES_AT_MOST:
                        self.notes.append(said)
            if isinstance(facts.get(STATUS_REQUEST_FACT), dict):
                self.status_requests[host] = facts[STATUS_REQUEST_FACT]
            if health.FACT in facts:
                record, problem = health.checked(host, facts[health.FACT])
                if problem:
                    self.refused_records[host] = problem
                else:
                    self.records[host] = record
            changed = bool(res.get("changed"))
            self.counts[host]["changed" if changed else "ok"] += 1
            if changed:
                self.changed[host].append(data.get("task", ""))
            self.reporter.ok(host, data, res, changed)
        elif kind == "runner_on_skipped":
            self.counts[host]["skipped"] += 1
        elif kind in ("runner_on_failed", "runner_on_unreachable"):
            if kind == "runner_on_failed" and data.get("ignore_errors"):
                return True
            key = "failed" if kind == "runner_on_failed" else "unreachable"
            self.counts[host][key] += 1
            res = data.get("res", {})
            said = _message(res)
            if key == "unreachable" and res.get("censored"):  # a no_log task hides SSH's own words too
                said = "did not answer over SSH (the task's no_log hides SSH's words: `ssh` to it says why)"
            failure = Failure(host, data.get("task", ""), said)
            self.failures.append(failure)
            self.reporter.failed(key, failure)
        self.reporter.refresh()
        return True

    def _hardware(self, host: str, task: str, hw: object) -> None:
        """A node's hardware facts, kept only when they fit the schema; else the node has failed."""
        problems = facts_problems(hw)
        if not problems:
            self.hw[host] = hw
            return
        self.hw.pop(host, None)
        self.counts[host]["failed"] += 1
        message = (f"{host} reported hardware facts meshctl refuses ({'; '.join(problems[:3])}); "
                   "nothing it reported is recorded: check the machine, it may be tampered with")  # fmt: skip
        self.failures.append(Failure(host, task, message))
        self.reporter.note(f"    failed: {host}: {task}: {message}")


class InventoryDumper(yaml.SafeDumper):
    """YAML for a run's inventory: a mapping a node reported (``model.Unsafe``) is tagged ``!unsafe``,
    which Ansible applies to everything inside it."""


InventoryDumper.add_representer(Unsafe, lambda dumper, data: dumper.represent_mapping("!unsafe", dict(data)))


def limit_to(names) -> str:
    """An Ansible --limit for these nodes, keeping localhost (every playbook's validate play)."""
    return ",".join(["localhost", *dict.fromkeys(names)])


def ansible_playbook() -> str:
    """The ansible-playbook beside meshctl's interpreter (its venv), else the one on PATH."""
    beside = Path(sys.executable).parent / "ansible-playbook"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("ansible-playbook")
    if found is None:
        raise EnvironmentProblem(
            "ansible-playbook is not installed beside meshctl nor on PATH",
            hint="install meshctl with its dependencies (pip install meshctl) or put Ansible on PATH",
        )
    return found


# The collection's callbacks every run enables: one loads the roles' Jinja plugins before Ansible
# forks its workers; one ends the run (its workers and what they run too) when meshctl ends, which
# it knows by PARENT_PID_VARIABLE.
PRELOAD_CALLBACK = "meshctl.mesh.preload"
OWN_CALLBACKS = (PRELOAD_CALLBACK, "meshctl.mesh.stop_with_parent")
PARENT_PID_VARIABLE = "MESHCTL_PARENT_PID"


def payload_cache_variable() -> str:
    """The variable that names the folder the collection's callback meshctl.mesh.preload keeps the
    modules' payloads in between runs."""
    from meshctl.core import mesh_payloads

    return mesh_payloads.CACHE_VARIABLE


def payload_cache() -> str:
    """The folder a run keeps the modules' payloads in ('' for none): each module zipped with its
    module_utils, about a sixth of a CPU-second per module and run when built again. The user's own
    cache folder; the variable set empty in meshctl's environment keeps none."""
    if payload_cache_variable() in os.environ:
        return os.environ[payload_cache_variable()].strip()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return str(Path(base) / "meshctl" / "ansiballz") if os.path.isabs(base) else ""


def callbacks_enabled() -> str:
    """ANSIBLE_CALLBACKS_ENABLED for a run: whatever this environment enables (a profiler, say), and
    meshctl's own."""
    enabled = [name.strip() for name in os.environ.get("ANSIBLE_CALLBACKS_ENABLED", "").split(",") if name.strip()]
    return ",".join(enabled + [name for name in OWN_CALLBACKS if name not in enabled])


def mitogen_strategies() -> Path | None:
    """Mitogen's strategy plugins folder when runs use Mitogen, else None (plain Ansible).

    Plain Ansible is the default. ``MESHCTL_MITOGEN=1`` opts in: Mitogen keeps one Python
    interpreter per node for the whole run and sends every task over it, instead of one ssh
    command and a fresh interpreter per task, so the nodes do a fifth of the work and a no-op apply
    of a mesh of 10 is about a third shorter (docs/benchmarks.md); but ansible-core 2.19 deprecates
    strategies from outside it and Mitogen has open bugs with it (mitogen#849 in check mode). An
    ansible-playbook from outside meshctl's environment always runs plain (it could not import
    the Mitogen installed beside meshctl).
    """
    if os.environ.get("MESHCTL_MITOGEN", "0").strip().lower() not in ("1", "true", "yes", "on"):
        return None
    if Path(ansible_playbook()).parent != Path(sys.executable).parent:
        return None
    spec = importlib.util.find_spec("ansible_mitogen")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "plugins" / "strategy"
    return folder if folder.is_dir() else None


def strategy_said(strategies: Path | None) -> str:
    """How a run log names the way its run went: Mitogen's strategy or plain Ansible."""
    return "Mitogen (MESHCTL_MITOGEN=1)" if strategies is not None else "plain Ansible"


def first_contacts(inventory: dict, limit: str | None, known_hosts: Path) -> list[tuple[str, str, int, str | None]]:
    """(host, user, port, key) of the run's SSH nodes whose host key known_hosts does not hold yet."""
    hosts = inventory.get("all", {}).get("hosts") or {}
    named = None if limit is None else set(limit.split(","))
    if named is not None and not named <= {*hosts, "localhost"}:
        named = None  # a group or a pattern: any node may be in the run
    found = []
    for name, hv in hosts.items():
        if hv.get("ansible_connection") == "local" or (named is not None and name not in named):
            continue
        host, port = str(hv.get("ansible_host", name)), int(hv.get("ansible_port", 22))
        if not hostkeys.recorded(known_hosts, host, port):
            found.append((host, str(hv.get("ansible_user", "root")), port, hv.get("ansible_ssh_private_key_file")))
    return found


def run_playbook(
    playbook: str,
    inventory: dict,
    mesh_dir: Path | None = None,
    limit: str | None = None,
    check: bool = False,
    diff: bool = False,
    verbosity: int = 0,
    known_hosts: Path | None = None,
    progress: Progress | None = None,
    extravars: dict | None = None,
    vault_id: str | None = None,
    mitogen: bool = True,
    connect_timeout: int | None = None,
    stream: bool = True,
) -> RunResult:
    """Run one of meshctl's playbooks against an inventory built by ``mesh.to_inventory``.

    ``mitogen=False`` runs plain Ansible whatever ``MESHCTL_MITOGEN`` says: for runs of a few tasks
    per node (status), where Mitogen's start on every node costs more than it saves.
    ``connect_timeout`` is how long ssh waits for a node (status: a few seconds).
    ``stream=False`` hands the run's events over when it ends (a short run nobody watches: status).

    The inventory is written into the run's private folder, beside links to the mesh's
    ``group_vars``/``host_vars`` so the user's settings apply as they do for ``mesh.yml``.
    """
    private = Path(tempfile.mkdtemp(prefix="meshctl-run-"))
    os.chmod(private, 0o700)
    progress = progress or Progress()
    events = Events(progress)  # this run's results; the command's reporter shows them
    progress.verbose = verbosity > 0
    progress.expected = read_task_counts(mesh_dir, playbook, (inventory.get("all", {}).get("hosts") or {}))
    log = open_log(Path(mesh_dir), playbook) if mesh_dir is not None else None
    progress.log = log
    try:
        folder = private / "inventory"
        folder.mkdir()
        source = folder / "hosts.yml"
        source.write_text(yaml.dump(inventory, Dumper=InventoryDumper, sort_keys=False))
        for name in ("group_vars", "host_vars"):
            if mesh_dir is not None and (Path(mesh_dir) / name).is_dir():
                (folder / name).symlink_to(Path(mesh_dir) / name)
        cmdline = []
        if check:
            cmdline.append("--check")
        if diff:
            cmdline.append("--diff")
        if vault_id:  # LABEL@SOURCE: a path to the password file or script, never the password
            cmdline += ["--vault-id", shlex.quote(vault_id)]
        ssh_args = "-o ControlMaster=auto -o ControlPersist=60s -o StrictHostKeyChecking=accept-new"
        if known_hosts:
            # Ansible splits ssh_args like a shell, ssh splits the file list at spaces: quote for both.
            ssh_args += " -o " + shlex.quote(f'UserKnownHostsFile="{known_hosts}"')
        hosts = inventory.get("all", {}).get("hosts") or {}
        envvars = {
            # The roles and plugins, as the collection meshctl.mesh (the playbooks name them by FQCN).
            "ANSIBLE_COLLECTIONS_PATH": str(resources.collections_path(private / "collections")),
            "ANSIBLE_SSH_ARGS": ssh_args,
            # ansible-runner defaults this to False, which makes Ansible add StrictHostKeyChecking=no to
            # every ssh command (after ssh_args, so unused today, but one reordering away, and what an
            # ssh_args set in a user's inventory would meet). On: a node's key is checked against
            # known_hosts whatever else builds the ssh command.
            "ANSIBLE_HOST_KEY_CHECKING": "True",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            # Where Ansible decrypts a vault file it sends to a node: inside this run's private folder.
            "ANSIBLE_LOCAL_TEMP": str(private / "tmp"),
            # One SSH round trip per task instead of several; Debian's sudo allows it.
            "ANSIBLE_PIPELINING": "1",
            # Every node of the mesh at once (the default of 5 serializes larger meshes).
            "ANSIBLE_FORKS": str(max(5, len(hosts) + 1)),
            # The roles' Jinja filters and tests loaded once, before Ansible forks a worker per task and
            # host, instead of in every worker (the collection's callback meshctl.mesh.preload).
            "ANSIBLE_CALLBACKS_ENABLED": callbacks_enabled(),
            # ...which keeps the modules' payloads between runs there.
            payload_cache_variable(): payload_cache(),
            # Who started the run: when this process ends, killed or not, the run ends with it.
            PARENT_PID_VARIABLE: str(os.getpid()),
            # Seconds ssh waits for a node to answer (Ansible's default: 10).
            **({"ANSIBLE_TIMEOUT": str(connect_timeout)} if connect_timeout else {}),
            # The ansible-playbook beside meshctl's interpreter comes first (meshctl run as .venv/bin/meshctl).
            "PATH": os.pathsep.join([str(Path(ansible_playbook()).parent), os.environ.get("PATH", "")]),
        }
        strategies = mitogen_strategies() if mitogen else None
        if strategies is not None:
            envvars["ANSIBLE_STRATEGY_PLUGINS"] = str(strategies)
            envvars["ANSIBLE_STRATEGY"] = "mitogen_linear"
            if known_hosts:  # Mitogen's ssh refuses a key it has not seen: record new nodes' keys first
                ssh.learn_host_keys(first_contacts(inventory, limit, known_hosts), known_hosts)
        if log is not None:  # which of the two ways this run went (support: "was it under Mitogen?")
            log.write(f"# meshctl: {Path(playbook).name}, {strategy_said(strategies)}\n")
        try:
            settings = dict(
                private_data_dir=str(private),
                playbook=str(resources.playbook(playbook)),
                inventory=str(source),
                envvars=envvars,
                limit=limit,
                cmdline=" ".join(cmdline) or None,
                verbosity=verbosity or None,
                quiet=True,
                suppress_env_files=True,
                event_handler=events.event,
                extravars=extravars or None,
            )
            if stream:
                # A signal during the run is recorded and the run stopped through its cancel callback
                # (meshctl.interrupt): its results are then no answer, and Interrupted is raised below.
                import ansible_runner

                with interrupt.deferred():
                    runner = ansible_runner.run(**settings, cancel_callback=interrupt.cancel_requested)
            else:
                # Nobody watches this run as it goes: ansible-playbook as a plain subprocess, its events
                # handed over when it ends, instead of a pseudo-terminal polled (and a 0.1 s close). A
                # signal raises Interrupted at once (subprocess.run ends the child); the callback given
                # keeps ansible-runner from installing its own handlers.
                from ansible_runner.interface import init_runner

                runner = init_runner(**settings, cancel_callback=interrupt.cancel_requested)
                runner.runner_mode = runner.config.runner_mode = "subprocess"
                runner.config.subprocess_timeout = None
                runner.run()
        finally:
            progress.close()
        stats = {h: dict(c) for h, c in events.counts.items()}
        if interrupt.received() is not None or runner.status == "canceled":
            raise interrupted_run(stats, Path(log.name) if log is not None else None)
        progress.recap()
        profile = events.timing.lines()
        if profile and log is not None:  # where the seconds went: the end of every run's log
            log.write("".join(f"# {line}\n" for line in profile))
        if profile and verbosity:
            for line in profile:
                progress.note(line)
        if runner.status == "successful" and not check:
            record_task_counts(mesh_dir, playbook, stats)
        return RunResult(
            runner.status,
            runner.rc,
            events.failures,
            stats,
            dict(events.changed),
            dict(events.reports),
            list(events.notes),
            hw=dict(events.hw),
            records=dict(events.records),
            refused_records=dict(events.refused_records),
            status_requests=dict(events.status_requests),
            log=Path(log.name) if log is not None else None,
            profile=profile,
        )
    finally:
        shutil.rmtree(private, ignore_errors=True)
        if log is not None:
            log.close()
            progress.log = None


TASK_COUNTS = "task-counts.json"  # in the mesh's logs/ (LOGS): per playbook, the tasks each host's last run took


def read_task_counts(mesh_dir: Path | None, playbook: str, hosts) -> dict[str, int]:
    """What each of HOSTS is expected to run of PLAYBOOK: its own count from the last successful run,
    else (a new node) the median of the others' ({} the first time, or when the file is unreadable)."""
    if mesh_dir is None:
        return {}
    try:
        known = json.loads((Path(mesh_dir) / LOGS / TASK_COUNTS).read_text()).get(Path(playbook).name) or {}
        known = {str(h): int(n) for h, n in known.items() if isinstance(n, int) and 0 < n < 100000}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}
    if not known:
        return {}
    others = sorted(known.values())
    median = others[len(others) // 2]
    return {h: known.get(h, median) for h in hosts}


def record_task_counts(mesh_dir: Path | None, playbook: str, counts: dict[str, dict[str, int]]) -> None:
    """Keep what each host ran of PLAYBOOK (a successful run's counts) for the next run's bars."""
    if mesh_dir is None:
        return
    path = Path(mesh_dir) / LOGS / TASK_COUNTS
    try:
        data = json.loads(path.read_text()) if path.is_file() else {}
        if not isinstance(data, dict):
            data = {}
        ran = {h: sum(c.get(k, 0) for k in COUNTS) for h, c in counts.items() if h != "localhost"}
        data[Path(playbook).name] = {**(data.get(Path(playbook).name) or {}), **ran}
        path.parent.mkdir(mode=0o700, exist_ok=True)
        temp = path.with_suffix(f".{os.getpid()}.tmp")
        temp.write_text(json.dumps(data, indent=1, sort_keys=True))
        temp.replace(path)
    except (OSError, ValueError):
        pass  # the bars are a nicety: a run never fails for them


def again(fallback: str = "meshctl apply") -> str:
    """The command line this run was started with, quoted for a shell (`meshctl add-node root@x
    --name n1`): what an error's fix tells the user to run again. FALLBACK outside a command."""
    import shlex

    import click

    ctx = click.get_current_context(silent=True)
    argv = ctx.meta.get("argv") if ctx is not None else None
    return "meshctl " + shlex.join(argv) if argv else fallback


def interrupted_run(stats: dict[str, dict[str, int]], log: Path | None) -> Interrupted:
    """The Interrupted outcome of a run a signal stopped: where tasks had run, its log, how to go on."""
    done = sorted(h for h, n in stats.items() if (n.get("ok") or n.get("changed")) and not n.get("failed"))
    where = " during the Ansible run" + (f"; tasks had run on {', '.join(done)}" if done else "; no task had run")
    where += f" (its output: {log})" if log is not None else ""
    return interrupt.stopped(where)  # the outcome's own fix (errors.OUTCOMES)


def raise_for(result: RunResult, retry: str, done: str = "", head: str | None = None) -> None:
    """The outcome of a run that was not ok: interrupted (130), nodes that did not answer and no other
    failure, or the head (HEAD) did not answer (7, ``errors.unreachable``'s words: DONE says what was
    or was not done), else failed (5, RETRY as the fix). Every node waits for the head: what the
    others failed at without it (role slurm_preflight stops them, naming it) is not another outcome."""
    if result.ok:
        return
    if result.status == "canceled":  # the run was stopped (run_playbook raises this itself)
        raise interrupted_run(result.stats, result.log)
    if result.unreachable and (not result.failed or head in result.unreachable):
        said = {f.host: f.message for f in result.failures}
        rows = {host: said.get(host, "no answer") for host in result.unreachable if host != "localhost"}
        if rows:
            raise unreachable(done or "nothing that needs them was done", rows, again(), head=head)
    if result.log is not None:
        retry += f" (the run's whole output: {result.log})"
    if result.failures:
        first = result.failures[0]
        where = f"task '{first.task}' on {first.host}: {first.message}"
        others = f" (and {len(result.failures) - 1} more failures above)" if len(result.failures) > 1 else ""
        raise PlaybookError(f"Ansible failed at {where}{others}", hint=retry)
    raise PlaybookError(f"Ansible run ended {result.status} (rc={result.rc})", hint=retry)


LOGS = "logs"  # under the mesh folder: one file per run, the newest KEEP_LOGS kept
KEEP_LOGS = 30


def open_log(mesh_dir: Path, playbook: str):
    """A new run log under the mesh (0600 in a 0700 folder), the oldest beyond KEEP_LOGS removed.

    It holds Ansible's own output of the run, as -v would print it: what no_log hides is hidden
    there too. None when the folder cannot be written (a run never fails for its log).
    """
    folder = mesh_dir / LOGS
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        old = sorted(p for p in folder.glob("*.log") if p.is_file() and not p.is_symlink())
        for path in old[: max(0, len(old) - KEEP_LOGS + 1)]:
            path.unlink(missing_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = folder / f"{stamp}-{os.getpid()}-{Path(playbook).stem}.log"
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        return path.open("a", encoding="utf-8", errors="replace")  # its .name is the path
    except OSError:
        return None
