"""How far apart the recorded runs of one setting are, and what that allows any predictor.

The planner's validation targets (issue 14: median |predicted/measured - 1| <= 10%, max <= 25%
over every recorded netns run) judge one prediction per setting (model, mode, N, bandwidth,
batch, image size, PS/FC tasks) against every record of it. Where a setting was measured
more than once, no prediction can be closer to all of its records than the records are to
each other. This prints, over the same records ``ralp.planner --validate`` reads:

- the spread of each repeated setting (fastest / slowest record);
- the best any predictor can do on the maximum error: for a setting measured at a and b > a,
  the prediction 2ab / (a + b) is (b - a) / (a + b) off both, and nothing is closer to both;
- the most records any predictor can have within 10% (per setting, the prediction that puts
  the most of its records within 10%): below half, a median of 10% is out of reach;
- the settings whose modes swap order between recorded runs (each more than 5% ahead of the
  other in some run): no fixed choice is within 0.95x of the best in all of them.

    .venv/bin/python benchmarks/record_spread.py benchmarks/results/bench_*.json ... \\
        > benchmarks/results/record_spread.txt
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from ralp.planner.validate import load_records

SWAP_MARGIN = 0.05  # a mode counts as ahead of another only by more than this


def setting_of(r: dict) -> tuple:
    return (r["model"], r["mode"], r["devices"], r["bandwidth"], r["batch_size"],
            r["image_size"], r["ps"])


def most_within(values: list[float], tolerance: float = 0.10) -> int:
    """The most of ``values`` one prediction can be within ``tolerance`` of (relative). The
    best prediction can be taken at an edge of some value's tolerance band."""
    candidates = [v * (1 + s * tolerance) for v in values for s in (-1, 0, 1)]
    return max(sum(abs(p / v - 1) <= tolerance + 1e-12 for v in values) for p in candidates)


def swapped_pairs(records: list[tuple[str, dict]]) -> dict[tuple, list[tuple[str, str]]]:
    """Per (model, N, bandwidth, batch, image): pairs of modes each ahead of the other by more
    than SWAP_MARGIN in some result file holding both."""
    runs: dict[tuple, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for source, r in records:
        key = (r["model"], r["devices"], r["bandwidth"], r["batch_size"], r["image_size"])
        mode = f"stanza F={r['ps']}" if r["mode"] == "stanza" else r["mode"]
        runs[key][source][mode] = r["images_per_sec"]
    out = {}
    for key, by_file in sorted(runs.items()):
        modes = sorted({m for ms in by_file.values() for m in ms})
        pairs = []
        for i, a in enumerate(modes):
            for b in modes[i + 1:]:
                ahead = {ms[a] > ms[b] for ms in by_file.values() if a in ms and b in ms
                         and abs(ms[a] / ms[b] - 1) > SWAP_MARGIN}
                if len(ahead) == 2:
                    pairs.append((a, b))
        if pairs:
            out[key] = pairs
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", help="bench result JSON files")
    args = p.parse_args()
    records = load_records(args.results)
    by_setting: dict[tuple, list[tuple[float, str]]] = defaultdict(list)
    for source, r in records:
        by_setting[setting_of(r)].append((r["images_per_sec"], source))
    repeated = {k: v for k, v in by_setting.items() if len(v) > 1}
    spread = sorted((max(v for v, _ in runs) / min(v for v, _ in runs), k, runs)
                    for k, runs in repeated.items())
    print(f"{len(records)} records, {len(by_setting)} settings, {len(repeated)} measured "
          "more than once")
    if spread:
        ratios = [s for s, _, _ in spread]
        print(f"fastest / slowest record of a repeated setting: median {statistics.median(ratios):.2f}, "
              f"max {ratios[-1]:.2f}; above 5/3 (no prediction within 25% of both) in "
              f"{sum(r > 5 / 3 for r in ratios)}")
        print(f"best possible max |error| over these records: {(ratios[-1] - 1) / (ratios[-1] + 1):.1%}")
    within = sum(most_within([v for v, _ in runs]) for runs in by_setting.values())
    print(f"most records any predictor can have within 10%: {within} of {len(records)} "
          f"({within / len(records):.0%})")
    print("\nwidest spreads (images/s per result file):")
    for ratio, key, runs in spread[::-1][:10]:
        model, mode, n, bw = key[:4]
        cells = ", ".join(f"{v:.1f} {src}" for v, src in runs)
        print(f"  {ratio:4.2f}x {model} {mode} N={n} {bw}: {cells}")
    swaps = swapped_pairs(records)
    print(f"\nsettings whose modes swap order between recorded runs (each > {SWAP_MARGIN:.0%} "
          f"ahead in some run): {len(swaps)}")
    for (model, n, bw, batch, image), pairs in swaps.items():
        print(f"  {model} N={n} {bw} b{batch} {image}px: "
              + ", ".join(f"{a} / {b}" for a, b in pairs))


if __name__ == "__main__":
    main()
