"""What the emulation tests need of this machine's control groups."""

import pytest

from ralp.emulation.cpu_meter import find_hierarchy

HIERARCHY, NO_CGROUPS = find_hierarchy()
needs_cgroups = pytest.mark.skipif(HIERARCHY is None, reason=f"no writable cgroup: {NO_CGROUPS}")
