"""Who pays for the simulated network's kernel work? A budgeted device's CPU under other
devices' traffic (issue 25 (a)).

This kernel is built without IRQ time accounting (``CONFIG_IRQ_TIME_ACCOUNTING`` unset), so the
time a CPU spends in a softirq is charged to whichever task it interrupted. On the simulated
fabric most packet work runs in softirqs: tbf's watchdog timer releases a shaped link's queued
packets, and the veth, bridge and receiving TCP work follows in the same softirq. If that lands
on a budgeted task, its CFS quota pays for another device's network, at random.

This measures it. A CPU-bound spinner (a Python loop; no network) runs in a control group with
a device's budget, alone and while two other namespaces exchange TCP traffic over the fabric
at each link rate, and counts its loop iterations per CPU-second charged to its group
(``cpuacct.usage``), with the system share of that charge (``cpuacct.stat``). Trials are
interleaved in rounds. Fewer iterations per charged second, and more system time, under
traffic mean the spinner's budget paid for other tasks' packets.

    .venv/bin/python benchmarks/softirq_charge.py --rates 1gbit 10gbit --cpus 0.425 \\
        --seconds 8 --rounds 3 --out benchmarks/results/softirq_charge.json

Needs root (namespaces, control groups; cgroup v1 for the system share).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SPIN = """
import sys, time
end = time.monotonic() + float(sys.argv[1])
n = 0
while time.monotonic() < end:
    for _ in range(20000):
        pass
    n += 1
print(n)
"""
RECEIVE = """
import socket, sys, time
srv = socket.create_server(("0.0.0.0", 5001))
conn, _ = srv.accept()
got, buf = 0, bytearray(1 << 20)
while True:
    n = conn.recv_into(buf)
    if not n:
        break
    got += n
print(got)
"""
SEND = """
import socket, sys, time
end = time.monotonic() + float(sys.argv[2])
for _ in range(100):
    try:
        s = socket.create_connection((sys.argv[1], 5001), timeout=5)
        break
    except OSError:
        time.sleep(0.05)
data = b"x" * (1 << 20)
while time.monotonic() < end:
    s.sendall(data)
s.close()
"""


def group_figures(hierarchy, name: str) -> dict[str, float]:
    """CPU seconds charged to a v1 group: in all, in system mode; its throttled periods."""
    directory = os.path.join(hierarchy.usage, name)
    with open(os.path.join(directory, "cpuacct.usage")) as f:
        used = int(f.read()) / 1e9
    with open(os.path.join(directory, "cpuacct.stat")) as f:
        ticks = dict(line.split() for line in f)
    throttled = 0
    with contextlib.suppress(OSError), open(os.path.join(hierarchy.limit, name, "cpu.stat")) as f:
        throttled = dict(line.split() for line in f).get("nr_throttled", 0)
    tick = os.sysconf("SC_CLK_TCK")
    return {"used_s": used, "system_s": int(ticks["system"]) / tick,
            "throttled": int(throttled)}


def trial(groups, seconds: float, hosts=None) -> dict:
    """The spinner in its group for ``seconds``; meanwhile traffic between ``hosts`` (sender,
    receiver) if given."""
    group, name = groups.group("spin"), f"{groups.prefix}/spin"
    before = group_figures(groups.hierarchy, name)
    traffic = []
    if hosts is not None:
        snd, rcv = hosts
        traffic.append(subprocess.Popen(["ip", "netns", "exec", rcv.namespace, sys.executable,
                                         "-c", RECEIVE], stdout=subprocess.PIPE, text=True))
        time.sleep(0.3)
        traffic.append(subprocess.Popen(["ip", "netns", "exec", snd.namespace, sys.executable,
                                         "-c", SEND, rcv.address, str(seconds + 1.0)]))
        time.sleep(0.5)  # the flow at speed before the spinner starts
    try:
        spin = subprocess.run(group.joined_command([sys.executable, "-c", SPIN, str(seconds)]),
                              capture_output=True, text=True, check=True)
        after = group_figures(groups.hierarchy, name)
        received = None
        if traffic:
            traffic[1].wait(timeout=30)
            out, _ = traffic[0].communicate(timeout=30)
            received = int(out.strip() or 0)
    finally:
        for p in traffic:
            if p.poll() is None:
                p.kill()
                p.wait()
    used = after["used_s"] - before["used_s"]
    return {"iterations": int(spin.stdout.strip()), "used_s": used,
            "system_s": after["system_s"] - before["system_s"],
            "throttled_periods": after["throttled"] - before["throttled"],
            "iterations_per_cpu_s": int(spin.stdout.strip()) / used,
            "traffic_gbit_s": None if received is None else received * 8 / 1e9 / (seconds + 1.0)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rates", nargs="+", default=["1gbit", "10gbit"])
    p.add_argument("--cpus", type=float, default=0.425, help="the spinner's budget")
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", required=True)
    args = p.parse_args()

    from ralp.emulation.devices import DeviceGroups, find_hierarchy, new_prefix
    from ralp.emulation.fabric import NetnsFabric

    hierarchy, reason = find_hierarchy()
    if hierarchy is None or hierarchy.version != 1:
        raise SystemExit(f"needs cgroup v1's cpu and cpuacct controllers: {reason or 'v2'}")
    conditions = ["alone", *args.rates]
    results: dict[str, list[dict]] = {c: [] for c in conditions}
    with contextlib.ExitStack() as stack:
        groups = stack.enter_context(DeviceGroups(hierarchy, new_prefix(), ["spin"], args.cpus))
        fabrics = {}
        for k, rate in enumerate(args.rates):
            fabric = stack.enter_context(NetnsFabric(rate, prefix=f"rlp{os.getpid()}-f{k}"))
            fabrics[rate] = (fabric.add_host("snd"), fabric.add_host("rcv"))
        for r in range(args.rounds):
            order = conditions[r % len(conditions):] + conditions[:r % len(conditions)]
            for c in order:
                t = trial(groups, args.seconds, fabrics.get(c))
                results[c].append(t)
                print(f"round {r} {c:7s} {t['iterations_per_cpu_s']:9.0f} iterations per CPU-s, "
                      f"used {t['used_s']:.2f} s (system {t['system_s']:.2f} s), "
                      f"throttled {t['throttled_periods']}, traffic "
                      f"{t['traffic_gbit_s'] or 0:.2f} Gbit/s", flush=True)
    base = statistics.median(t["iterations_per_cpu_s"] for t in results["alone"])
    summary = {c: {"iterations_per_cpu_s": statistics.median(t["iterations_per_cpu_s"] for t in ts),
                   "work_per_charged_cpu_vs_alone": statistics.median(
                       t["iterations_per_cpu_s"] for t in ts) / base,
                   "system_share": statistics.median(t["system_s"] / t["used_s"] for t in ts),
                   "traffic_gbit_s": statistics.median(t["traffic_gbit_s"] or 0 for t in ts)}
               for c, ts in results.items()}
    for c, s in summary.items():
        print(f"{c:7s} work per charged CPU-second {s['work_per_charged_cpu_vs_alone']:.2f}x "
              f"of alone, system share {s['system_share']:.0%}, traffic "
              f"{s['traffic_gbit_s']:.2f} Gbit/s")
    Path(args.out).write_text(json.dumps({"command": " ".join(sys.argv), "cpus": args.cpus,
                                          "summary": summary, "trials": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
