"""tiny_llm: a tiny character-level language model in numpy, used as the trainops example.

Importing the package caps BLAS threads at 1 unless the environment says otherwise: the
matrices are so small that threads only add overhead (and oversubscribe shared CPUs), and a
fixed thread count keeps floating-point results reproducible across machines.
"""

import os as _os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_var, "1")

__version__ = "0.1.0"
