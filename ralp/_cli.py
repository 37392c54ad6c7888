"""Helpers shared by ralp's command-line entry points."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from ralp.errors import RalpError


class UsageError(RalpError):
    """Bad input on the command line: printed to stderr, exit code 2."""


# TensorFlow's start-up banners; they ignore TF_CPP_MIN_LOG_LEVEL in 2.21.
_STARTUP_NOISE = (
    "All log messages before absl::InitializeLog()",
    "oneDNN custom operations are on",
    "cpu_feature_guard",
    "rebuild TensorFlow with the appropriate compiler flags",
)


def quiet_tensorflow() -> None:
    """Import TensorFlow with its start-up banners filtered out of stderr.

    Anything else TensorFlow prints while importing (a real error) is passed through.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" in sys.modules:
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # noqa: F401
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode(errors="replace").splitlines():
                if not any(noise in line for noise in _STARTUP_NOISE):
                    print(line, file=sys.stderr)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def finite_float(text: str) -> float:
    """A finite number (argparse type): NaN and infinities are refused."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number above zero (argparse type)."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def words(values: list[str]) -> list[str]:
    """The items of a list option given as "a b", "a,b" or both."""
    return [w for value in values for w in value.split(",") if w]


def fail(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2


def interrupt_on_sigterm() -> None:
    """SIGTERM (a scheduler's or ``kill``'s stop) ends this CLI as Ctrl-C does: as a
    KeyboardInterrupt, so that everything it started is stopped and removed on the way out.
    From the main thread, at the start of a CLI's run."""
    import signal

    signal.signal(signal.SIGTERM, _raise_interrupt)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt
