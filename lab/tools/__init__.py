"""The lab's tools: the scripts its experiments run beside the bench and the planner (``python
-m lab.tools.NAME``), each a measurement or a reading of recorded results."""
