"""A validation pattern that ends with ``$`` also takes the text with a newline after it (Python's
``$`` matches before a final newline): a node name ``n1\\n`` passed ``^...$``. No pattern
given to re.compile, re.match or re.search in meshctl, the collection's plugins or the programs the
roles install ends with ``$`` (``\\Z`` ends the text), nor does an Ansible ``match`` test in a role."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PYTHON = [*ROOT.glob("meshctl/**/*.py"), *ROOT.glob("plugins/**/*.py"), *ROOT.glob("scripts/*.py"),
          *(p for p in ROOT.glob("roles/*/files/*") if p.is_file() and p.read_text(errors="replace").startswith(
              "#!/usr/bin/env python3"))]  # fmt: skip
CALLS = {"compile", "match", "search"}


def _patterns(tree):
    for node in ast.walk(tree):
        called = getattr(node, "func", None)
        if (isinstance(node, ast.Call) and isinstance(called, ast.Attribute) and called.attr in CALLS
                and isinstance(called.value, ast.Name) and called.value.id == "re" and node.args):  # fmt: skip
            yield node.lineno, node.args[0]


def _texts(arg):
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        yield arg.value
    elif isinstance(arg, ast.JoinedStr):
        yield "".join(v.value for v in arg.values if isinstance(v, ast.Constant))
    elif isinstance(arg, ast.BinOp):
        yield from _texts(arg.right)


def dollar_ends(source):
    """(line, pattern) of each pattern in SOURCE that ends, or ends a branch, with an unescaped ``$``."""
    found = []
    for line, arg in _patterns(ast.parse(source)):
        for text in _texts(arg):
            if re.search(r"(?<!\\)\$", re.sub(r"\[(?:\\.|[^]\\])*\]", "", text)):
                found.append((line, text))
    return found


def test_the_finder_finds_what_it_is_for():
    assert dollar_ends('import re\nNAME = re.compile(r"^[a-z]+$")\n') == [(2, "^[a-z]+$")]
    assert dollar_ends('re.match(r"^a$|^b", x)\nre.search("x(y$)", z)\n') == [(1, "^a$|^b"), (2, "x(y$)")]
    assert dollar_ends('re.compile(r"^[a-z]+\\Z")\nre.fullmatch(r"a$", x)\nre.compile(r"cost \\$")\n') == []


@pytest.mark.parametrize("path", PYTHON, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_pattern_ends_with_a_dollar(path):
    assert dollar_ends(path.read_text()) == []


def test_no_ansible_match_test_ends_with_a_dollar():
    found = []
    for path in ROOT.glob("roles/*/*/*.yml"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"""is (match|search)\(\s*['"][^'"]*\$['"]""", line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


@pytest.mark.parametrize("name", ["n1\n", "gpu-1\n", "head\r\n"])
def test_a_node_name_with_a_line_break_is_refused(name):
    from meshctl.errors import UsageError
    from meshctl.model import check_name

    with pytest.raises(UsageError):
        check_name(name)
