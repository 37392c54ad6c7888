"""Profiler defaults, importable without TensorFlow (the CLI's --help needs them)."""

DEFAULT_THRESHOLD = -0.5  # K: eligible iff S <= K, the usual "moderate skewness" bound
DEFAULT_BATCH_SIZE = 32  # for models outside the zoo, which carry no default of their own
# The byte model's default cluster: RALP-N at N = 5 devices, or plain PS' workers at N = 8.
DEFAULT_WORKERS = 4
DEFAULT_PS = 1
