"""Split search against brute force, including the no-split-between-convolutions rule."""

import random

import pytest

from ralp.profiler.split import SplitLayer, cut_elements, find_split

KINDS = ["conv", "pool", "fc", "norm", "other"]


def brute_force(layers, batch):
    """Enumerate every split position and check each rule directly on the two halves."""
    best = None
    for i in range(len(layers)):
        kept, moved = layers[: i + 1], layers[i + 1 :]
        if any(layer.kind == "conv" for layer in moved):
            continue  # would offload a convolution (or split between two of them)
        if not any(layer.params > 0 for layer in kept) or not any(
            layer.params > 0 for layer in moved
        ):
            continue
        kept_names = {layer.name for layer in kept}
        crossing = {src for layer in moved for src in layer.inbound if src in kept_names}
        activations = sum(layer.output_elements for layer in kept if layer.name in crossing)
        cost = activations * batch + sum(layer.params for layer in kept)
        if best is None or cost < best[1]:
            best = (i, cost)
    return best


def random_layers(rng, n, dag):
    layers = []
    for k in range(n):
        kind = rng.choice(KINDS)
        params = 0 if kind in ("pool", "other") and rng.random() < 0.8 else rng.randint(0, 5000)
        if k == 0:
            inbound = ()
        elif dag:
            inbound = tuple(
                sorted({f"l{k - 1}"} | {f"l{j}" for j in range(k - 1) if rng.random() < 0.2})
            )
        else:
            inbound = (f"l{k - 1}",)
        layers.append(SplitLayer(f"l{k}", kind, params, rng.randint(1, 3000), inbound))
    return layers


@pytest.mark.parametrize("dag", [False, True])
def test_matches_brute_force_on_random_tables(dag):
    rng = random.Random(1234 + dag)
    found = 0
    for _ in range(400):
        layers = random_layers(rng, rng.randint(2, 14), dag)
        batch = rng.choice([1, 8, 64])
        choice = find_split(layers, batch)
        expected = brute_force(layers, batch)
        if expected is None:
            assert choice.index is None
        else:
            found += 1
            assert (choice.index, choice.cost) == expected
    assert found > 50  # the generator exercises real splits, not just the empty case


def test_never_splits_between_convolutions():
    # A huge conv output early would make splitting there cheapest, but a conv follows it.
    layers = [
        SplitLayer("in", "other", 0, 10),
        SplitLayer("c1", "conv", 10, 1, ("in",)),
        SplitLayer("c2", "conv", 10, 1000, ("c1",)),
        SplitLayer("p", "pool", 0, 500, ("c2",)),
        SplitLayer("fc1", "fc", 10_000, 10, ("p",)),
        SplitLayer("fc2", "fc", 100, 5, ("fc1",)),
    ]
    choice = find_split(layers, batch_size=1)
    assert choice.index == 3  # after the pool: 500 + 20, not after c1 (1 + 10)
    assert set(choice.costs) == {2, 3, 4}


def test_cut_counts_every_crossing_tensor():
    # A skip connection: splitting after "b" cuts both a->add and b->add.
    layers = [
        SplitLayer("a", "conv", 5, 100),
        SplitLayer("b", "norm", 2, 30, ("a",)),
        SplitLayer("add", "other", 0, 100, ("a", "b")),
        SplitLayer("fc", "fc", 50, 10, ("add",)),
    ]
    assert cut_elements(layers, 1) == 130
    assert cut_elements(layers, 2) == 100


def test_nothing_to_offload():
    fully_conv = [
        SplitLayer("c1", "conv", 10, 10),
        SplitLayer("c2", "conv", 10, 10, ("c1",)),
        SplitLayer("gap", "pool", 0, 10, ("c2",)),
    ]
    choice = find_split(fully_conv, 4)
    assert choice.index is None and "nothing to offload" in choice.reason
    assert find_split([SplitLayer("fc", "fc", 10, 1)], 1).index is None


def test_ties_go_to_the_earliest_position():
    # Flattening changes no sizes, so splitting before or after it costs the same.
    layers = [
        SplitLayer("c", "conv", 10, 50),
        SplitLayer("pool", "pool", 0, 20, ("c",)),
        SplitLayer("flatten", "other", 0, 20, ("pool",)),
        SplitLayer("fc", "fc", 1000, 5, ("flatten",)),
        SplitLayer("logits", "fc", 60, 2, ("fc",)),
    ]
    choice = find_split(layers, batch_size=2)
    assert choice.costs[1] == choice.costs[2] == 50
    assert choice.index == 1
