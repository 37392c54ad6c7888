"""Restarting a lockstep job (Horovod's, Stanza's, the collective one) that lost a rank.

A lockstep job is a fixed set of ranks that start together, so it cannot take a new rank in
the middle: when one dies, the launcher stops the rest, and this supervisor starts the whole
job again, as Kubernetes' restart policy for an MPIJob or ``horovodrun`` in a loop would. The
job's ``fit`` (with a ``checkpoint_dir``) goes on from its newest checkpoint; the supervisor
tells it what was lost through ``RALP_RESTART_FAILURE`` (the lost task, the step the job had
reached, when the loss was seen), so that its ``history.failures`` says what was restored and
redone, and how long it took to be back where it was.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ralp._process import stop_processes
from ralp.errors import InvalidArgumentError
from ralp.training.ranks import RESTART_FAILURE_ENV, SUPERVISED_ENV

T = TypeVar("T")


@dataclass
class Supervised(Generic[T]):
    """What a supervised job gave: the last run's result and each loss it was restarted
    after (``lost``: task, kind "rank", at_step, detected_at, message)."""

    result: T
    lost: list[dict] = field(default_factory=list)

    @property
    def restarts(self) -> int:
        return len(self.lost)


def supervise(run_once: Callable[[dict[str, str], Callable], T], *, max_restarts: int,
              errors: tuple[type[BaseException], ...],
              lost_task: Callable[[BaseException], str] = lambda error: "job",
              on_progress: Callable | None = None,
              on_restart: Callable[[dict], None] | None = None) -> Supervised[T]:
    """Run ``run_once(env, on_progress)`` until it returns, starting it again after each of
    ``errors`` up to ``max_restarts`` times.

    ``env`` is what the job's environment must add: ``RALP_SUPERVISED=1`` (rank 0's lockstep
    ``fit`` then prints each step done as a ``("step", n)`` marker, ``n`` counted from the
    start of the training, restarts included) and, after a loss, the failure for the restarted
    ``fit``. ``run_once`` passes the job's messages to the ``on_progress`` it is given, and
    they go on to ``on_progress`` here.
    ``lost_task(error)`` names the task whose loss ended a run.

    Raises:
        The last of ``errors`` when the job failed more than ``max_restarts`` times.
    """
    if not isinstance(max_restarts, int) or max_restarts < 0:
        raise InvalidArgumentError(f"max_restarts must be a whole number >= 0, got {max_restarts!r}")
    lost: list[dict] = []
    env = {SUPERVISED_ENV: "1"}  # rank 0's fit reports its steps
    reached = [0]

    def progress(message) -> None:
        if message[0] == "step":
            reached[0] = max(reached[0], int(message[1]))
        if on_progress is not None:
            on_progress(message)

    while True:
        try:
            return Supervised(run_once(dict(env), progress), lost)
        except errors as error:
            if len(lost) >= max_restarts:
                if lost:
                    error.add_note(f"(after {len(lost)} restart(s), max_restarts {max_restarts})")
                raise
            failure = {"task": lost_task(error), "kind": "rank", "at_step": reached[0],
                       "detected_at": time.time(), "message": str(error)[:300]}
            lost.append(failure)
            env = {SUPERVISED_ENV: "1", RESTART_FAILURE_ENV: json.dumps(failure)}
            if on_restart is not None:
                on_restart(failure)


PROG = "python -m ralp.cluster.supervise"


class CommandFailed(RuntimeError):
    """One start of the supervised command exited with ``code``."""

    def __init__(self, code: int):
        super().__init__(f"the command exited with {code}")
        self.code = code


def run_command_once(command: list[str], env: dict[str, str], progress) -> int:
    """Run ``command`` with ``env`` added, its output passed through; ralp's step markers
    (rank 0's ``("step", n)``, where the job prints them) go to ``progress``."""
    import os
    import subprocess
    import sys

    from ralp._messages import parse_message

    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1,
                               env={**os.environ, **env}, start_new_session=True)
    try:
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            message = parse_message(line)
            if message and "step" in message:
                progress(("step", message["step"]))
        code = process.wait()
    finally:
        stop_processes([process], 10.0, session=True)  # the command's whole session
    if code:
        raise CommandFailed(code)
    return code


def main(argv: list[str] | None = None) -> int:
    """``python -m ralp.cluster.supervise [--max-restarts N] -- COMMAND ...``: run a lockstep
    job's launcher (``horovodrun ...``, a script that starts collective workers) and start it
    again after it fails, up to N times (default 3). Its ``fit`` with a ``checkpoint_dir``
    goes on from the newest checkpoint and lists each loss in ``history.failures``."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog=PROG, description=main.__doc__.split(": ", 1)[1])
    parser.add_argument("--max-restarts", type=int, default=3, metavar="N")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="after --: the job's command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the job's command after --, e.g. -- horovodrun -np 4 python train.py")
    if args.max_restarts < 0:
        parser.error(f"--max-restarts must be >= 0, got {args.max_restarts}")

    def restarted(failure: dict) -> None:
        print(f"{PROG}: {failure['message']} (at step {failure['at_step']}); starting it again",
              file=sys.stderr)

    try:
        supervise(lambda env, progress: run_command_once(command, env, progress),
                  max_restarts=args.max_restarts, errors=(CommandFailed,), on_restart=restarted)
    except CommandFailed as e:
        print(f"{PROG}: {e}, after {args.max_restarts} restart(s); giving up", file=sys.stderr)
        return e.code if 0 < e.code < 256 else 1
    except FileNotFoundError as e:
        print(f"{PROG}: cannot run {command[0]!r}: {e.strerror}", file=sys.stderr)
        return 127
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
