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


def format_bandwidth(bits_per_s: float) -> str:
    """A rate in bits per second as tc writes it ('1gbit', '250mbit', '333.333mbit'), to the
    bit; :func:`parse_bandwidth` reads it back."""
    rate = max(1, round(bits_per_s))
    for unit in ("gbit", "mbit", "kbit"):
        scale = _RATE_UNITS[unit]
        if rate >= scale:
            return f"{rate / scale:.12g}{unit}"
    return f"{rate}bit"


def format_latency(seconds: float) -> str:
    """A delay in seconds as '10ms', '2.5ms' or '250us' (to the microsecond, at least 1 us)."""
    micros = max(1, round(seconds * 1e6))
    return f"{micros / 1000:g}ms" if micros >= 1000 else f"{micros}us"
