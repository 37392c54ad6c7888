"""Helpers shared by ralp's command-line entry points."""

from __future__ import annotations

import argparse
import os
import sys


class UsageError(Exception):
    """Bad input on the command line: printed to stderr, exit code 2."""


def quiet_tensorflow() -> None:
    """Hide TensorFlow's start-up chatter (CPU feature notes, oneDNN banner) in CLI output."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def fail(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2
