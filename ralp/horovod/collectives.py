"""The Horovod collectives mode "horovod" and mode "stanza" share, each once.

Horovod matches the collectives of different ranks by name, so every collective here has a
name that is the same on every rank: never one made from a Keras variable's or layer's name,
which Keras numbers per process (a rank that built another model or loaded a checkpoint
before gets ``dense_7`` where the others have ``dense_5``, and the ranks would wait for each
other forever).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def broadcast_arrays(hvd, arrays: dict | None, root: int, name: str, process_set):
    """``root``'s named numpy arrays (or None) on every rank of ``process_set``: their names,
    shapes and dtypes as a small object, their bytes as one uint8 tensor. (Horovod's
    ``broadcast_object`` would move the bytes too, but it turns them into a tensor element by
    element: 0.3 s for lenet's 19 MB tail and its Adam slots, against 0.02 s this way.)"""
    import tensorflow as tf

    mine = hvd.rank() == root
    layout = [(k, a.shape, a.dtype.str) for k, a in arrays.items()] if mine and arrays else None
    layout = hvd.broadcast_object(layout if mine else None, root_rank=root, name=f"{name}_layout",
                                  process_set=process_set)
    if layout is None:
        return None
    sizes = [int(np.prod(shape)) * np.dtype(dtype).itemsize for _, shape, dtype in layout]
    flat = (np.concatenate([np.ascontiguousarray(arrays[k]).view(np.uint8).ravel()
                            for k, _, _ in layout]) if mine else np.zeros(sum(sizes), np.uint8))
    flat = hvd.broadcast(tf.constant(flat), root_rank=root, name=name,
                         process_set=process_set).numpy()
    out, offset = {}, 0
    for (key, shape, dtype), size in zip(layout, sizes, strict=True):
        out[key] = flat[offset:offset + size].view(np.dtype(dtype)).reshape(shape)
        offset += size
    return out


def broadcast_variables(hvd, variables: Sequence, root: int, name: str,
                        process_set=None) -> None:
    """Every rank's ``variables`` (Keras or TensorFlow) set to ``root``'s, matched by their
    position in the list, in one collective named ``name``."""
    process_set = process_set if process_set is not None else hvd.global_process_set
    mine = ({f"{k:06d}": np.asarray(v) for k, v in enumerate(variables)}
            if hvd.rank() == root else None)
    received = broadcast_arrays(hvd, mine, root, name, process_set)
    if hvd.rank() == root or received is None:
        return
    for k, variable in enumerate(variables):
        variable.assign(received[f"{k:06d}"])


class HorovodCollectives:
    """The collectives of a Horovod rank's runtime (``self.hvd``) the fit loop uses."""

    def _sum(self, array: np.ndarray) -> np.ndarray:
        """``array`` summed over every rank."""
        import tensorflow as tf

        array = np.asarray(array, np.float64)
        return self.hvd.allreduce(tf.constant(array), op=self.hvd.Sum,
                                  name=f"ralp_sums_{'x'.join(map(str, array.shape))}").numpy()

    def barrier(self) -> None:
        """Wait until every rank gets here (an allreduce of one number)."""
        self._sum(np.zeros(1))

    def share_text(self, text: str) -> str:
        """Rank 0's ``text`` on every rank (a collective)."""
        return self.hvd.broadcast_object(text, root_rank=0, name="ralp_share_text")
