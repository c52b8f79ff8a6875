"""A Python program that multiplies matrices (numpy's OpenBLAS) in a pool of Python threads, one
per allowed CPU, for SECONDS: each BLAS call starts OpenBLAS's own pool beside the others."""

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
workers = len(os.sched_getaffinity(0))
a = numpy.random.default_rng(0).random((400, 400))


def work(_):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        a @ a


print("ready", flush=True)
with ThreadPoolExecutor(workers) as pool:
    list(pool.map(work, range(workers)))
