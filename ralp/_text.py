"""Plain-text helpers shared by the renderers (profile tables, bench tables and plots).

Free of TensorFlow imports, so re-rendering saved results stays fast.
"""

from __future__ import annotations


def _decimal(n: float, units: tuple[str, ...], sep: str) -> str:
    """``n`` in steps of 1000: whole numbers in the first unit, one decimal after."""
    for k, unit in enumerate(units):
        if abs(n) < 1000 or k == len(units) - 1:
            return f"{n:.0f}{sep}{unit}" if k == 0 else f"{n:.1f}{sep}{unit}"
        n /= 1000
    raise AssertionError("unreachable")


def human_bytes(n: float) -> str:
    return _decimal(n, ("B", "KB", "MB", "GB", "TB"), " ")


def human_count(n: float) -> str:
    return _decimal(n, ("", "K", "M", "G", "T"), "")


def human_seconds(s: float) -> str:
    """A duration with three significant figures: ``1.23 s``, ``45.6 ms``, ``789 us``."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(s) >= scale or unit == "us":
            return f"{s / scale:.3g} {unit}"
    raise AssertionError("unreachable")


def text_grid(
    header: list[str], body: list[list[str]], divider_after: int | None = None, divider: str = ""
) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *body, strict=True)]
    numeric = (
        [all(_looks_numeric(row[k]) for row in body) for k in range(len(header))] if body else []
    )

    def fmt(row: list[str]) -> str:
        cells = [
            c.rjust(w) if numeric and numeric[k] else c.ljust(w)
            for k, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    rule = "-" * (sum(widths) + 2 * (len(widths) - 1))
    out = [fmt(header), rule]
    for k, row in enumerate(body):
        out.append(fmt(row))
        if divider_after is not None and k == divider_after:
            out.append(f"{'-' * 4} {divider} ".ljust(len(rule), "-"))
    return out


def _looks_numeric(cell: str) -> bool:
    return bool(cell) and (cell[0].isdigit() or cell[0] in "+-.") and cell not in ("-",)
