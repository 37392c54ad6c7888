"""The planner against repeated runs on budgeted devices: each setting's median and noise band.

A setting (model, mode, N, link rate, workload, the devices' budget) measured in several
interleaved rounds (``python -m ralp.bench --repeat R``) has a median and a noise band, the
min-max of its rounds. A prediction inside the band is as good as the measurement allows and
counts as exact. Reported, per mode and overall:

- |error| of the predicted images/s against each setting's median;
- the error of the predicted speedup over plain PS against the median of the per-round
  speedups (a round's mode over the same round's plain PS);
- rank agreement of the modes within each group of settings (Kendall's tau);
- auto: the mode the planner picks among those measured, against the best measured median;
  where the best two modes' bands overlap, either counts as best.

Only budgeted records count here (``device_cpus`` not ``shared``, no fall-back): shared-CPU
records measure the host's sharing, not devices. Pure functions of records and predictions.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scipy.stats import kendalltau

GROUP_FIELDS = ("model", "devices", "bandwidth", "batch_size", "image_size", "num_classes",
                "device_cpus")


@dataclass
class Setting:
    """One mode in one group: its rounds' images/s and plain PS's of the same rounds."""

    group: tuple
    mode: str
    rounds: dict[int, float] = field(default_factory=dict)  # round -> images/s
    predicted: float | None = None
    records: list[dict] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.rounds.values())

    @property
    def band(self) -> tuple[float, float]:
        return min(self.rounds.values()), max(self.rounds.values())

    @property
    def error(self) -> float:
        """predicted / median - 1, or 0 inside the noise band."""
        low, high = self.band
        return 0.0 if low <= self.predicted <= high else self.predicted / self.median - 1


def budgeted(record: dict) -> bool:
    """A record of a run on budgeted devices (counted, not shared, not fallen back)."""
    cpu = record.get("cpu") or {}
    return (record.get("device_cpus") not in (None, "shared") and cpu.get("budget_cpus")
            is not None and not cpu.get("fallback"))


def flagged(record: dict) -> bool:
    """A record the host could not keep up with (its budgets and the CPU spent outside them
    reached the host's CPUs, so some device got less than its budget): not a device's run."""
    return record.get("host_kept_up") is False


def settings_of(records: Iterable[dict]) -> dict[tuple, dict[str, Setting]]:
    """Group -> mode -> :class:`Setting`, from successful budgeted records the host kept up
    with (:func:`flagged` ones are left out).

    Raises:
        ValueError: two records of one setting claim the same round: two runs of it (files
            of different days, say) whose rounds would mix in one band; validate them apart.
    """
    out: dict[tuple, dict[str, Setting]] = {}
    for r in records:
        if r.get("error") or not r.get("images_per_sec") or not budgeted(r) or flagged(r):
            continue
        group = tuple(r.get(k) for k in GROUP_FIELDS)
        s = out.setdefault(group, {}).setdefault(r["mode"], Setting(group, r["mode"]))
        number = r.get("round") or 0
        if number in s.rounds:
            raise ValueError(f"two runs of {r['model']} {r['mode']} N={r['devices']} at "
                             f"{r['bandwidth']} both have a round {number}: their rounds "
                             "are not one band; validate each run's file apart")
        s.rounds[number] = r["images_per_sec"]
        s.records.append(r)
    return out


Predictor = Callable[[Setting], float]  # a setting's predicted images/s


def speedup_error(setting: Setting, ps: Setting) -> float | None:
    """The predicted speedup over plain PS against the median per-round measured one (0
    inside the per-round speedups' band); None where no round has both."""
    per_round = [setting.rounds[k] / ps.rounds[k] for k in setting.rounds if k in ps.rounds]
    if not per_round:
        return None
    predicted = setting.predicted / ps.predicted
    if min(per_round) <= predicted <= max(per_round):
        return 0.0
    return predicted / statistics.median(per_round) - 1


def auto_pick(modes: dict[str, Setting]) -> dict:
    """The planner's pick among the measured modes against the best measured median."""
    pick = max(modes.values(), key=lambda s: s.predicted)
    ranked = sorted(modes.values(), key=lambda s: s.median, reverse=True)
    best = ranked[0]
    tied = [best.mode] + [s.mode for s in ranked[1:2] if s.band[1] >= best.band[0]]
    ratio = 1.0 if pick.mode in tied else pick.median / best.median
    return {"chosen": pick.mode, "best": best.mode, "best_within_noise": tied,
            "chosen_over_best": ratio}


def validate(groups: dict[tuple, dict[str, Setting]], predict: Predictor) -> dict:
    """Every figure of the module docstring, and one row per setting."""
    rows, speedups, taus, picks = [], [], [], []
    for group, modes in groups.items():
        for s in modes.values():
            s.predicted = predict(s)
        ps = modes.get("ps")
        for s in modes.values():
            sp = speedup_error(s, ps) if ps is not None and s.mode != "ps" else None
            if sp is not None:
                speedups.append(sp)
            rows.append({**dict(zip(GROUP_FIELDS, group, strict=True)), "mode": s.mode,
                         "rounds": len(s.rounds), "measured_median": s.median,
                         "band": list(s.band), "predicted": s.predicted, "error": s.error,
                         "speedup_error": sp})
        if len(modes) >= 2:
            names = sorted(modes)
            tau = kendalltau([modes[m].predicted for m in names], [modes[m].median for m in names])
            taus.append(0.0 if tau.statistic != tau.statistic else float(tau.statistic))
            picks.append({**dict(zip(GROUP_FIELDS, group, strict=True)), "kendall_tau": taus[-1],
                          **auto_pick(modes)})
    return {"settings": rows, "errors": _summary(rows), "speedup": _abs_stats(speedups),
            "kendall_tau_median": statistics.median(taus) if taus else None,
            "auto": picks, "auto_summary": _auto_summary(picks)}


def _abs_stats(values: list[float]) -> dict:
    absolute = [abs(v) for v in values]
    return {"count": len(values),
            "median_abs_error": statistics.median(absolute) if absolute else None,
            "max_abs_error": max(absolute) if absolute else None}


def _summary(rows: list[dict]) -> dict:
    by_mode: dict[str, list[float]] = {}
    for row in rows:
        by_mode.setdefault(row["mode"], []).append(row["error"])
    return {"overall": _abs_stats([row["error"] for row in rows]),
            **{mode: _abs_stats(errors) for mode, errors in sorted(by_mode.items())},
            "inside_band": sum(1 for row in rows if row["error"] == 0.0)}


def _auto_summary(picks: list[dict]) -> dict:
    ratios = [p["chosen_over_best"] for p in picks]
    return {"settings": len(picks),
            "within_0.95": sum(1 for r in ratios if r >= 0.95),
            "worst": min(ratios) if ratios else None}


def to_text(report: dict) -> str:
    """The repeats validation as a reader wants it: the figures first, then every setting."""
    e, sp, auto = report["errors"], report["speedup"], report["auto_summary"]
    lines = [f"{e['overall']['count']} settings on budgeted devices (medians of their rounds; "
             f"a prediction inside a setting's min-max counts as exact: {e['inside_band']})"]
    if report.get("excluded_flagged"):
        lines.append(f"left out: {report['excluded_flagged']} records the host could not keep "
                     "up with (flagged in the bench's table)")
    lines.append(f"images/s: median |error| {_pct(e['overall']['median_abs_error'])}, max "
                 f"{_pct(e['overall']['max_abs_error'])}")
    for mode, stats in e.items():
        if mode not in ("overall", "inside_band"):
            lines.append(f"  {mode:<8} {stats['count']:>3} settings: median "
                         f"{_pct(stats['median_abs_error'])}, max {_pct(stats['max_abs_error'])}")
    lines.append(f"speedup over plain PS ({sp['count']}): median |error| "
                 f"{_pct(sp['median_abs_error'])}, max {_pct(sp['max_abs_error'])}")
    tau = report["kendall_tau_median"]
    lines.append(f"rank agreement: median Kendall's tau {'-' if tau is None else f'{tau:.2f}'}")
    if auto["settings"]:
        lines.append(f"auto: within 0.95x of the best measured mode in {auto['within_0.95']} of "
                     f"{auto['settings']} settings; worst {auto['worst']:.2f}x")
    lines += ["", f"{'model':<10} {'N':>2} {'link':>8} {'mode':<8} {'rounds':>6} "
              f"{'measured [band]':>24} {'predicted':>9} {'error':>7}"]
    for r in report["settings"]:
        band = f"{r['measured_median']:.1f} [{r['band'][0]:.1f}-{r['band'][1]:.1f}]"
        lines.append(f"{r['model']:<10} {r['devices']:>2} {r['bandwidth']:>8} {r['mode']:<8} "
                     f"{r['rounds']:>6} {band:>24} {r['predicted']:>9.1f} {r['error']:>+7.1%}")
    if report["auto"]:
        lines += ["", f"{'auto per setting':<28} {'chosen':<8} {'best':<8} {'chosen/best':>11} "
                  f"{'tau':>5}"]
        for p in report["auto"]:
            what = f"{p['model']} N={p['devices']} {p['bandwidth']}"
            lines.append(f"{what:<28} {p['chosen']:<8} {p['best']:<8} "
                         f"{p['chosen_over_best']:>11.2f} {p['kendall_tau']:>5.2f}")
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"
