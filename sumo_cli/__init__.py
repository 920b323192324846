"""sumo: continuous adaptation via meta-learning in competitive RoboSumo."""

import os

# One BLAS thread per process unless the user says otherwise (read when NumPy loads, so before any
# import of it): sumo runs its parallelism as processes (rollout and game workers), and the policies'
# products are small. With OpenBLAS's default of a thread per core, a zoo-sized LSTM step in NumPy
# took 2.9 ms instead of 0.11 ms on the 2-core machine while other processes kept both cores busy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
