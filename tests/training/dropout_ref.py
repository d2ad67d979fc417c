#!/usr/bin/env python3
"""Independent reference for GSL's dropout mask (docs/training.md).

Element i (global flat index, C order) of a dropout at call site `site`,
optimizer step `step`, global seed `seed` is kept iff u >= p, where u is
the first Philox4x32-10 word (Salmon et al. 2011, Random123's constants)
of key `seed` and counter (index, stream), shifted right by 8 and scaled
by 2^-24; stream = FNV-1a-64("dropout") xor ((step << 32 | site) *
0x9E3779B97F4A7C15 mod 2^64). Kept values are scaled by 1 / (1 - p).

Usage: dropout_ref.py SEED STEP SITE P N  -> prints the N-element mask
(0 or 1) as a Python list.
"""
import sys

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for c in s.encode():
        h ^= c
        h = (h * 0x100000001B3) & M64
    return h


def philox(key, stream, index):
    k0, k1 = key & M32, key >> 32
    c0, c1 = index & M32, index >> 32
    c2, c3 = stream & M32, stream >> 32
    for r in range(10):
        if r > 0:
            k0 = (k0 + 0x9E3779B9) & M32
            k1 = (k1 + 0xBB67AE85) & M32
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        hi0, lo0 = p0 >> 32, p0 & M32
        hi1, lo1 = p1 >> 32, p1 & M32
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def stream(site, step):
    word = ((step & M32) << 32) | (site & M32)
    return fnv1a64("dropout") ^ ((word * 0x9E3779B97F4A7C15) & M64)


def mask(seed, step, site, p, n):
    s = stream(site, step)
    return [1 if (philox(seed, s, i)[0] >> 8) * 2.0 ** -24 >= p else 0 for i in range(n)]


if __name__ == "__main__":
    seed, step, site = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    p, n = float(sys.argv[4]), int(sys.argv[5])
    print(mask(seed, step, site, p, n))
