"""``python -m ralp.planner --nodes ...``: the answer, ties, JSON, the saved configuration,
a user's own model, and bad input (exit 2, no traceback)."""

import json

import pytest

from ralp.planner.cli import run
from tests.model_files import save_small_cnn

ALEXNET = ["--model", "alexnet", "--image-size", "75", "--batch-size", "8"]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return save_small_cnn(tmp_path_factory.mktemp("model"), "my_cnn", (32, 32, 3), 10, 16, 256)


def test_a_users_model_gets_one_answer_per_setting_and_a_saved_configuration(
        model_file, tmp_path, capsys):
    assert run(["--keras-model", model_file, "--nodes", "2", "8", "--gpus-per-node", "4",
                "--bandwidth", "25gbit", "--device-throughput", "150",
                "--save", str(tmp_path / "plan")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("my_cnn, batch 32 per GPU:")
    lead = out.splitlines()[1:]
    assert lead[0].startswith("2 x 4 GPUs at 25 Gbit/s: ")
    assert any(line.startswith("8 x 4 GPUs at 25 Gbit/s: ") for line in lead)
    config = json.loads((tmp_path / "plan" / "ralp_plan.json").read_text())
    assert [c["nodes"] for c in config["configurations"]] == [2, 8]
    commands = (tmp_path / "plan" / "cmd_optimal.txt").read_text()
    assert f"python -m ralp.bench --backend tf-config --cluster cluster.json --keras-model " \
           f"{model_file}" in commands
    assert "ralp.wrap(model, cluster, mode=" in commands


def test_json_lists_every_prediction_and_the_best_per_setting(capsys):
    assert run([*ALEXNET, "--nodes", "4", "--gpus-per-node", "2", "--bandwidth", "10gbit",
                "--device-throughput", "300", "--modes", "ps", "ralp-n", "collective",
                "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    modes = [p["mode"] for p in out["predictions"]]
    assert modes == ["ps", "ralp-n", "collective"]
    for p in out["predictions"]:
        assert {"mode", "nodes", "gpus_per_node", "devices", "workers", "ps", "bandwidth",
                "images_per_sec", "step_time_s"} <= set(p)
        assert p["devices"] == 8 and p["bandwidth"] == 10**10
    (best,) = out["best"]
    assert best["images_per_sec"] * (1 + out["decision_margin"]) >= max(
        p["images_per_sec"] for p in out["predictions"])


def test_a_tie_is_said_and_goes_to_the_mode_needing_less(capsys):
    # one node of 8 GPUs on a fast link: horovod and collective predict the same ring
    assert run([*ALEXNET, "--nodes", "1", "--gpus-per-node", "8", "--bandwidth", "100gbit",
                "--device-throughput", "300", "--modes", "horovod", "collective",
                "--horovod-build", "nccl"]) == 0
    out = capsys.readouterr().out
    assert ": collective (8 GPUs in one ring)" in out
    assert "tie" in out


@pytest.mark.parametrize("argv, said", [
    ([*ALEXNET, "--nodes", "2", "--gpus-per-node", "4"], "--device-throughput"),
    ([*ALEXNET, "--nodes", "2", "--device-throughput", "-3"], "--device-throughput"),
    ([*ALEXNET, "--nodes", "0", "--device-throughput", "3"], "--nodes"),
    ([*ALEXNET, "--nodes", "2", "--device-throughput", "3", "--modes", "nope"], "--modes"),
])
def test_bad_input_is_said_without_a_traceback(argv, said, capsys):
    with pytest.raises(SystemExit) as stop:
        code = run(argv)
        raise SystemExit(code)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
