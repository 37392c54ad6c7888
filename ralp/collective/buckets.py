"""Which gradients the collective mode sums together: size-bounded buckets in backward order.

A step's backward pass produces the gradients roughly in the reverse of the order the model
creates its variables (the last layers' first). Summing them all in one collective waits for
the last one, the first layer's, at the end of the backward pass; one collective per
gradient pays a collective's fixed cost per variable (a ring's latency, once per worker, per
tensor). PyTorch's DistributedDataParallel takes the middle way and so does this module:
the gradients, in reverse variable order, are cut into buckets of at least ``bucket_bytes``
(25 MiB, DDP's ``bucket_cap_mb``), the first bucket closing at ``first_bytes`` already (1 MiB,
DDP's first bucket) so that the first sum starts as early as possible. Each bucket is one
collective, which depends only on its own gradients.
"""

from __future__ import annotations

from collections.abc import Sequence

FIRST_BUCKET_BYTES = 1 << 20
BUCKET_BYTES = 25 << 20


def backward_buckets(sizes: Sequence[int], first_bytes: int = FIRST_BUCKET_BYTES,
                     bucket_bytes: int = BUCKET_BYTES) -> list[list[int]]:
    """The variables' indices (into ``sizes``, their gradients' bytes, in the model's variable
    order) cut into buckets: reverse order, each bucket closed once it holds at least its
    limit (``first_bytes`` for the first, ``bucket_bytes`` after), as DDP assigns them; a
    gradient larger than the limit closes its bucket on its own. Every index is in exactly
    one bucket."""
    buckets: list[list[int]] = []
    current: list[int] = []
    held = 0
    for index in reversed(range(len(sizes))):
        current.append(index)
        held += int(sizes[index])
        if held >= (first_bytes if not buckets else bucket_bytes):
            buckets.append(current)
            current, held = [], 0
    if current:
        buckets.append(current)
    return buckets
