"""Synchronization paradigms for parameter-server training, as pure logic (DSSP; Zhao et al. 2019).

A worker's *clock* is the number of gradients it has pushed. Before a worker starts an
iteration it must be allowed to; the *gap* it starts at is its clock minus the slowest
worker's. The paradigms bound that gap:

=============  =========================================================================
``bsp``        gap 0: a round ends when every worker has pushed (the trainer then makes
               one update from all W gradients)
``asp``        no bound: nobody waits (stale gradients)
``ssp(s)``     gap <= s: the fastest worker runs at most s iterations ahead
``dssp(L,U)``  gap <= U, with each worker's bound picked at run time in [L, U] by the
               :class:`DSSPController` from recent push intervals
``dssp-paper`` DSSP exactly as its paper's pseudo-code (Zhao et al. 2019): the controller's grant
``(L,U)``      is not capped at U, a grant spent lets the fastest ask again, and the push
               that triggers the controller passes without using up a granted iteration,
               so the gap is *not* bounded by U (r_max = U - L bounds one grant only)
=============  =========================================================================

The difference: capped DSSP keeps the regret bound of SSP(U) that the paper's analysis
assumes; the literal one can run further ahead, as the paper's heterogeneous result (DSSP
close to ASP in time to accuracy) suggests it did. Records show the largest gap reached.

:class:`SyncServer` is the server side: it takes push events (worker, time) and says which
workers may start their next iteration; a worker not allowed is *held* until a push of the
slowest lets it go. It records every start (and its gap), every hold and its waiting time.
:func:`simulate` runs it against scripted compute times (the unit tests' scenarios, and a
what-if tool); the trainer drives it with real pushes.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ralp.errors import RalpError

PARADIGMS = ("bsp", "asp", "ssp", "dssp", "dssp-paper")
DSSP_PARADIGMS = ("dssp", "dssp-paper")


class SyncError(RalpError, ValueError):
    """A synchronization setting that cannot work; the message says what to use instead."""


@dataclass(frozen=True)
class SyncPolicy:
    """Which paradigm, with its staleness: ``SyncPolicy.parse("dssp:3:15")``."""

    paradigm: str = "asp"
    staleness: int = 0  # ssp: s; dssp: s_L
    upper: int = 0  # dssp: s_U (dssp-paper: s_L + r_max, the largest single grant)

    def __post_init__(self) -> None:
        if self.paradigm not in PARADIGMS:
            raise SyncError(f"unknown sync {self.paradigm!r}; choose from {', '.join(PARADIGMS)}")
        if self.staleness < 0 or (self.is_dssp and self.upper < self.staleness):
            raise SyncError(f"staleness must satisfy 0 <= s_L <= s_U, got {self.staleness}, "
                            f"{self.upper}")

    @classmethod
    def parse(cls, text: str, staleness=None) -> SyncPolicy:
        """``bsp``, ``asp``, ``ssp:S`` / ``ssp`` with ``staleness=S``, ``dssp:L:U`` / ``dssp``
        with ``staleness=(L, U)``, ``dssp-paper:L:U`` (the uncapped, literal DSSP)."""
        m = re.fullmatch(r"(bsp|asp|ssp|dssp-paper|dssp)(?::(\d+))?(?::(\d+))?",
                         str(text).strip().lower())
        if m is None:
            raise SyncError(f"sync {text!r}: use bsp, asp, ssp:S, dssp:L:U or dssp-paper:L:U "
                            "(e.g. ssp:3, dssp:3:15)")
        name, a, b = m.group(1), m.group(2), m.group(3)
        if name in ("bsp", "asp"):
            if a is not None or staleness is not None:
                raise SyncError(f"{name} takes no staleness")
            return cls(name)
        if name == "ssp":
            if b is not None:
                raise SyncError("ssp takes one staleness bound: ssp:S")
            s = int(a) if a is not None else staleness
            if not isinstance(s, int):
                raise SyncError("ssp needs its bound: ssp:S (e.g. ssp:3)")
            return cls("ssp", s)
        if a is not None and b is not None:
            return cls(name, int(a), int(b))
        if a is None and isinstance(staleness, Sequence) and len(staleness) == 2:
            return cls(name, int(staleness[0]), int(staleness[1]))
        raise SyncError(f"{name} needs its range: {name}:L:U (e.g. {name}:3:15)")

    @property
    def is_dssp(self) -> bool:
        return self.paradigm in DSSP_PARADIGMS

    @property
    def bound(self) -> int | None:
        """The largest gap a worker may start an iteration at (None: unbounded)."""
        return {"bsp": 0, "asp": None, "ssp": self.staleness, "dssp": self.upper,
                "dssp-paper": None}[self.paradigm]

    def _numbers(self) -> tuple[int, ...]:
        if self.is_dssp:
            return (self.staleness, self.upper)
        return (self.staleness,) if self.paradigm == "ssp" else ()

    @property
    def spec(self) -> str:
        """The text :meth:`parse` reads back: "bsp", "asp", "ssp:3", "dssp:3:15"."""
        return self.paradigm + "".join(f":{n}" for n in self._numbers())

    def __str__(self) -> str:  # "ssp(3)", "dssp(3,15)"
        numbers = self._numbers()
        return f"{self.paradigm}({','.join(map(str, numbers))})" if numbers else self.paradigm


def as_policy(sync, staleness=None) -> SyncPolicy | None:
    """A :class:`SyncPolicy` from a name ("ssp", "dssp:3:15"), a policy, or None (no paradigm:
    ParameterServerStrategy's own asynchronous schedule)."""
    if sync is None:
        if staleness is not None:
            raise SyncError("staleness needs a sync paradigm (sync='ssp' or 'dssp')")
        return None
    if isinstance(sync, SyncPolicy):
        return sync
    return SyncPolicy.parse(sync, staleness)


class DSSPController:
    """Chooses how many extra iterations the fastest worker may run (DSSP; Zhao et al. 2019).

    It keeps each worker's last two push times. For the fastest worker p and the slowest s,
    with latest intervals I_p and I_s and last pushes A_p and A_s, it simulates p's next
    pushes A_p + i I_p (i = 0..r_max) and s's A_s + I_s + k I_s (k = 0..r_max), and returns
    the r whose time is closest to one of the slowest's: p then waits least when it stops.
    """

    def __init__(self, workers: int, r_max: int):
        self.r_max = r_max
        self.last_two: list[list[float]] = [[] for _ in range(workers)]
        self.decisions: list[tuple[float, int, int]] = []  # (time, worker, r*)

    def record_push(self, worker: int, time: float) -> None:
        self.last_two[worker] = (self.last_two[worker] + [time])[-2:]

    def interval(self, worker: int) -> float | None:
        times = self.last_two[worker]
        return times[1] - times[0] if len(times) == 2 else None

    def extra_iterations(self, fastest: int, slowest: int, time: float) -> int:
        i_p, i_s = self.interval(fastest), self.interval(slowest)
        if i_p is None or i_s is None or not self.last_two[slowest]:
            r = 0  # not enough history yet: behave as SSP(s_L)
        else:
            a_p, a_s = self.last_two[fastest][-1], self.last_two[slowest][-1]
            slow = [a_s + i_s + k * i_s for k in range(self.r_max + 1)]
            # Ties (to a nanosecond, float noise aside) go to the fewest extra iterations.
            r = min(range(self.r_max + 1),
                    key=lambda i: (round(min(abs(a_p + i * i_p - t) for t in slow), 9), i))
        self.decisions.append((time, fastest, r))
        return r


@dataclass
class SyncRecord:
    """What a :class:`SyncServer` saw: per-worker clocks and waiting, and every start."""

    clocks: list[int]
    waiting_s: list[float]  # total time each worker was held
    starts: list[tuple[float, int, int, int]] = field(
        default_factory=list
    )  # (t, worker, clock, gap)
    holds: list[tuple[float, float, int]] = field(default_factory=list)  # (from, until, worker)
    max_gap: int = 0
    decisions: list[tuple[float, int, int]] = field(default_factory=list)  # dssp: (t, worker, r*)
    slow_delay_s: float | None = None  # the delay injected after each slow-worker push, if any

    def to_dict(self) -> dict:
        return {
            "clocks": list(self.clocks),
            "waiting_s": list(self.waiting_s),
            "total_waiting_s": sum(self.waiting_s),
            "max_gap": self.max_gap,
            "starts": [list(s) for s in self.starts],
            "holds": [list(h) for h in self.holds],
            "decisions": [list(d) for d in self.decisions],
            "slow_delay_s": self.slow_delay_s,
        }


class SyncServer:
    """The server's synchronization logic for ``workers`` workers under ``policy``.

    Call :meth:`start` once per worker at time 0 (every worker may start its first
    iteration), then :meth:`push` for every gradient a worker pushes. ``push`` returns the
    workers that may start their next iteration now (the pusher itself unless held, and any
    held worker this push lets go), and records each of those starts.
    """

    def __init__(self, policy: SyncPolicy, workers: int):
        if workers < 1:
            raise SyncError(f"need at least one worker, got {workers}")
        self.policy = policy
        self.workers = workers
        self.clock = [0] * workers
        self.extra = [0] * workers  # dssp: r_p, extra iterations granted and not yet used
        self.held: dict[int, float] = {}  # worker -> time it was held
        self.controller = (
            DSSPController(workers, policy.upper - policy.staleness)
            if policy.is_dssp
            else None
        )
        self.record = SyncRecord(clocks=self.clock, waiting_s=[0.0] * workers)

    # ------------------------------------------------------------------ events

    def start(self, worker: int, time: float = 0.0) -> None:
        """Record that ``worker`` starts an iteration (allowed by a previous answer)."""
        gap = self.clock[worker] - min(self.clock)
        self.record.starts.append((time, worker, self.clock[worker], gap))
        self.record.max_gap = max(self.record.max_gap, gap)

    def push(self, worker: int, time: float) -> list[int]:
        if worker in self.held:
            raise SyncError(f"worker {worker} pushed while held")
        self.clock[worker] += 1
        if self.controller is not None:
            self.controller.record_push(worker, time)
        go = []
        if self._may_continue(worker, time):
            go.append(worker)
        else:
            self.held[worker] = time
        for w in sorted(self.held):  # the slowest moving up can let held workers go
            if w != worker and self._within(w, self._hold_bound()):
                go.append(w)
        for w in go:
            if w in self.held:
                since = self.held.pop(w)
                self.record.waiting_s[w] += time - since
                self.record.holds.append((since, time, w))
            self.start(w, time)
        if self.controller is not None:
            self.record.decisions = self.controller.decisions
        return go

    # ------------------------------------------------------------------ rules

    def gap(self, worker: int) -> int:
        return self.clock[worker] - min(self.clock)

    def _within(self, worker: int, bound: int | None) -> bool:
        return bound is None or self.gap(worker) <= bound

    def _hold_bound(self) -> int | None:
        """Held workers go when their gap is back within this."""
        p = self.policy
        return None if p.paradigm == "asp" else (0 if p.paradigm == "bsp" else p.staleness)

    def _may_continue(self, worker: int, time: float) -> bool:
        p = self.policy
        if not p.is_dssp:
            return self._within(worker, p.bound)
        capped = p.paradigm == "dssp"
        gap = self.gap(worker)
        if self.extra[worker] > 0 and (gap <= p.upper or not capped):
            self.extra[worker] -= 1
            return True
        if gap <= p.staleness:
            return True
        if self.clock[worker] == max(self.clock):  # the fastest asks the controller
            assert self.controller is not None
            slowest = min(range(self.workers), key=lambda w: (self.clock[w], w))
            r = self.controller.extra_iterations(worker, slowest, time)
            if capped:
                r = min(r, p.upper - gap)  # never beyond s_U
            if r > 0:
                # As published, the push that asked passes on top of the r granted; capped,
                # it is the first of them.
                self.extra[worker] = r if not capped else r - 1
                return True
        return False


# ---------------------------------------------------------------------- simulation


def simulate(policy: SyncPolicy, compute_s: Sequence[Sequence[float]]) -> SyncRecord:
    """Run :class:`SyncServer` on scripted iteration times: worker p's k-th iteration takes
    ``compute_s[p][k]`` seconds (its pushes are where its iterations end). Each worker runs as
    many iterations as it has times. A worker that has pushed its last gradient is done: it
    is not held (it has nothing left to wait for), and when nobody is left to push, workers
    still held stop there (the run is over)."""
    workers = len(compute_s)
    server = SyncServer(policy, workers)
    events: list[tuple[float, int, int]] = []  # (push time, seq, worker)
    done = [0] * workers
    seq = 0

    def begin(w: int, t: float) -> None:
        nonlocal seq
        if done[w] < len(compute_s[w]):
            heapq.heappush(events, (t + compute_s[w][done[w]], seq, w))
            seq += 1

    for w in range(workers):
        server.start(w, 0.0)
        begin(w, 0.0)
    while events:
        t, _, w = heapq.heappop(events)
        done[w] += 1
        for go in server.push(w, t):
            begin(go, t)
        if done[w] == len(compute_s[w]):
            server.held.pop(w, None)
        if not events:
            server.held.clear()
    return server.record


simulate_sync = simulate  # the name ralp exports
