#!/usr/bin/env python3
"""make_blobs.py DIR: deterministic Gaussian blobs for examples/classifier.gsl.

C = 4 classes in F = 16 dimensions, centres drawn once from
RandomState(0), unit-variance points around them. Writes NumPy's default
dtypes for the training set (blobs_x.npy float64 [2048, 16], blobs_y.npy
int64 [2048], as npy_pairs reads them) and f32/i32 for the held-out set
that `load` reads (test_x.npy [512, 16], test_y.npy [512]).
"""
import os
import sys

import numpy as np

F, C = 16, 4
out = sys.argv[1] if len(sys.argv) > 1 else "."
rng = np.random.RandomState(0)
centres = rng.normal(0.0, 0.35, size=(C, F))


def blobs(n):
    y = rng.randint(0, C, size=n)
    x = centres[y] + rng.normal(0.0, 1.0, size=(n, F))
    return x, y


x, y = blobs(2048)
np.save(os.path.join(out, "blobs_x.npy"), x)                      # float64
np.save(os.path.join(out, "blobs_y.npy"), y.astype(np.int64))     # int64
tx, ty = blobs(512)
np.save(os.path.join(out, "test_x.npy"), tx.astype(np.float32))
np.save(os.path.join(out, "test_y.npy"), ty.astype(np.int32))
