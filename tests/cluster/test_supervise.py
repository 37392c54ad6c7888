"""The supervisor that starts a lockstep job again after a lost rank: its loop, its command
line, and a real Horovod job that loses a rank and goes on from its checkpoint under it."""

import json
import sys
import textwrap
from pathlib import Path

import pytest

from ralp.cluster.supervise import main, supervise
from ralp.errors import InvalidArgumentError
from ralp.horovod.launch import horovodrun_command
from tests.needs import needs_horovod

ROOT = Path(__file__).resolve().parents[2]

# Fails on its first start after printing rank 0's step markers up to 7; on the next start
# writes what its environment said, and succeeds.
FLAKY = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    from ralp._messages import emit
    here = Path(sys.argv[1])
    if not (here / "started").exists():
        (here / "started").write_text("1")
        for step in range(1, 8):
            emit("step", step)
        sys.exit(3)
    (here / "env.json").write_text(json.dumps({k: v for k, v in os.environ.items()
                                               if k.startswith("RALP_")}))
""")


def test_a_failed_command_is_started_again_and_told_what_was_lost(tmp_path, capsys):
    script = tmp_path / "flaky.py"
    script.write_text(FLAKY)
    assert main(["--max-restarts", "2", "--", sys.executable, str(script), str(tmp_path)]) == 0
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["RALP_SUPERVISED"] == "1"
    failure = json.loads(env["RALP_RESTART_FAILURE"])
    assert failure["at_step"] == 7 and failure["kind"] == "rank"
    assert "exited with 3" in failure["message"]
    assert "starting it again" in capsys.readouterr().err


def test_a_command_that_keeps_failing_gives_its_code_and_no_traceback(tmp_path, capsys):
    assert main(["--max-restarts", "0", "--", sys.executable, "-c", "raise SystemExit(5)"]) == 5
    err = capsys.readouterr().err
    assert "exited with 5, after 0 restart(s); giving up" in err and "Traceback" not in err
    assert main(["--", str(tmp_path / "no-such-command")]) == 127
    with pytest.raises(SystemExit) as stop:
        main(["--max-restarts", "2"])
    assert stop.value.code == 2 and "give the job's command after --" in capsys.readouterr().err


def test_the_loop_restarts_only_its_errors_and_only_so_often():
    starts = []

    def run_once(env, progress):
        starts.append(dict(env))
        progress(("step", 10 * len(starts)))
        raise ValueError("lost")

    with pytest.raises(ValueError, match="lost") as caught:
        supervise(run_once, max_restarts=2, errors=(ValueError,), lost_task=lambda e: "rank:1")
    assert len(starts) == 3 and "after 2 restart(s)" in str(caught.value.__notes__)
    assert json.loads(starts[2]["RALP_RESTART_FAILURE"])["at_step"] == 20
    with pytest.raises(KeyError):  # not one of its errors: no restart
        supervise(lambda env, p: {}["x"], max_restarts=3, errors=(ValueError,))
    with pytest.raises(InvalidArgumentError, match="max_restarts"):
        supervise(lambda env, p: None, max_restarts=-1, errors=(ValueError,))


@pytest.mark.slow
@needs_horovod
def test_horovodrun_under_the_supervisor_goes_on_from_its_checkpoint(tmp_path):
    script = str(ROOT / "tests" / "training" / "restart_ranks.py")
    # rank 1 kills itself after step 11 of 12 on the first start (its later start counts
    # its own 4 steps only): the job is started again and goes on from step 8's checkpoint
    command = horovodrun_command(2, [sys.executable, script, str(tmp_path), "horovod", "1", "11"])
    assert main(["--max-restarts", "1", "--", *command]) == 0
    rank0 = json.loads((tmp_path / "rank0.json").read_text())
    (failure,) = rank0["failures"]
    assert (failure["at_step"], failure["restored_step"], failure["steps_redone"]) == (11, 8, 3)
    assert rank0["resumed_from_step"] == 8 and failure["time_lost_s"] > 0
