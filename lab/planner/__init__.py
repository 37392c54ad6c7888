"""The planner's lab: the simulated cluster's step models, checked against the bench's
recorded runs (``python -m lab.planner --validate``)."""
