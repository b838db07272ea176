# Copyright: meshctl contributors; Apache-2.0
"""Text from elsewhere made safe to show: the one sanitizer.

Much of what meshctl shows or writes down is what others said: a node's OS name or GPU model, a
task's message, a provider's error. A hostile node or a provider's answer must not drive a terminal
with it (OSC 52 writes the clipboard, other sequences retitle the window, move the cursor or hide
text), nor a job user's terminal through ``sinfo -R`` or a log. Used by meshctl's printing
(``meshctl/display.py``), the head's power program (``roles/power_save/files/meshctl-power``: its
log and the reasons it gives Slurm) and the relaunch service. Plain functions, no Ansible.
"""

from __future__ import annotations

import re
import unicodedata

# Whole escape sequences first (CSI, OSC/DCS/PM/APC up to BEL or ST, in 7- and 8-bit forms, so no
# payload is left behind), then every character of Unicode's "other" categories: C0 and C1
# controls, the format characters that reorder or hide text (bidi marks such as U+061C and U+202E,
# zero-width ones), unassigned, private-use and surrogate code points.
_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]P^_X]|[\x9d\x90\x9e\x9f\x98])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[@-Z\\-_]?"
)

REASON_LIMIT = 200  # characters of a reason meshctl gives Slurm

# What must never reach a program's command line, which every user of the machine reads (ps): a
# package index (its URL may carry a token) and any URL with credentials in it.
_INDEX_FLAG = re.compile(r"(?:^|\s)(?:-i|--index-url|--extra-index-url)(?:\s|=|\Z)")
_URL_CREDENTIALS = re.compile(r"://[^/\s]*@")


def argv_secret_problem(text):
    """Why TEXT, arguments a program gets on its command line, must not be there; "" when it may."""
    text = "" if text is None else str(text)
    if _INDEX_FLAG.search(text):
        return "it names a package index (its URL, and any token in it, would be on pip's command line)"
    if _URL_CREDENTIALS.search(text):
        return "it holds a URL with credentials (on a command line every user of the machine reads)"
    return ""


def clean(text, multiline=False):
    """``text`` safe for a terminal: escape sequences and control characters removed, tabs made spaces,
    and line breaks too unless ``multiline``."""
    text = _SEQUENCES.sub("", str(text)).replace("\t", " ")
    if not multiline:
        text = text.replace("\r\n", " ").replace("\n", " ")
    return "".join(ch for ch in text if ch == "\n" or not unicodedata.category(ch).startswith("C"))


def slurm_reason(text, limit=REASON_LIMIT):
    """A node's reason for ``scontrol update ... reason=``: one clean line, no double quote (scontrol's
    own quoting), whitespace runs made one space, at most ``limit`` characters."""
    return " ".join(clean(text).replace('"', "'").split())[:limit]
