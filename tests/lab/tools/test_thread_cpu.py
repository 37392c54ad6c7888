"""Threads' CPU sampled in the groups a command's runs make: each thread counted under its
kind, and nothing read of groups the command did not make."""

import json
import os
import sys
import textwrap

from lab.tools.thread_cpu import descendants, main, thread_reading
from tests.emulation.cgroups import needs_cgroups

# a run as the bench makes one: a group named for its launcher, a task in it whose main thread
# waits while a thread of its own (unnamed, as Horovod's are) spins, and one named tf_ sleeps
RUN = textwrap.dedent("""
    import subprocess, sys
    from ralp.emulation.cpu_meter import find_hierarchy
    from ralp.emulation.devices import DeviceGroups, new_prefix
    TASK = '''
    import ctypes, threading, time
    def spin():
        end = time.monotonic() + 1.2
        while time.monotonic() < end:
            pass
    def named():
        ctypes.CDLL(None).prctl(15, b"tf_sleeper", 0, 0, 0)
        time.sleep(1.5)
    threads = [threading.Thread(target=spin), threading.Thread(target=named)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    '''
    hierarchy, _ = find_hierarchy()
    with DeviceGroups(hierarchy, new_prefix(), ("w0",), None) as groups:
        subprocess.run(groups.group("w0").joined_command([sys.executable, "-c", TASK]),
                       check=True)
""")


@needs_cgroups
def test_a_runs_threads_are_counted_by_kind(tmp_path):
    out = tmp_path / "threads.json"
    assert main(["--out", str(out), "--interval", "0.2", "--", sys.executable, "-c", RUN]) == 0
    result = json.loads(out.read_text())
    [group] = result["threads"]
    assert group.split("/")[1] == "w0"
    last = result["samples"][-1]["groups"][group]
    assert 0.8 <= last["python"] <= 1.6, last  # the spinning thread
    assert last["main"] < 0.5 and last["tf"] < 0.1 and last["other"] < 0.1, last
    kinds = sorted((kind, name) for kind, _, name in result["threads"][group].values())
    assert [k for k, _ in kinds] == ["main", "python", "tf"] and kinds[2][1] == "tf_sleeper"


def test_a_thread_is_read_by_its_kind_and_processes_by_their_parents():
    kind, cpu, _ = thread_reading(os.getpid(), os.getpid())
    assert kind == "main" and cpu > 0
    assert thread_reading(os.getpid(), 2**22 + 7) is None
    assert os.getpid() in descendants(os.getppid())
    assert os.getppid() not in descendants(os.getpid())
