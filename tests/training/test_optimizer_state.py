"""An optimizer's whole state as ralp carries it (ralp/training/optimizer_state.py): read from
a trained Keras optimizer, split over two optimizers of the model's parts (RALP's head and
tail, Stanza's CONV and FC ranks) and read back, it is the same, variable by variable."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from ralp.training.compile import TrainingSetupError
from ralp.training.optimizer_state import OptimizerState, read_compiled


def _trained(optimizer):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="head"),
                              keras.layers.Dense(2, name="tail")])
    model.compile(optimizer=optimizer, loss="mse")
    model.fit(np.ones((8, 4)), np.zeros((8, 2)), epochs=2, batch_size=4, verbose=0)
    return model


@pytest.mark.parametrize("make", [lambda: keras.optimizers.Adam(0.01),
                                  lambda: keras.optimizers.SGD(0.1, momentum=0.9)])
def test_a_state_split_over_two_parts_reads_back_the_same(make):
    model = _trained(make())
    state = read_compiled(model.optimizer, model)
    assert state.iterations == 4 and len(state.slots) == 4
    variables = model.trainable_variables
    parts = [(make(), variables[:2], [0, 1]), (make(), variables[2:], [2, 3])]
    merged = None
    for optimizer, part, indices in parts:
        optimizer.build(part)
        state.assign(optimizer, part, indices)
        read = OptimizerState.read(optimizer, part, indices)
        merged = read if merged is None else merged.merged(read)
    assert merged.iterations == state.iterations
    assert merged.learning_rate == pytest.approx(state.learning_rate)
    assert merged.slots.keys() == state.slots.keys()
    for k, slots in state.slots.items():
        for name, value in slots.items():
            np.testing.assert_array_equal(merged.slots[k][name], value)
            assert np.any(value != 0), name  # trained: not the fresh zeros


def test_a_learning_rate_set_on_the_optimizer_is_read_and_a_schedule_is_not_a_value():
    model = _trained(keras.optimizers.SGD(0.1))
    model.optimizer.learning_rate = 0.025
    assert read_compiled(model.optimizer, model).learning_rate == pytest.approx(0.025)
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 2, 0.5)
    scheduled = _trained(keras.optimizers.SGD(schedule))
    assert read_compiled(scheduled.optimizer, scheduled).learning_rate is None


def test_only_a_built_optimizer_of_this_model_carries_state():
    model = _trained(keras.optimizers.Adam())
    assert read_compiled("adam", model) is None
    assert read_compiled(keras.optimizers.Adam(), model) is None  # not built: fresh
    other = keras.Sequential([keras.Input((5,)), keras.layers.Dense(7, name="elsewhere")])
    foreign = keras.optimizers.Adam()
    foreign.build(other.trainable_variables)
    with pytest.raises(TrainingSetupError, match="neither the update count"):
        read_compiled(foreign, model)


def test_a_saved_and_loaded_model_keeps_its_optimizer_state(tmp_path):
    model = _trained(keras.optimizers.Adam(0.01))
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    before, after = read_compiled(model.optimizer, model), read_compiled(loaded.optimizer, loaded)
    assert after.iterations == before.iterations == 4
    for k, slots in before.slots.items():
        for name, value in slots.items():
            np.testing.assert_array_equal(after.slots[k][name], value)
    assert tf.is_tensor(loaded.optimizer.iterations.value)
