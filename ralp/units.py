"""Link rates and delays as users write them ('1gbit', '10ms'), parsed as tc does."""

from __future__ import annotations

import re

from ralp.errors import ClusterError

_BANDWIDTH = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(bit|kbit|mbit|gbit|tbit)$")
_LATENCY = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(s|ms|us)$")
_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}  # as tc
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def parse_bandwidth(text: str) -> int:
    """A tc-style rate ('1gbit', '100mbit', '2.5gbit') in bits per second (k/m/g = 1000s)."""
    m = _BANDWIDTH.match(str(text).strip().lower())
    rate = round(float(m[1]) * _RATE_UNITS[m[2]]) if m else 0
    if rate <= 0:
        raise ClusterError(
            f"bandwidth {text!r} is not a positive rate; write it like '1gbit', '100mbit' "
            "or '500kbit'"
        )
    return rate


def parse_latency(text: str) -> float:
    """A delay ('10ms', '0.5ms', '100us', '1s') in seconds."""
    m = _LATENCY.match(str(text).strip().lower())
    seconds = float(m[1]) * _TIME_UNITS[m[2]] if m else 0.0
    if seconds <= 0:
        raise ClusterError(
            f"latency {text!r} is not a positive delay; write it like '10ms', '0.5ms' or "
            "'100us' (omit it for none)"
        )
    return seconds
