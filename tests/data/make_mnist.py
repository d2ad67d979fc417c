#!/usr/bin/env python3
"""make_mnist.py DIR: an MNIST-sized synthetic data set for tests/data/mnist.gsl.

The shapes and dtypes of MNIST as it is usually saved with NumPy: a
training set of 60,000 uint8 images of 28 x 28 pixels with int64 labels
(NumPy's default integer) in 10 classes, and a held-out set of 10,000 of
the same. No download: each class has a fixed random 28 x 28 prototype
(RandomState(0)); an image is 255 * (S * prototype + (1 - S) * noise),
uniform noise, rounded to uint8, so the classes overlap and a small model
learns them to well above chance (10%) but not to 100%. Writes
mnist_x.npy uint8 [60000, 28, 28], mnist_y.npy int64 [60000],
mnist_test_x.npy uint8 [10000, 28, 28], mnist_test_y.npy int64 [10000].
"""
import os
import sys

import numpy as np

C, S = 10, 0.08
out = sys.argv[1] if len(sys.argv) > 1 else "."
rng = np.random.RandomState(0)
prototypes = rng.uniform(0.0, 1.0, size=(C, 28, 28))


def images(n):
    y = rng.randint(0, C, size=n)                       # int64, NumPy's default
    x = np.empty((n, 28, 28), np.uint8)
    for i in range(0, n, 5000):                         # in parts: less memory
        part = S * prototypes[y[i:i + 5000]] + (1.0 - S) * rng.uniform(0.0, 1.0, size=(len(y[i:i + 5000]), 28, 28))
        x[i:i + 5000] = np.rint(255.0 * part)
    return x, y


for name, n in (("mnist", 60000), ("mnist_test", 10000)):
    x, y = images(n)
    np.save(os.path.join(out, name + "_x.npy"), x)
    np.save(os.path.join(out, name + "_y.npy"), y)
