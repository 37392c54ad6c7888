"""What the process zygote (:mod:`ralp.cluster.zygote`) imports once: TensorFlow.

No BLAS thread pools in the zygote (numpy's and scipy's OpenBLAS would each start one at
import), so that it runs a single thread when it forks.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from ralp._cli import quiet_tensorflow  # noqa: E402 - after the environment is set

quiet_tensorflow()
