"""Fresh processes (forked from the zygote) clean up after themselves."""

import os

from ralp import run_in_fresh_process
from tests import cluster_jobs as jobs


def test_a_fresh_process_leaves_no_autograph_sources_behind():
    # A forked child leaves by os._exit, which skips AutoGraph's atexit clean-up: every run
    # used to leave hundreds of these files in the temporary directory.
    paths = run_in_fresh_process(jobs.autograph_sources, timeout=180)
    assert paths, "the child converted no function: this test would prove nothing"
    assert [p for p in paths if os.path.exists(p)] == []
