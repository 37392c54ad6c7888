"""Stanza's checkpoints, as its paper designs them (Wu et al. 2018, "Stanza: Layer Separation
for Distributed Training in Deep Learning", fault tolerance): every node checkpoints, and each
FC rank also sends a copy of its FC parameters to a CONV rank, so that losing an FC rank loses
no FC state.

What each rank writes (:class:`ralp.training.rank_checkpoints.LockstepCheckpoints` commits
them together):

- CONV rank 0: the head and the CONV ranks' optimizer state (every CONV replica is the same);
- FC rank g: its tail and the FC optimizer state (part ``tail<g>``);
- FC rank g's CONV peer (a CONV rank of g's group, drawn once per layout): the copy of that
  tail it is sent with Horovod's own broadcast, in a process set of the two ranks (part
  ``tail<g>-copy``). The copy is sent from a snapshot in a thread of each of the two ranks,
  while the next step computes, as the paper has it sent while the GPUs compute; the
  checkpoint is committed after that step, once the copy has landed. (Horovod runs the two
  process sets' collectives side by side, as it does the CONV and FC sets' in a step.)

On restore, CONV rank 0 reads the head and broadcasts it to the CONV ranks; each FC rank gets
its tail from its peer's copy (a broadcast from the peer), not from its own disk, which is
read only where the peer has no copy.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from ralp.horovod.collectives import broadcast_arrays, broadcast_variables


def fc_peer(layout, fc_index: int) -> int:
    """The CONV rank that holds FC rank ``fc_index``'s tail copy: one of its group, drawn
    with a seed of the layout, so that every rank (and every restart) draws the same."""
    seed = f"ralp-stanza-peer-{layout.size}-{layout.fc_workers}-{fc_index}"
    return random.Random(seed).choice(layout.group(fc_index))


def copy_process_sets(trainer) -> list:
    """One Horovod process set per FC rank: it and its peer (every rank adds all of them, in
    the same order, as Horovod requires)."""
    hvd, layout = trainer.hvd, trainer.layout
    sets = []
    for g in range(layout.fc_workers):
        pair = sorted((fc_peer(layout, g), layout.fc_ranks[g]))
        sets.append(hvd.global_process_set if len(pair) == layout.size
                    else trainer._process_set(tuple(pair)))
    return sets


def _head_variables(trainer) -> list:
    from ralp.training.rank_checkpoints import part_variables

    return part_variables("head", trainer.split.head.variables, trainer.optimizer)


def _tail_variables(trainer) -> list:
    from ralp.training.rank_checkpoints import part_variables

    return part_variables("tail", trainer.split.tail.variables, trainer.optimizer)


def checkpoint_parts(trainer) -> dict[str, dict]:
    """This rank's own parts of a checkpoint: CONV rank 0 the head, each FC rank its tail."""
    from ralp.training.rank_checkpoints import read_arrays

    parts = {}
    if trainer.rank == 0:
        parts["head"] = read_arrays(_head_variables(trainer))
    if trainer.is_fc:  # a snapshot: the copy sent from it crosses while the next step runs
        trainer.last_tail = read_arrays(_tail_variables(trainer))
        parts[f"tail{trainer.rank - trainer.layout.conv_workers}"] = trainer.last_tail
    return parts


def start_copies(trainer, write) -> Callable[[], None] | None:
    """Send this FC rank's tail (as :func:`checkpoint_parts` read it) to its peer, or receive
    the copy on the peer and ``write(part, arrays)`` it, in a thread, so that it crosses while
    the next step computes. Returns what waits for it (raising its error), or None on a rank
    with no copy to make. The seconds each copy took go to ``trainer.copy_seconds``, those the
    main thread then waited for it to ``trainer.copy_wait_seconds``."""
    layout, rank = trainer.layout, trainer.rank
    for g in range(layout.fc_workers):  # a rank is one FC rank's, or one group's peer, at most
        fc, peer = layout.fc_ranks[g], fc_peer(layout, g)
        if rank == fc:
            return _in_thread(trainer, _send_copy, trainer, g, trainer.last_tail, fc)
        if rank == peer:
            return _in_thread(trainer, lambda g, fc: write(
                f"tail{g}-copy", _send_copy(trainer, g, None, fc)), g, fc)
    return None


def _send_copy(trainer, fc_index: int, arrays, root: int):
    start = time.perf_counter()
    received = broadcast_arrays(trainer.hvd, arrays, root, f"ralp_stanza_fc_copy_{fc_index}",
                                trainer.copy_sets[fc_index])
    trainer.copy_seconds.append(time.perf_counter() - start)
    return received


def _in_thread(trainer, work, *args) -> Callable[[], None]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            errors.append(e)

    thread = threading.Thread(target=run, name="ralp-stanza-fc-copy", daemon=True)
    thread.start()

    def wait() -> None:
        start = time.perf_counter()
        thread.join()
        trainer.copy_wait_seconds.append(time.perf_counter() - start)
        if errors:
            raise errors[0]

    return wait


def restore_checkpoint(trainer, load) -> None:
    """Every rank's part of the checkpoint back: the head from CONV rank 0's file to every
    CONV rank, each tail from its peer's copy (a collective: call it on every rank)."""
    from ralp.training.rank_checkpoints import assign_arrays

    layout, rank, hvd = trainer.layout, trainer.rank, trainer.hvd
    if not trainer.is_fc:
        if rank == 0:
            assign_arrays(_head_variables(trainer), load("head"), "head")
        if trainer.conv_set is not None:
            state = [*trainer.split.head.variables, *trainer.optimizer.variables]
            broadcast_variables(hvd, state, 0, "ralp_stanza_head_restore", trainer.conv_set)
    for g in range(layout.fc_workers):
        fc, peer = layout.fc_ranks[g], fc_peer(layout, g)
        if rank not in (fc, peer):
            continue
        copy = _peer_copy(load, g) if rank == peer else None
        received = broadcast_arrays(hvd, copy, peer, f"ralp_stanza_fc_restore_{g}",
                                    trainer.copy_sets[g])
        if rank == fc:
            trainer.tail_restored_from = "peer" if received is not None else "own file"
            arrays = received if received is not None else load(f"tail{g}")
            assign_arrays(_tail_variables(trainer), arrays, f"tail{g}")


def _peer_copy(load, fc_index: int):
    """The peer's copy of FC rank ``fc_index``'s tail, or None where it has none."""
    from ralp.training.checkpoints import CheckpointError

    try:
        return load(f"tail{fc_index}-copy")
    except CheckpointError:
        return None

