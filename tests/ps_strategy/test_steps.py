"""The step ledger's exactly-once update, in one process (no cluster): a step whose gradients
do not all arrive changes nothing, so its rerun applies the batch once."""

import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from ralp.ps_strategy.steps import LEDGER_SIZE, StepLedger, group_update


def _late_gradient(fail: tf.Tensor) -> tf.Tensor:
    """A gradient that arrives half a second after the others, or never (the step fails):
    a worker lost while its last gradient crosses."""

    def arrive(fail_now):
        time.sleep(0.5)
        if bool(fail_now):
            raise RuntimeError("the worker was lost while this gradient crossed")
        return np.ones([3], np.float32)

    grad = tf.py_function(arrive, [fail], tf.float32)
    grad.set_shape([3])
    return grad


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_step_lost_while_its_gradients_cross_changes_nothing_and_its_rerun_applies_once(
        optimizer):
    first = keras.Variable(np.zeros([2], np.float32), name="first")
    last = keras.Variable(np.zeros([3], np.float32), name="last")
    opt = keras.optimizers.get(optimizer)
    opt.build([first, last])
    ledger = StepLedger("/cpu:0", "test")

    @tf.function
    def step(token, fail):
        grads = [tf.ones([2]), _late_gradient(fail)]
        return ledger.guarded(token, group_update(opt, [first, last], grads))

    with pytest.raises(tf.errors.OpError, match="worker was lost"):
        step(tf.constant(7, tf.int64), tf.constant(True))
    # the early gradient's update, the optimizer's count and the token: none applied
    assert np.all(first.numpy() == 0) and np.all(last.numpy() == 0)
    assert int(opt.iterations.numpy()) == 0
    assert np.all(ledger.ring.numpy() == -1)

    assert bool(step(tf.constant(7, tf.int64), tf.constant(False)))  # the rerun applies it
    assert int(opt.iterations.numpy()) == 1
    assert np.all(first.numpy() < 0) and np.all(last.numpy() < 0)
    moved = first.numpy().copy()
    assert not bool(step(tf.constant(7, tf.int64), tf.constant(False)))  # once
    assert int(opt.iterations.numpy()) == 1 and np.array_equal(first.numpy(), moved)
    assert ledger.ring.numpy()[7 % LEDGER_SIZE] == 7
