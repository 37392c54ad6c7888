"""What the model callbacks see (ralp/training/model_view.py): which callbacks run where, which
save by batches, and the ones refused before training. (The view kept in step with every
mode's training is checked against one Keras process in test_state_reference.py.)"""

import keras
import pytest

from ralp.training.compile import TrainingSetupError
from ralp.training.model_view import callbacks_here, check_callbacks, saves_by_batch


def test_callbacks_that_write_files_run_on_rank_0_only(tmp_path):
    writers = [keras.callbacks.ModelCheckpoint(str(tmp_path / "m.keras")),
               keras.callbacks.BackupAndRestore(str(tmp_path / "backup")),
               keras.callbacks.TensorBoard(str(tmp_path / "tb")),
               keras.callbacks.CSVLogger(str(tmp_path / "log.csv"))]
    others = [keras.callbacks.EarlyStopping(), keras.callbacks.ReduceLROnPlateau(),
              keras.callbacks.TerminateOnNaN(), keras.callbacks.LambdaCallback()]
    every = writers + others
    assert callbacks_here(every, is_chief=True, ranks=4) == every
    assert callbacks_here(every, is_chief=False, ranks=4) == others
    assert callbacks_here(every, is_chief=True, ranks=1) == every


def test_a_callback_saving_by_batches_is_known_by_its_save_freq(tmp_path):
    assert saves_by_batch(keras.callbacks.ModelCheckpoint(str(tmp_path / "m.keras"), save_freq=3))
    assert saves_by_batch(keras.callbacks.BackupAndRestore(str(tmp_path / "b"), save_freq=2))
    assert not saves_by_batch(keras.callbacks.ModelCheckpoint(str(tmp_path / "m.keras")))
    assert not saves_by_batch(keras.callbacks.EarlyStopping())


def test_callbacks_whose_meaning_ralp_cannot_keep_are_refused():
    with pytest.raises(TrainingSetupError, match="use_ema=True"):
        check_callbacks([keras.callbacks.EarlyStopping(), keras.callbacks.SwapEMAWeights()])
    with pytest.raises(TrainingSetupError, match="got function"):
        check_callbacks([lambda: None])
    check_callbacks([keras.callbacks.EarlyStopping(), keras.callbacks.ReduceLROnPlateau()])
