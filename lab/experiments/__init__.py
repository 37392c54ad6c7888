"""The lab's experiments, one module each (see :mod:`lab.registry`)."""
