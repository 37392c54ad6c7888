"""The planner's plot: predicted images/s against devices, one panel per link rate, one
line per mode (log-log), for the real cluster's plan and the simulated cluster's alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence


def draw(points: Iterable[tuple[int, str, int, float]], modes: Sequence[str],
         title: Callable[[int], str], xlabel: str, path: str, x_base: int = 10) -> None:
    """Write the plot of ``points`` ((rate bits/s, mode, devices, images/s) each) to
    ``path``: a panel per rate titled ``title(rate)``, a line per mode in ``modes``' order,
    the x axis in log base ``x_base``."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    points = list(points)
    rates = list(dict.fromkeys(rate for rate, _, _, _ in points))
    fig, axes = plt.subplots(1, len(rates), figsize=(5 * len(rates), 4), squeeze=False,
                             sharey=True)
    for ax, rate in zip(axes[0], rates, strict=True):
        for mode in modes:
            pts = [(n, y) for r, m, n, y in points if r == rate and m == mode]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", label=mode)
        ax.set_xscale("log", base=x_base)
        ax.set_yscale("log")
        ax.set(title=title(rate), xlabel=xlabel)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("predicted images/s")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
