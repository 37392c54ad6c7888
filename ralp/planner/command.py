"""The planner's commands' one runner: parse, check a zoo name, do the work, print; bad input
exits 2 with one line and no traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from ralp._cli import fail, interrupt_on_sigterm, quiet_tensorflow
from ralp.errors import RalpError


def run_command(argv: Sequence[str] | None, prog: str, *,
                parser: Callable[[str], argparse.ArgumentParser],
                work: Callable[[argparse.Namespace], str]) -> int:
    """Parse ``argv`` with ``parser(prog)``, do ``work(args)`` and print its output; a bad
    request exits 2 with one line, Ctrl-C and SIGTERM 130 with everything started stopped.
    ``prog``: the name it was run by; the
    calibration's own command and the lab's planner run through here with theirs."""
    args = parser(prog).parse_args(argv)
    if getattr(args, "model", None) is not None:  # the zoo's table needs no TensorFlow
        from ralp.models import get_model_spec

        try:
            get_model_spec(args.model)
        except ValueError as e:
            return fail(prog, str(e))
    quiet_tensorflow()
    interrupt_on_sigterm()  # as Ctrl-C: a calibration's devices and processes are removed
    try:
        output = work(args)
    except (RalpError, ValueError) as e:
        return fail(prog, str(e))
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; everything it started was stopped", file=sys.stderr)
        return 130
    sys.stdout.write(output if output.endswith("\n") else output + "\n")
    return 0
