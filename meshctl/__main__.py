"""`meshctl` and `python -m meshctl`: the command line (``meshctl.cli.main``).

``meshctl.cli`` installs meshctl's signal handlers (``meshctl.interrupt``) once click and its own
modules are loaded; a Ctrl+C that lands while they still load ends the command as every
interrupted command ends (130, ``error: interrupted (Ctrl+C)`` and its fix), not in a traceback.
"""

from __future__ import annotations

import sys


def run() -> None:
    try:
        from meshctl.cli import main

        main()
    except (KeyboardInterrupt, RuntimeError) as exc:  # before main() took the signals over (its end is a SystemExit)
        from meshctl import interrupt

        stopped = interrupt.found_in(exc)
        if stopped is None and not isinstance(exc, KeyboardInterrupt):
            raise  # a RuntimeError of its own, not a Ctrl+C that Python wrapped while a module loaded
        stopped = stopped or interrupt.stopped()
        print(f"error: {stopped}", file=sys.stderr)
        raise SystemExit(stopped.exit_code) from None


if __name__ == "__main__":
    run()
