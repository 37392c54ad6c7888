"""``ralp.bench.records``: the one record schema every producer follows, derived figures and
speedups."""

import json
import subprocess
import sys

import pytest

from ralp.bench.records import (
    EXTRA_KEYS,
    RECORD_KEYS,
    RecordError,
    add_speedups,
    make_record,
)
from tests.bench.records_fixtures import failed, record


def test_import_loads_neither_matplotlib_nor_tensorflow():
    code = (
        "import sys, ralp.bench.records, ralp.bench.report; "
        "print(sorted(m for m in ('matplotlib', 'tensorflow', 'keras') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_make_record_lays_out_the_schema_and_fills_what_was_not_measured():
    spec = {"model": "lenet", "mode": "ps", "devices": 2, "workers": 1, "ps": 1, "seed": 0}
    r = make_record(spec, {"backend": "local", "bandwidth": None, "job": None},
                    {"images_per_sec": 12.0, "setup_s": 3.5})
    assert tuple(r)[: len(RECORD_KEYS)] == RECORD_KEYS
    assert tuple(r)[len(RECORD_KEYS) :] == ("seed", "setup_s")  # extras after, in their order
    assert r["images_per_sec"] == 12.0 and r["bytes_per_step_measured"] is None
    assert r["error"] is None
    failed_run = make_record(spec, {"backend": "local"}, error="worker 0 died")
    assert failed_run["error"] == "worker 0 died" and failed_run["images_per_sec"] is None
    assert tuple(failed_run)[: len(RECORD_KEYS)] == RECORD_KEYS


def test_make_record_refuses_figures_the_schema_does_not_know():
    with pytest.raises(RecordError, match="imgs_per_sec"):
        make_record({"model": "lenet"}, {}, {"imgs_per_sec": 1.0})


def test_the_schema_has_no_key_twice():
    assert len(set(RECORD_KEYS + EXTRA_KEYS)) == len(RECORD_KEYS) + len(EXTRA_KEYS)


def test_the_test_records_follow_the_schema():
    assert tuple(record()) == RECORD_KEYS


# --------------------------------------------------------------------------- speedups


def test_add_speedups_matches_the_ps_record_of_the_same_workload(mixed):
    by = {(r["model"], r["devices"], r["mode"]): r["speedup_vs_ps"] for r in mixed}
    assert by["vgg19", 4, "ps"] == 1.0
    assert by["vgg19", 4, "ralp-h"] == pytest.approx(1.5)
    assert by["vgg19", 4, "ralp-n"] == pytest.approx(1.3)
    assert by["vgg19", 4, "horovod"] is None  # failed run
    assert by["resnet50", 4, "horovod"] == pytest.approx(1.2)
    assert by["resnet50", 2, "ralp-h"] is None  # no ps run with 2 devices


@pytest.mark.parametrize(
    "field, value",
    [("devices", 8), ("num_classes", 1000), ("image_size", 224), ("backend", "tf-config"),
     ("bandwidth", "100mbit"), ("model", "alexnet"), ("job", 0)],
)
def test_add_speedups_needs_every_key_field_to_match(field, value):
    records = add_speedups(
        [record(), record(mode="ralp-h", images_per_sec=150.0, **{field: value})]
    )
    assert records[0]["speedup_vs_ps"] == 1.0
    assert records[1]["speedup_vs_ps"] is None


def test_add_speedups_ignores_failed_ps_runs_and_returns_its_argument():
    records = [failed(), record(mode="ralp-h", images_per_sec=150.0), record(images_per_sec=50.0)]
    assert add_speedups(records) is records
    assert [r["speedup_vs_ps"] for r in records] == [None, 3.0, 1.0]


def test_add_speedups_compares_consolidation_jobs_with_consolidation_ps_jobs():
    records = add_speedups([
        record(images_per_sec=100.0),
        record(job=0, scenario="all-ps", images_per_sec=50.0),
        record(job=1, scenario="all-ralp", mode="ralp-h", images_per_sec=75.0),
    ])
    assert [r["speedup_vs_ps"] for r in records] == [1.0, 1.0, 1.5]


@pytest.mark.parametrize(("cpu", "device_cpus", "label"), [
    ({"budget_cpus": 0.425}, "auto", "0.425 CPU/device"),
    ({"budget_cpus": 0.425}, "0.425", "0.425 CPU/device"),
    ({"budget_cpus": 0.425, "paced": {"reference": 6e10}}, "paced", "0.425 CPU/device, paced"),
    ({"budget_cpus": None}, "shared", "shared CPUs"),
    ({"budget_cpus": None, "fallback": "no cgroup"}, "auto", "shared CPUs (no budgets)"),
])
def test_a_records_devices_are_labelled_as_they_computed(cpu, device_cpus, label):
    from ralp.bench.records import cpus_label

    assert cpus_label({"cpu": cpu, "device_cpus": device_cpus}) == label


# A coordinator's error as run_in_fresh_process hands it back: TensorFlow's "in user code:"
# first, the error that matters last.
USER_CODE_ERROR = ('ValueError: in user code:\n\n    File "fit_loop.py", line 88, in step  *\n'
                   "        outputs = model(x)\n\n"
                   "    ValueError: x and y are arrays (one input, one output); the model takes 2")


def test_a_record_keeps_the_whole_error_and_a_table_row_a_short_form():
    from ralp.bench.records import ERROR_CHARS, error_text, short_error
    from ralp.bench.report import to_table

    kept = error_text(RuntimeError(USER_CODE_ERROR + "\n"))
    assert kept == USER_CODE_ERROR
    assert short_error(kept) == ("ValueError: in user code: ... ValueError: x and y are arrays "
                                 "(one input, one output); the model takes 2")
    assert short_error("worker 1 ran out of memory\nmore") == "worker 1 ran out of memory"
    assert error_text(RuntimeError()) == "RuntimeError" and short_error("") == "failed"
    huge = "start " + "x" * 10_000 + "\nKeyError: the last line"
    bounded = error_text(huge)
    assert len(bounded) <= ERROR_CHARS and bounded.startswith("start xxx")
    assert bounded.endswith("KeyError: the last line") and "characters left out" in bounded
    row = next(line for line in to_table([failed(error=kept)]).splitlines() if "error:" in line)
    assert "error: ValueError: in user code: ... ValueError: x and y" in row


def test_a_rank_jobs_error_reaches_the_launcher_whole(capsys):
    """What a Horovod or collective bench job's rank 0 sends when its job fails."""
    from ralp._messages import parse_message
    from ralp.bench.rank_job import rank_main
    from ralp.bench.runspec import RunSpec

    def job(run, read_links, started, read_cpu):
        raise ValueError(USER_CODE_ERROR.split(": ", 1)[1])

    spec = json.dumps(RunSpec("lenet", "horovod", 2, 2, 0).to_dict())
    assert rank_main("rank", job, ["--spec", spec]) == 1
    messages = [m for line in capsys.readouterr().out.splitlines() if (m := parse_message(line))]
    assert messages == [{"error": USER_CODE_ERROR}]
