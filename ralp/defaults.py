"""One default per knob, for every entry point (API, CLIs, bench, audit). No TensorFlow here:
``--help`` texts read them.
"""

DEFAULT_THRESHOLD = -0.5  # K: eligible iff S <= K, the usual "moderate skewness" bound
DEFAULT_BATCH_SIZE = 32  # per worker, for models outside the zoo (zoo models carry their own)
# The byte model's default cluster: RALP-N at N = 5 devices, or plain PS' workers at N = 8.
DEFAULT_WORKERS = 4
DEFAULT_PS = 1
DEFAULT_BANDWIDTH = "1gbit"  # each simulated link's rate (netns)
# Failures: how long training waits for a lost task to be restarted (by the launcher, or a
# supervisor such as Kubernetes) before it gives up with an error.
DEFAULT_RESTART_TIMEOUT_S = 300.0
# What TensorFlow's failure handling needs on every task of a PS cluster (its docs): a lost
# task's RPCs fail at once instead of waiting for it. 2.21's own default, set explicitly.
GRPC_FAIL_FAST = "use_caller"
# The planner's memory bound per device (Stanza's n_c / n_f search): a 16 GiB accelerator.
DEFAULT_DEVICE_MEMORY_BYTES = 16 * 2**30
# Simulated devices: the CPUs kept outside the devices' budgets, for the coordinator (or
# Horovod's driver) and the kernel's network work (veth, bridge, tbf), which run outside
# every device's budget.
DEVICE_RESERVE_CPUS = 0.3
