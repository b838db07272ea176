"""The mesh's settings checked before anything runs: every key a user writes is one meshctl or a role knows.

A key of ``group_vars/*.yml``, ``host_vars/*.yml``, ``mesh.yml``'s ``all.vars`` or a host's variables
that is in a role's namespace (it starts with a role's name and ``_``, or ``meshctl_``) or nearly
spells a known one must be a role's setting (an option of its ``meta/argument_specs.yml``) or one of
meshctl's own (``known()``: what ``mesh.yml`` records of a node, ``idle_stop``, a provider's
``<name>_prices`` where its API gives none); its value must have the type the spec says (leniently,
as Ansible converts: ``"yes"`` is a bool, ``"30"`` an int). A misspelt key would be silently ignored
by Ansible: here it is refused with its file, line and the closest known name. A variable of the
user's own (for their playbooks: ``rack``, ``my_site_var``) is outside every namespace and kept.

What a run would refuse later is refused here, with the same code: the elements and
suboptions of a list or dict, by Ansible's own argument-spec validator (what a role's
``meta/argument_specs.yml`` check runs); a setting with a role's own check (``VALUE_CHECKS``: the
job users' list, an idle time) by that check's plain function; and a key that is another tool's word
for stopping an idle machine (``OTHER_TOOLS``: Ansible would keep it silently, and the machine would
bill on) is refused with meshctl's word. Every command reads the mesh through this (``Mesh.load``),
so ``meshctl check`` and ``apply`` say the same.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from meshctl import core, resources

# Keys meshctl itself reads or writes that no role declares.
OWN = (
    "idle_stop",
    "idle_terminate",
    "mesh_tailscale",
    "meshctl_vault_id",
    "meshctl_head_copy",
    "burst_pools",
    "burst_max_spend",
)
NEAR = 0.85  # how alike a name must be to a known one to be taken for a misspelling of it
# Settings a role renamed (old name: new name), said as such: a close match would guess wrong.
RENAMED = {
    "slurm_package_cache_dir": "slurm_build_cache_dir",  # when the Slurm roles were split
    "slurm_source_suites": "slurm_build_source_suites",
    "slurm_drain_force": "slurm_controller_drain_force",
    "slurm_drain_timeout": "slurm_controller_drain_timeout",
    "pod_program_dir": "mesh_pod_program_dir",  # when the supervisor programs became a module
}
# Other tools' words for stopping an idle machine (a host or group variable meshctl would ignore).
OTHER_TOOLS = {
    "autostop": "SkyPilot's",
    "auto_stop": "SkyPilot's",
    "idle_minutes_to_autostop": "SkyPilot's",
    "idle_timeout": "dstack's",
    "idle_duration": "dstack's",
    "scaledown_idletime": "AWS ParallelCluster's",
    "suspend_time": "Slurm's (SuspendTime)",
}
TRUE_WORDS = ("true", "yes", "on", "1", "false", "no", "off", "0")
MAX_FILE_BYTES = 1024 * 1024  # a settings file (group_vars, host_vars, mesh.yml) larger is no settings file
MAX_KEYS = 5000  # keys of one file: each is compared with every known name (200000 took over a minute)


class Vaulted(str):
    """An Ansible ``!vault`` value: its ciphertext, which only Ansible decrypts (its type is unknown here)."""


class StrictLoader(yaml.SafeLoader):
    """YAML as meshctl reads every settings file and mesh.yml: no aliases (no alias bombs, no
    recursion), no key given twice, keys plain text; Ansible's own tags ``!vault`` (an encrypted
    value) and ``!unsafe`` (text Ansible never templates) read as text."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.MarkedYAMLError(
                problem="YAML aliases (*name) are not allowed here", problem_mark=event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _value in node.value:
            if not isinstance(key_node, yaml.ScalarNode):  # `? [a]: x` or `{a: 1}: x`: unhashable, no name
                raise yaml.YAMLError(
                    f"line {key_node.start_mark.line + 1}: a key must be plain text, not a list or mapping"
                )
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.YAMLError(f"line {key_node.start_mark.line + 1}: {key!r} is given twice")
            seen.add(key)
        if len(seen) > MAX_KEYS:
            raise yaml.YAMLError(f"line {node.start_mark.line + 1}: more than {MAX_KEYS} keys in one mapping")
        return super().construct_mapping(node, deep=deep)


StrictLoader.add_constructor("!vault", lambda loader, node: Vaulted(loader.construct_scalar(node)))
StrictLoader.add_constructor("!unsafe", lambda loader, node: str(loader.construct_scalar(node)))


def yaml_problem(exc: Exception) -> str:
    """What is wrong in a YAML file, and where: ``line 4, column 1: found character '\\t' that cannot
    start any token (YAML indents with spaces, never tabs)``."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    tab = " (YAML indents with spaces, never tabs)" if "\\t" in str(problem) or "tab" in str(problem) else ""
    return f"{where}{problem}{tab}"


def _unreadable(file: str, exc: Exception) -> Problem:
    """A settings file meshctl cannot read, as one problem with its line and the fix."""
    mark = getattr(exc, "problem_mark", None)
    return Problem(file, mark.line + 1 if mark is not None else 0, "", f"is not valid YAML ({yaml_problem(exc)})",
                   "fix it by hand: YAML mappings of `name: value`, indented with spaces")  # fmt: skip


INI_SECTION = re.compile(r"^\[[A-Za-z0-9_:.-]+\][ \t]*(?=\n|\Z)", re.M)


def load(text: str):
    """TEXT read by StrictLoader (yaml.YAMLError when it is not what a settings file may be)."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise yaml.YAMLError(f"over {MAX_FILE_BYTES // 1024} KiB: not a settings file")
    try:
        return yaml.load(text, Loader=StrictLoader)  # a SafeLoader
    except RecursionError:
        raise yaml.YAMLError("nested too deep") from None
    except yaml.YAMLError:
        section = INI_SECTION.search(text)
        if section:  # an INI inventory (`[all]`, `host ansible_host=...`): YAML is read here
            line = text.count("\n", 0, section.start())
            raise yaml.MarkedYAMLError(
                problem="an INI inventory, not YAML: meshctl's files are YAML (`meshctl init DIR --from-inventory "
                "hosts.ini` imports an INI inventory)",
                problem_mark=yaml.Mark("", section.start(), line, 0, None, None),
            ) from None
        raise


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    key: str
    message: str
    hint: str

    def __str__(self) -> str:
        return f"{self.file}: line {self.line}: {self.message}" if self.line else f"{self.file}: {self.message}"


@cache
def specs() -> dict[str, dict]:
    """Every role's settings: ``{name: its spec}`` (the union of every entry point's options)."""
    found: dict[str, dict] = {}
    for path in sorted(resources.roles_dir().glob("*/meta/argument_specs.yml")):
        data = resources.parse_own_yaml(path.read_text(encoding="utf-8")) or {}
        for entry in (data.get("argument_specs") or {}).values():
            for name, spec in ((entry or {}).get("options") or {}).items():
                found.setdefault(name, spec or {})
    return found


@cache
def namespaces() -> tuple[str, ...]:
    """The prefixes only meshctl and its roles use: each role's name and ``_``, and ``meshctl_``."""
    roles = sorted(p.name for p in resources.roles_dir().iterdir() if (p / "meta").is_dir())
    return (*(f"{r}_" for r in roles), "meshctl_")


def ours(key: str) -> bool:
    """Whether KEY is meant for meshctl or a role: in a namespace, or nearly a known name."""
    return key.startswith(namespaces()) or bool(difflib.get_close_matches(key, sorted(known()), n=1, cutoff=NEAR))


# What mesh.yml records of each node (meshctl writes them; a user's settings may not), and what a
# run's inventory sets from recorded facts (never a user's). meshctl/mesh.py reads and writes them.
MANAGED_HOSTVARS = ("ansible_host", "ansible_user", "ansible_port", "ansible_ssh_private_key_file", "mesh_provider",
                    "meshctl_roles", "meshctl_state", "mesh_address", "ansible_become", "ansible_connection",
                    "mesh_pod", "meshctl_instance", "meshctl_instance_since")  # fmt: skip
RUN_HOSTVARS = ("mesh_hw",)


@cache
def known() -> frozenset[str]:
    common = core.mesh_cloud
    prices = {f"{p}_prices" for p in common.PROVIDERS if common.capabilities(p).price == "setting"}
    return frozenset({*specs(), *OWN, *prices, *MANAGED_HOSTVARS, *RUN_HOSTVARS})


def type_problem(value, kind: str | None) -> str | None:
    """Why VALUE is not of the spec's type KIND (None when it is, or when it cannot be told)."""
    if kind in (None, "raw") or isinstance(value, Vaulted) or (isinstance(value, str) and "{{" in value):
        return None
    ok = {
        "bool": lambda v: isinstance(v, bool) or str(v).lower() in TRUE_WORDS,
        "int": lambda v: (
            (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, str) and v.strip().isdigit())
        ),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "str": lambda v: isinstance(v, (str, int, float)) and not isinstance(v, bool),
        "path": lambda v: isinstance(v, str),
        "list": lambda v: isinstance(v, (list, str)),
        "dict": lambda v: isinstance(v, dict),
    }.get(kind)
    if ok is None or ok(value):
        return None
    return f"is {type(value).__name__} {_short(value)}, not {kind}"


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def key_lines(text: str) -> dict[tuple, int]:
    """The line (1-based) of every mapping key of a YAML text, by its path of keys."""
    lines: dict[tuple, int] = {}

    def walk(node, path):
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    lines[(*path, key.value)] = key.start_mark.line + 1
                    walk(value, (*path, key.value))

    with contextlib.suppress(yaml.YAMLError):
        walk(yaml.compose(text), ())
    return lines


def check_mapping(values: dict, file: str, lines: dict[tuple, int], path: tuple = ()) -> list[Problem]:
    problems = []
    for key, value in (values or {}).items():
        if not isinstance(key, str) or key.startswith("ansible_"):
            continue
        line = lines.get((*path, key), 0)
        if key in OTHER_TOOLS:
            said = value if isinstance(value, str) and len(value) <= 12 else "30m"
            problems.append(Problem(file, line, key, f"`{key}` is {OTHER_TOOLS[key]} word: meshctl ignores it, "
                                    "and a rented machine would bill on while idle",
                                    f"did you mean `idle_stop: {said}`?"))  # fmt: skip
            continue
        if key not in known():
            if not ours(key):
                continue  # the user's own variable, for their playbooks
            close = difflib.get_close_matches(key, sorted(known()), n=1, cutoff=0.75)
            hint = (f"did you mean `{close[0]}`?" if close else "each role's README lists its settings") + (
                " (Ansible would ignore it silently)")  # fmt: skip
            if key in RENAMED:
                hint = f"it is now `{RENAMED[key]}`: rename it (Ansible would ignore the old name silently)"
            problems.append(Problem(file, line, key, f"unknown setting `{key}`", hint))
            continue
        wrong = type_problem(value, (specs().get(key) or {}).get("type")) or element_problem(key, value)
        if wrong:
            problems.append(Problem(file, line, key, f"`{key}` {wrong}",
                                    f"the role's README says what `{key}` takes"))  # fmt: skip
            continue
        found, fix = value_problems(key, value, values)
        problems += [Problem(file, line, key, f"`{key}`: {message}", fix) for message in found]
    return problems


def _templated(value) -> bool:
    """Whether VALUE holds a Jinja expression anywhere (Ansible decides it at run time, not here)."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(_templated(k) or _templated(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_templated(v) for v in value)
    return isinstance(value, Vaulted)


def _plain_spec(spec: dict) -> dict:
    """A role option's spec as Ansible's validator reads it, without ``required`` (the role's
    defaults give it) and without what only documents."""
    keep = ("type", "elements", "choices", "options", "no_log")
    out = {k: v for k, v in spec.items() if k in keep}
    if isinstance(out.get("options"), dict):
        out["options"] = {name: {k: v for k, v in (sub or {}).items() if k != "default"}
                          for name, sub in out["options"].items()}  # fmt: skip
    return out


def element_problem(key: str, value) -> str | None:
    """What the role's own argument-spec check would refuse in VALUE's elements or suboptions
    (Ansible's ArgumentSpecValidator, as `validate_argument_spec` runs it), or None."""
    spec = specs().get(key) or {}
    if not any(k in spec for k in ("elements", "choices", "options")) or _templated(value):
        return None
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    errors = list(ArgumentSpecValidator({key: _plain_spec(spec)}).validate({key: value}).errors.errors)
    return str(errors[-1]).replace(f" found in '{key}'", "").strip() if errors else None


def _idle_time(value, _scope) -> list[str]:
    power = core.power_save
    if value is False or (isinstance(value, str) and value.strip().lower() in ("false", "no", "off", "never")):
        return []
    try:
        seconds = power.duration_seconds(value)
    except power.PowerSaveError as exc:
        return [str(exc)]
    if not seconds and value not in (None, ""):  # 0s reads as never: say false if that is meant
        return [f"idle_stop {value!r} is no time: a node is never stopped with it"]
    if seconds and "ansible_host" in _scope:  # a node of mesh.yml: what `meshctl autostop` would refuse for it
        refused = power.power_plan({"node": {**_scope, "idle_stop": value}})["refused"].get("node")
        if refused:
            return [f"this node cannot be stopped when idle: {refused}"]
    return []


def _argv_secret(value, _scope) -> list[str]:
    said = core.mesh_text.argv_secret_problem(value)  # the mlflow role's own check, before any run
    return [said] if said else []


def _boolean(value, _scope) -> list[str]:
    # Only YAML's true acts (the code asks `is True`): "yes" in quotes or maybe would act as no.
    return [] if isinstance(value, bool) else [f"{value!r} is not true or false"]


def _by_provider(value, scope) -> list[str]:
    if not isinstance(value, dict):
        return ["mesh_idle_stop_by_provider must map a provider to an idle time (paperspace: 30m)"]
    return [f"{provider}: {p}" for provider, time in value.items() for p in _idle_time(time, scope)]


def _job_users(value, scope) -> list[str]:
    defaults = resources.role_defaults("job_users")
    group = scope.get("job_users_group", defaults["job_users_group"])
    gid = scope.get("job_users_gid", defaults["job_users_gid"])
    return core.job_users.job_users_problems(value, group, gid)


def _head_jobs(value, _scope) -> list[str]:
    try:
        core.slurm_nodes.head_runs_jobs(value, [])
    except ValueError as exc:
        return [str(exc)]
    return []


def _pools(value, _scope) -> list[str]:
    return core.mesh_burst.pools_problems(value, core.mesh_cloud.PROVIDERS)


def _max_spend(value, _scope) -> list[str]:
    try:
        core.mesh_burst.max_spend(value)
    except core.mesh_burst.BurstError as exc:
        return [str(exc)]
    return []


# A setting with a check of its own in a role or in meshctl: the same plain function, here first.
VALUE_CHECKS = {
    # A broken pool keeps every command from loading the mesh (`burst remove` too): the fix is by hand.
    "burst_pools": (
        _pools,
        "correct the pool in mesh.yml's burst_pools as said, or delete its entry there "
        "(`meshctl burst add` writes a pool right)",
    ),
    "burst_max_spend": (_max_spend, "write dollars an hour, e.g. burst_max_spend: 10"),
    "idle_stop": (_idle_time, "write it as 30m, 1h30m, 90s or 30 minutes, or false for never"),
    "idle_terminate": (_boolean, "write true (terminate the instance when idle) or false, unquoted"),
    "mlflow_pip_extra_args": (
        _argv_secret,
        "put the index in mlflow_pip_environment (PIP_INDEX_URL, "
        "PIP_EXTRA_INDEX_URL): pip reads it from its environment, never its command line",
    ),
    "mesh_idle_stop_by_provider": (_by_provider, "give each provider an idle time: {paperspace: 30m}"),
    "job_users_list": (_job_users, "write each user as {name: alice, uid: 2001} (roles/job_users/README.md)"),
    "slurm_head_runs_jobs": (_head_jobs, 'write auto, true or false (roles/slurm/README.md, "The head")'),
}


def value_problems(key: str, value, scope: dict) -> tuple[list[str], str]:
    """What the setting's own check refuses in VALUE (SCOPE: the other settings beside it), and its fix."""
    checker, fix = VALUE_CHECKS.get(key, (None, ""))
    if checker is None or _templated(value):
        return [], fix
    return checker(value, scope), fix


SECRETS = "secrets"  # the mesh's folder of secrets (meshctl.mesh.SECRETS)


def secrets_problems(mesh_dir: Path) -> list[Problem]:
    """The mesh's secrets folder and files others may read (the munge role's refusal, checked first)."""
    folder = Path(mesh_dir) / SECRETS
    problems = []
    try:
        mode = folder.lstat().st_mode & 0o777
    except OSError:
        return []
    if mode & 0o077:
        fix = f"chmod 700 {folder}; then consider its keys leaked: `meshctl rotate-munge-key`"
        problems.append(Problem(f"{SECRETS}/", 0, "", f"is readable by others (mode {mode:04o})", fix))
    for path in sorted(folder.rglob("*")):
        try:
            mode = path.lstat().st_mode & 0o777
        except OSError:
            continue
        if path.is_file() and mode & 0o077:
            fix = f"chmod 600 {path}; then consider it leaked: `meshctl rotate-munge-key`"
            said = f"is readable by others (mode {mode:04o})"
            problems.append(Problem(f"{SECRETS}/{path.relative_to(folder)}", 0, "", said, fix))
    return problems


# What Ansible's host_group_vars plugin loads of group_vars/ and host_vars/ (YAML_FILENAME_EXTENSIONS):
# a file NAME, NAME.yml, NAME.yaml or NAME.json, or every such file in a folder NAME/, at any depth;
# hidden files and folders are left out. meshctl hands Ansible both folders whole.
VARS_EXTENSIONS = ("", ".yml", ".yaml", ".json")
VARS_FOLDERS = ("group_vars", "host_vars")


def vars_files(mesh_dir: Path) -> list[Path]:
    """Every file of the mesh's group_vars/ and host_vars/ that Ansible reads, in its order."""
    found: list[Path] = []
    for folder in VARS_FOLDERS:
        base = Path(mesh_dir) / folder
        if not base.is_dir():
            continue
        for entry in sorted(base.iterdir()):
            if entry.name.startswith("."):
                continue
            inside = sorted(entry.rglob("*")) if entry.is_dir() else [entry]
            for path in inside:
                parts = path.relative_to(base).parts
                if path.is_file() and path.suffix in VARS_EXTENSIONS and not any(p.startswith(".") for p in parts) \
                        and not path.name.endswith("~"):  # fmt: skip
                    found.append(path)
    return found


def check(mesh_dir: Path, inventory_text: str | None = None) -> list[Problem]:
    """Every problem of the mesh's settings: every file Ansible reads of group_vars/ and host_vars/
    (``vars_files``), mesh.yml's vars and host variables (the secrets' modes: ``secrets_problems``)."""
    mesh_dir = Path(mesh_dir)
    problems: list[Problem] = []
    for path in vars_files(mesh_dir):
        name = str(path.relative_to(mesh_dir))
        try:
            text = path.read_text(encoding="utf-8")
            data = json.loads(text) if path.suffix == ".json" else load(text)
        except (yaml.YAMLError, ValueError) as exc:
            problems.append(_unreadable(name, exc))
            continue
        except OSError as exc:
            problems.append(Problem(name, 0, "", f"cannot be read ({exc})", "fix it by hand"))
            continue
        if data is None:
            continue
        if not isinstance(data, dict):
            problems.append(Problem(name, 1, "", "is not a mapping of settings", "write `name: value` lines"))
            continue
        problems += check_mapping(data, name, key_lines(text) if path.suffix != ".json" else {})
    if inventory_text is not None:
        try:
            data = load(inventory_text) or {}
        except yaml.YAMLError as exc:
            return [*problems, _unreadable("mesh.yml", exc)]
        lines = key_lines(inventory_text)
        top = data.get("all") if isinstance(data, dict) else None
        if isinstance(top, dict):
            problems += check_mapping(top.get("vars") or {}, "mesh.yml", lines, ("all", "vars"))
            for name, hv in (top.get("hosts") or {}).items():
                if isinstance(hv, dict):
                    problems += check_mapping(hv, "mesh.yml", lines, ("all", "hosts", name))
    return problems
