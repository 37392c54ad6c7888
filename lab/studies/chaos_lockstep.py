"""The chaos run's lockstep modes (horovod, stanza, collective): a job whose ranks are killed
at chosen steps, restarted whole from its newest checkpoint by a supervisor
(:func:`ralp.cluster.supervise.supervise`), against a failure-free job of the same seed.

Each rank runs :mod:`lab.studies.chaos_ranks`. The killer reads the rank's process id
from the file the rank wrote (this run's own processes, checked to descend from this one) and
SIGKILLs it once rank 0 has reported the step; the launcher then stops the other ranks, and
the supervisor starts the job again (``--max-restarts``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from ralp._process import process_gone

LOCKSTEP_MODES = ("horovod", "stanza", "collective")
DEFAULT_KILLS = {  # the schedule: Stanza loses an FC rank, then a CONV rank
    "horovod": ("rank:1@150",), "collective": ("rank:1@150",),
    "stanza": ("fc:0@100", "conv:1@200"),
}


def ranks_of(mode: str, workers: int) -> int:
    """The job's ranks: ``workers`` data ranks, and Stanza's one FC rank after them."""
    return workers + (1 if mode == "stanza" else 0)


def rank_index(kill, mode: str, workers: int) -> int:
    """The rank a kill names: ``rank:K``, or for Stanza ``conv:K`` / ``fc:G`` (the FC ranks
    come after the CONV ranks)."""
    if kill.job == "fc":
        return workers + kill.index
    return kill.index


class RankKiller:
    """``on_progress`` of a chaos job: SIGKILLs each kill's rank once its step is reported."""

    def __init__(self, pids_dir: Path, kills, mode: str, workers: int):
        self.pids_dir, self.mode, self.workers = pids_dir, mode, workers
        self.pending, self.done = sorted(kills, key=lambda k: k.step), []
        self.seen_pids: set[int] = set()
        self.copy_seconds: list[float] = []
        self.copy_waited: list[float] = []

    def __call__(self, message) -> None:
        if message[0] == "copy_seconds":  # each copy's time, and the time a step waited for it
            self.copy_seconds += message[1]["seconds"]
            self.copy_waited += message[1]["waited"]
        while self.pending and message[0] == "step" and message[1] >= self.pending[0].step:
            kill = self.pending.pop(0)
            rank = rank_index(kill, self.mode, self.workers)
            pid = self._pid(rank)
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.done.append({"task": str(kill).split("@")[0], "rank": rank,
                              "asked_at_step": kill.step, "killed_at_step": message[1],
                              "pid": pid, "at": time.time()})

    def _pid(self, rank: int) -> int | None:
        """Rank ``rank``'s process id, if it is one this process started."""
        import psutil

        try:
            pid = int((self.pids_dir / f"rank{rank}.pid").read_text())
        except (OSError, ValueError):
            return None
        self.seen_pids.add(pid)
        mine = {p.pid for p in psutil.Process().children(recursive=True)}
        return pid if pid in mine else None

    def lost_task(self, error: BaseException) -> str:
        return f"rank:{self.done[-1]['rank']}" if self.done else "job"

    def all_pids(self) -> set[int]:
        for path in self.pids_dir.glob("rank*.pid"):
            with contextlib.suppress(OSError, ValueError):
                self.seen_pids.add(int(path.read_text()))
        return self.seen_pids


def rank_command(mode: str, args, checkpoint_dir: str, pids_dir: str) -> list[str]:
    return [sys.executable, "-m", "lab.studies.chaos_ranks", mode, str(args.steps),
            str(args.batch_size), args.optimizer, str(args.learning_rate), args.schedule,
            str(args.seed), checkpoint_dir, str(args.checkpoint_every), pids_dir]


def launch_once(mode: str, args, backend: str, bandwidth: str | None, command: list[str],
                env: dict[str, str], progress) -> dict:
    """One start of the job on ``backend``; rank 0's record."""
    timeout = 3600.0
    if mode == "collective":
        from ralp.collective.launch import launch

        return launch(lambda links, cpu: command, args.workers, backend, bandwidth=bandwidth,
                      on_progress=progress, timeout=timeout, env=env)
    from ralp.horovod.launch import launch

    return launch(lambda links, cpu: command, args.workers, backend, bandwidth=bandwidth,
                  on_progress=progress, timeout=timeout, fc_ranks=1 if mode == "stanza" else 0,
                  env=env)


def run_lockstep(mode: str, args, kills, backend: str, bandwidth: str | None) -> dict:
    """One run of the job (``kills`` empty: failure-free), restarted after each lost rank;
    rank 0's record with the kills, the restarts and what was left running."""
    from ralp.cluster.supervise import supervise
    from ralp.collective.runtime import CollectiveError
    from ralp.horovod.launch import HorovodRunError

    with tempfile.TemporaryDirectory(prefix="ralp-chaos-") as directory:
        pids = Path(directory, "pids")
        pids.mkdir()
        killer = RankKiller(pids, kills, mode, args.workers)
        command = rank_command(mode, args, str(Path(directory, "ckpt")), str(pids))
        supervised = supervise(
            lambda env, progress: launch_once(mode, args, backend, bandwidth, command, env,
                                              progress),
            max_restarts=args.max_restarts, errors=(HorovodRunError, CollectiveError),
            lost_task=killer.lost_task, on_progress=killer)
        out = dict(supervised.result)
        out["kills"], out["restarts"] = killer.done, supervised.restarts
        out["copy_seconds"], out["copy_waited_s"] = killer.copy_seconds, killer.copy_waited
        out["time_lost_s"] = sum(f.get("time_lost_s") or 0.0 for f in out["failures"])
        out["save_overhead"] = round(out["save_s"] / max(1e-9, out["wall_s"] - out["save_s"]), 4)
        out["left_running"] = left_running_pids(killer.all_pids()) + _namespaces_left()
    return out


def left_running_pids(pids) -> list[str]:
    """Which of ``pids`` are still running (a zombie is not)."""
    return [f"pid {pid}" for pid in sorted(pids) if not process_gone(pid)]


def _namespaces_left() -> list[str]:
    """This process's launchers' namespaces (named rlp<pid>...) still there."""
    from ralp.emulation.iproute import netns_unavailable_reason, run_command

    if netns_unavailable_reason() is not None:
        return []
    prefix = f"rlp{os.getpid()}"
    return [f"netns {ns}" for ns in run_command("ip netns list").split()
            if ns.startswith(prefix)]
