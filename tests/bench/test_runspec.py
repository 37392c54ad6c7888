"""A run: modes and their resources (RALP's configurations, Park et al. 2019), validation, and
sizes resolved once."""

import pytest

from ralp.bench.runspec import BenchError, RunSpec, resources


@pytest.mark.parametrize(
    ("mode", "devices", "expected"),
    [
        ("ps", 4, (2, 2)),
        ("ps", 8, (4, 4)),
        ("ralp-h", 4, (2, 1)),
        ("ralp-h", 8, (4, 1)),
        ("ralp-n", 4, (3, 1)),
        ("ralp-n", 8, (7, 1)),
        ("ralp-n", 2, (1, 1)),
    ],
)
def test_resources_follow_the_paper(mode, devices, expected):
    assert resources(mode, devices) == expected


@pytest.mark.parametrize(("mode", "devices"), [("ps", 3), ("ps", 1), ("ralp-n", 1), ("x", 4)])
def test_impossible_resources_are_refused_with_a_reason(mode, devices):
    with pytest.raises(BenchError, match=mode if mode == "x" else "N|devices"):
        resources(mode, devices)


def test_ralp_modes_run_with_one_ps():
    with pytest.raises(BenchError, match="one PS"):
        RunSpec("vgg11", "ralp-n", 4, 2, 2)


def test_a_run_is_made_with_the_model_defaults_and_a_checked_image_size():
    run = RunSpec.for_devices("vgg11", "ps", 4)
    assert (run.image_size, run.batch_size, run.workers, run.ps) == (224, 64, 2, 2)
    assert RunSpec(**run.to_dict()) == run  # a spec sent to another process stays the same
    assert RunSpec.for_devices("vgg11", "ps", 4, image_size=64, batch_size=8).image_size == 64
    with pytest.raises(BenchError, match="image-size >= 67"):
        RunSpec.for_devices("alexnet", "ps", 4, image_size=32)
    with pytest.raises(BenchError, match="unknown model 'nosuchnet'"):
        RunSpec.for_devices("nosuchnet", "ps", 4)


def test_horovod_runs_every_device_as_a_worker_on_the_cpu():
    assert resources("horovod", 4) == (4, 0)
    assert resources("horovod", 8) == (8, 0)
    run = RunSpec.for_devices("vgg11", "horovod", 4)
    assert (run.workers, run.ps, run.measured_steps) == (4, 0, 4 * run.steps)
    with pytest.raises(BenchError, match="at least 2 devices"):
        resources("horovod", 1)
    with pytest.raises(BenchError, match="no PS task"):
        RunSpec("vgg11", "horovod", 4, 3, 1)
    with pytest.raises(BenchError, match="Gloo only"):
        RunSpec.for_devices("vgg11", "horovod", 4, device_type="gpu")
    with pytest.raises(BenchError, match="at least one worker and one PS"):
        RunSpec("vgg11", "ps", 2, 2, 0)


def test_data_choices_and_the_digits_classes():
    assert RunSpec.for_devices("lenet", "ps", 2, data="digits", num_classes=10).data == "digits"
    with pytest.raises(BenchError, match="10 classes"):
        RunSpec.for_devices("lenet", "ps", 2, data="digits")
    with pytest.raises(BenchError, match="unknown data"):
        RunSpec.for_devices("lenet", "ps", 2, data="imagenet")


def test_stanza_runs_n_minus_f_conv_ranks_and_f_fc_ranks():
    assert resources("stanza", 4) == (3, 1)
    assert resources("stanza", 8, 2) == (6, 2)
    run = RunSpec.for_devices("vgg11", "stanza", 8, 2)
    assert (run.workers, run.ps, run.measured_steps) == (6, 2, 6 * run.steps)
    with pytest.raises(BenchError, match="at least 2 devices"):
        resources("stanza", 1)
    with pytest.raises(BenchError, match="no more FC ranks than CONV ranks"):
        RunSpec.for_devices("vgg11", "stanza", 4, 3)
    with pytest.raises(BenchError, match="Gloo only"):
        RunSpec.for_devices("vgg11", "stanza", 4, device_type="gpu")
    with pytest.raises(BenchError, match="BSP by construction"):
        RunSpec.for_devices("vgg11", "stanza", 4, sync="bsp")


def test_pull_schedules_are_for_the_ps_modes():
    run = RunSpec.for_devices("lenet", "ps", 2, pull_schedule="ibatch", trace_pulls=True)
    assert (run.pull_schedule, run.trace_pulls) == ("ibatch", True)
    assert "ibatch" in run.label
    with pytest.raises(BenchError, match="unknown pull schedule 'fast'"):
        RunSpec.for_devices("lenet", "ralp-n", 2, pull_schedule="fast")
    with pytest.raises(BenchError, match="no parameter server"):
        RunSpec.for_devices("lenet", "horovod", 2, pull_schedule="layer")


def test_the_run_matrix_has_a_run_per_pull_schedule_of_the_ps_modes():
    from ralp.bench.config import BenchRequest

    request = BenchRequest(models=("lenet",), devices=(2,), pull_schedules=("default", "ibatch"),
                           trace_pulls=True)
    runs = request.runs(["ps", "horovod"])
    assert [(r.mode, r.pull_schedule, r.trace_pulls) for r in runs] == [
        ("ps", "default", True), ("ps", "ibatch", True), ("horovod", "default", False)]


@pytest.mark.parametrize(("asked", "kept"), [("AUTO", "auto"), (" Shared", "shared"),
                                             ("0.450", "0.45")])
def test_device_cpus_have_one_spelling(asked, kept):
    assert RunSpec("lenet", "ps", 2, 1, 1, device_cpus=asked).device_cpus == kept


def test_an_unknown_device_budget_names_the_choices(monkeypatch):
    from ralp.emulation.watchers import WATCHER_ENV

    monkeypatch.delenv(WATCHER_ENV, raising=False)
    with pytest.raises(BenchError, match="'auto' or 'shared'"):
        RunSpec("lenet", "ps", 2, 1, 1, device_cpus="fast")
    with pytest.raises(BenchError, match=WATCHER_ENV):  # a word of the lab's watcher, unattached
        RunSpec("lenet", "ps", 2, 1, 1, device_cpus="paced")


def test_a_device_watcher_s_word_is_a_budget(monkeypatch):
    from ralp.emulation.watchers import WATCHER_ENV
    from tests.emulation.tiny_watcher import SPEC

    monkeypatch.setenv(WATCHER_ENV, SPEC)
    assert RunSpec("lenet", "ps", 2, 1, 1, device_cpus="Tiny").device_cpus == "tiny"
