"""The netns driver's forked ranks: which commands are forked, how the launcher's command line
is taken apart, and a forked rank's namespace, output, exit code and stop. (The netns Horovod
tests in test_stanza.py and the bench's run their ranks this way end to end.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ralp.horovod.prefork import forking_wanted, python_module, split_env_command

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_python_module_is_found_only_in_python_dash_m_commands():
    assert python_module([sys.executable, "-m", "ralp.bench.horovod_job", "--spec", "{}"]) == (
        "ralp.bench.horovod_job")
    assert python_module(["/usr/bin/python3.11", "-m", "pkg.mod"]) == "pkg.mod"
    assert python_module([sys.executable, "script.py"]) is None
    assert python_module(["sh", "-c", "echo hi"]) is None
    assert python_module([sys.executable, "-m"]) is None


def test_split_env_command_reads_the_gloo_launchers_command_line():
    # as horovod.runner.gloo_run builds it: env, the slot's variables, the exported
    # environment (quoted), then the run command
    command = ("env HOROVOD_RANK=1 HOROVOD_SIZE=4 PYTHONUNBUFFERED=1 "
               "MSG='a b=c' /usr/bin/python -m ralp.bench.horovod_job --spec '{\"k\": 1}'")
    env, words = split_env_command(command)
    assert env == {"HOROVOD_RANK": "1", "HOROVOD_SIZE": "4", "PYTHONUNBUFFERED": "1",
                   "MSG": "a b=c"}
    assert words == ["/usr/bin/python", "-m", "ralp.bench.horovod_job", "--spec", '{"k": 1}']


def test_spawn_start_method_turns_forking_off(monkeypatch):
    command = [sys.executable, "-m", "ralp.bench.horovod_job"]
    monkeypatch.delenv("RALP_START_METHOD", raising=False)
    assert forking_wanted(command)
    monkeypatch.setenv("RALP_START_METHOD", "spawn")
    assert not forking_wanted(command)
    monkeypatch.delenv("RALP_START_METHOD")
    assert not forking_wanted(["sh", "-c", "true"])


# Two ranks forked by a fresh driver process (no preload: the ranks run a tiny module). Rank 0
# prints its network namespace and exits 3, which stops the others (horovodrun's rule): rank 1,
# which would sleep a minute, is stopped at once.
DRIVER = """
import sys, threading
from types import SimpleNamespace
from ralp.horovod.prefork import PreforkedRanks
ranks = PreforkedRanks(2, {"h0": NS, "h1": NS}, preload=False)
stop = threading.Event()
run = ranks.exec_command(stop)
cmd = "env RANK_WORD={} " + sys.executable + " -m pf_rank_module"
print("exit0", run(cmd.format("exit"), SimpleNamespace(rank=0, hostname="h0"), [])[0], flush=True)
print("exit1", run(cmd.format("sleep"), SimpleNamespace(rank=1, hostname="h1"), [])[0], flush=True)
ranks.stop()
"""
RANK = """
import os, sys, time
print("rank says", os.environ["RANK_WORD"], os.readlink("/proc/self/ns/net"), flush=True)
print("to stderr", file=sys.stderr, flush=True)
if os.environ["RANK_WORD"] == "sleep":
    time.sleep(60)
sys.exit(3)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="entering a network namespace needs root")
def test_a_forked_rank_runs_its_module_in_its_namespace_and_reports_output_and_exit(tmp_path):
    ns = f"rlp{os.getpid()}pf"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        (tmp_path / "pf_rank_module.py").write_text(RANK)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, str(tmp_path)])}
        p = subprocess.run([sys.executable, "-c", f"NS = {ns!r}\n" + DRIVER], env=env,
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        inode = os.stat(f"/run/netns/{ns}").st_ino
        assert f"[0]<stdout>:rank says exit net:[{inode}]" in p.stdout
        assert "[0]<stderr>:to stderr" in p.stdout
        assert "exit0 3" in p.stdout  # the module's sys.exit(3) is the rank's exit code
        assert "rank 0 exited with status 3: stopping the others" in p.stdout
        assert "exit1 -15" in p.stdout  # SIGTERM, as soon as its command came
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
