"""Random distributions of a dataset over ranks, as Spools layout specs, and the
reference values the I/O benchmark writes (every element its global index plus a seed,
in the element type)."""

import math

import numpy as np

DTYPES = {
    "u8": np.uint8,
    "i16": np.int16,
    "u16": np.uint16,
    "i32": np.int32,
    "u32": np.uint32,
    "i64": np.int64,
    "f32": np.float32,
    "f64": np.float64,
    "c64": np.complex64,
    "c128": np.complex128,
}


def reference(dtype, shape, seed=0, fortran=False):
    """The dataset `spools bench io --write --seed SEED` writes, as numpy makes it: each
    element holds its index in the layout's storage order (C, or Fortran for order=F)."""
    if fortran:
        return reference(dtype, list(shape)[::-1], seed).T
    idx = np.arange(math.prod(shape), dtype=np.uint64) + np.uint64(seed)
    t = DTYPES[dtype]
    if np.issubdtype(t, np.integer):
        vals = idx.astype(t)  # wraps, as the benchmark does
    elif t is np.complex64:
        vals = idx.astype(np.float32).astype(np.complex64)
    elif t is np.complex128:
        vals = idx.astype(np.float64).astype(np.complex128)
    else:
        vals = idx.astype(t)
    return vals.reshape(shape)


def _factor(n, dims, rng):
    """A grid of `dims` extents whose product is n."""
    grid = [1] * dims
    for p in _primes(n):
        grid[rng.randrange(dims)] *= p
    return grid


def _primes(n):
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def random_layout(rng, dtype, shape, ranks, fortran=None):
    """A random layout of `dtype[shape]` over at most `ranks` units: block, cyclic,
    block-cyclic or whole per dimension, in C or Fortran order (random unless given)."""
    units = rng.randint(1, ranks)
    grid = _factor(units, len(shape), rng)
    dists = []
    for n, g in zip(shape, grid):
        if g == 1 and rng.random() < 0.3:
            dists.append("*")
        else:
            dists.append(rng.choice(["block", "cyclic", f"cyclic({rng.randint(1, max(1, n // 2))})"]))
    spec = f"{dtype}[{','.join(map(str, shape))}] {','.join(dists)} on {'x'.join(map(str, grid))}"
    if fortran is None:
        fortran = rng.random() < 0.3
    if fortran:
        spec += " order=F"
    return spec
