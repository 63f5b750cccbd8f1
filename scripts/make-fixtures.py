#!/usr/bin/env python3
"""Writes the .npy fixtures of crates/spools-io/tests/npy_fixtures.rs with numpy.

The test reads these files through Spools and checks every element against the same
closed-form values (written out again in the test, in Rust), and compares files Spools
writes with them byte for byte. The outputs are committed: neither the tests nor CI need
numpy. Run it again only to change the fixtures:

    pip install numpy && python3 scripts/make-fixtures.py

Each fixture: (file name, dtype, shape, order, value of the element at multi-index idx).
"""

import os
import sys

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "spools-io", "tests", "data")

FIXTURES = [
    ("u8_1d.npy", "u1", (37,), "C", lambda i: (7 * i[0] + 3) % 256),
    ("i16_2d_c.npy", "<i2", (5, 7), "C", lambda i: 100 * i[0] + i[1] - 300),
    ("f64_2d_f.npy", "<f8", (6, 4), "F", lambda i: 0.5 * i[0] - 0.25 * i[1]),
    ("u32_3d_c.npy", "<u4", (3, 4, 5), "C", lambda i: 10000 * i[0] + 100 * i[1] + i[2] + 7),
    ("f32_3d_f.npy", "<f4", (4, 3, 2), "F", lambda i: i[0] - 2.0 * i[1] + 0.125 * i[2]),
    ("i64_1d.npy", "<i8", (11,), "C", lambda i: -(i[0] ** 3) * 1000003),
    ("c128_2d_f.npy", "<c16", (3, 5), "F", lambda i: complex(i[0], -i[1])),
    ("i32_2d_c.npy", "<i4", (12, 10), "C", lambda i: 1000 * i[0] + i[1]),
]


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, dtype, shape, order, value in FIXTURES:
        a = np.empty(shape, dtype=dtype, order=order)
        for idx in np.ndindex(*shape):
            a[idx] = value(idx)
        if order == "F":
            assert a.flags.f_contiguous and not a.flags.c_contiguous, name
        np.save(os.path.join(OUT, name), a, allow_pickle=False)
        print(f"{name}: {dtype} {shape} order={order}", file=sys.stderr)


if __name__ == "__main__":
    main()
