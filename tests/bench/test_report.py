"""``ralp.bench.report``: the text table, JSON/CSV, output files, the consolidation table."""

import csv
import io
import json

from ralp.bench import report
from ralp.bench.records import RECORD_KEYS, add_speedups
from ralp.bench.report import consolidation_table, to_csv, to_json, to_table, write_outputs
from tests.bench.records_fixtures import failed, local, record

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- table


def test_table_shows_the_numbers_and_the_error(mixed):
    text = to_table(mixed)
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["model", "N", "mode", "W+PS"]
    assert max(map(len, lines)) <= report.MAX_WIDTH
    ralp_h = next(line for line in lines if "ralp-h" in line and "vgg19" in line)
    for cell in ("150.0 [146.2-153.8]", "1.50", "0.960", "300.0 MB", "290.0 MB", "1.034",
                 "1.37 wire", "3+1"):
        assert cell in ralp_h, cell
    horovod = next(line for line in lines if "horovod" in line and "vgg19" in line)
    assert "error: worker 1 ran out of memory" in horovod
    # one rule per (model, network) group, in the records' order
    assert [line.split()[1] for line in lines if line.startswith("---- ")] == [
        "vgg19", "resnet50",
    ]


def test_table_rows_keep_the_given_order(mixed):
    rows = [line for line in to_table(mixed).splitlines()[2:] if not line.startswith("----")]
    assert [row.split()[2] for row in rows] == [r["mode"] for r in mixed]


def test_table_without_measurements_shows_dashes_and_compute_bound():
    text = to_table([local(compute_step_time_s=0.5, wire_step_time_s=None, bound_ratio=1.5)])
    row = text.splitlines()[3]
    assert "1.50 compute" in row
    assert "1.2 GB" in row and " - " in row
    assert "local" in text.splitlines()[2] and "@" not in text.splitlines()[2]


def test_table_columns_line_up(mixed):
    lines = [line for line in to_table(mixed).splitlines() if not line.startswith("----")]
    ok = [line for line in lines[2:] if "error:" not in line]
    assert len({len(line) for line in ok}) == 1  # the last column is right-padded too
    # a failed run's identity cells line up with the others'
    start = lines[0].index("img/s") - len("img/s")
    err = next(line for line in lines if "error:" in line)
    assert err.index("error:") <= start + len("img/s") + 2


def test_table_of_nothing():
    assert to_table([]) == "(no records)"


def test_long_errors_are_cut_to_the_width():
    text = to_table([failed(error="boom " * 100 + "\ntraceback line")])
    line = text.splitlines()[-1]
    assert len(line) <= report.MAX_WIDTH and line.endswith("...") and "traceback" not in text


# --------------------------------------------------------------------------- JSON, CSV


def test_json_round_trip(mixed):
    assert json.loads(to_json(mixed)) == mixed
    assert to_json(mixed).startswith("[\n  {")


def test_csv_header_and_none_handling(mixed):
    text = to_csv([*mixed, record(job=2, scenario="mixed")])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == [*RECORD_KEYS, "scenario"]
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert len(parsed) == len(mixed) + 1
    ralp_n, err = parsed[2], parsed[3]
    assert ralp_n["bytes_per_step_measured"] == "" and ralp_n["bytes_ratio"] == ""
    assert float(ralp_n["bytes_per_step_predicted"]) == 4.0e8
    assert float(ralp_n["images_per_sec"]) == 130.0 and float(ralp_n["speedup_vs_ps"]) == 1.3
    assert err["error"] == "worker 1 ran out of memory" and err["images_per_sec"] == ""
    assert parsed[0]["job"] == "" and parsed[0]["scenario"] == ""
    assert parsed[-1]["job"] == "2" and parsed[-1]["scenario"] == "mixed"


# --------------------------------------------------------------------------- files


def test_write_outputs_with_only_out_writes_json_and_csv(tmp_path, mixed):
    out = tmp_path / "deep" / "dir" / "bench.json"
    written = write_outputs(mixed, str(out), None, None)
    assert written == [str(out), str(out.with_suffix(".csv"))]
    assert json.loads(out.read_text()) == mixed
    assert out.with_suffix(".csv").read_bytes() == to_csv(mixed).encode()


def test_write_outputs_explicit_paths(tmp_path, mixed):
    csv_path, png = tmp_path / "a" / "table.csv", tmp_path / "b" / "fig.png"
    written = write_outputs(mixed, None, str(csv_path), str(png))
    assert written == [str(csv_path), str(png)]
    assert csv_path.read_bytes() == to_csv(mixed).encode()
    assert png.read_bytes().startswith(PNG_MAGIC)
    assert write_outputs(mixed, None, None, None) == []


# --------------------------------------------------------------------------- consolidation


def test_consolidation_table():
    records = [
        record(),  # a solo run: not part of any scenario
        record(job=0, scenario="all-ps", images_per_sec=40.0),
        record(job=1, scenario="all-ps", model="resnet50", images_per_sec=60.0),
        record(job=1, scenario="mixed", model="resnet50", mode="ralp-h", images_per_sec=90.0),
        record(job=0, scenario="mixed", images_per_sec=50.0, images_per_sec_iqr=[49.0, 51.0]),
        record(job=2, scenario="mixed", images_per_sec=70.0),
        failed(job=3, scenario="mixed", model="resnet50"),
    ]
    text = consolidation_table(records)
    blocks = text.split("\n\n")
    assert [b.splitlines()[0] for b in blocks] == ["scenario all-ps", "scenario mixed"]
    all_ps, mixed = blocks
    assert "total 100.0 img/s" in all_ps and "vgg19 40.0, resnet50 60.0" in all_ps
    assert "x all-ps" not in all_ps
    jobs = [line.split()[0] for line in mixed.splitlines()[3:-1]]
    assert jobs == ["0", "1", "2", "3"]  # sorted by job
    assert "50.0 [49.0-51.0]" in mixed and "error: worker 1 ran out of memory" in mixed
    summary = mixed.splitlines()[-1]
    assert "total 210.0 img/s" in summary
    assert "vgg19 60.0, resnet50 90.0" in summary
    assert "(2.10x all-ps)" in summary and "(1 failed)" in summary


def test_consolidation_table_without_jobs():
    assert consolidation_table([record()]) == "(no consolidation records)"


def test_horovod_records_get_a_vs_horovod_column_and_speedup():
    records = add_speedups([
        record(mode="ps", workers=2, ps=2, images_per_sec=50.0),
        record(mode="ralp-n", images_per_sec=300.0),
        record(mode="horovod", workers=4, ps=0, images_per_sec=100.0,
               ps_bytes_per_step_measured=None, ps_bytes_per_step_predicted=None),
        record(mode="ralp-n", data="digits", images_per_sec=10.0),  # another workload
    ])
    assert [r["speedup_vs_horovod"] for r in records] == [0.5, 3.0, 1.0, None]
    assert [r["speedup_vs_ps"] for r in records] == [1.0, 6.0, 2.0, None]
    lines = to_table(records).splitlines()
    header = lines[0].split()
    assert header[5:7] == ["vs", "PS"] and header[7:9] == ["vs", "hvd"]
    horovod_row = next(line for line in lines if " horovod " in line)
    assert "4+0" in horovod_row and "2.00" in horovod_row and "1.00" in horovod_row
    assert "vs hvd" not in to_table([record()])  # no Horovod run, no column


def test_the_bound_column_names_the_longer_side_and_old_records_still_show():
    assert "1.37 wire" in to_table([record()]).splitlines()[3]
    busy = record(cpu_step_time_s=0.8, busiest_cpu_task="ps:0", bound_step_time_s=0.8,
                  bound_ratio=1.2)
    assert "1.20 cpu ps:0" in to_table([busy]).splitlines()[3]
    # a record written before the wire time: its network figure was no bound, so none shows
    old = record(bound_ratio=None)
    del old["wire_step_time_s"], old["bound_step_time_s"]
    old["network_step_time_s"] = 1.2
    row = to_table([old]).splitlines()[3]
    assert row.rstrip().endswith("-")
