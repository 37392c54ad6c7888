"""The collective mode's buckets: backward order, DDP's limits, every gradient once."""

from ralp.collective.buckets import BUCKET_BYTES, FIRST_BUCKET_BYTES, backward_buckets

MB = 1 << 20


def test_buckets_run_backward_and_close_at_their_limits():
    sizes = [100, 200, 3 * MB, 300, 30 * MB, 400, 10 * MB, 20 * MB, 500, 600]
    assert backward_buckets(sizes) == [[9, 8, 7], [6, 5, 4], [3, 2, 1, 0]]
    assert backward_buckets(sizes, first_bytes=1, bucket_bytes=1) == [[i] for i in range(9, -1, -1)]


def test_every_gradient_is_in_one_bucket_and_a_small_model_in_one():
    sizes = [FIRST_BUCKET_BYTES // 4] * 3
    assert backward_buckets(sizes) == [[2, 1, 0]]
    sizes = [MB // 3] * 200
    buckets = backward_buckets(sizes)
    assert sorted(i for b in buckets for i in b) == list(range(200))
    assert sum(sizes[i] for i in buckets[0]) >= FIRST_BUCKET_BYTES
    assert all(sum(sizes[i] for i in b) >= BUCKET_BYTES for b in buckets[1:-1])
    assert backward_buckets([]) == []
