"""numpy references for the layout tests (imported by the layout_/files_ programs):
a rank's part of a global array computed independently of Spools (MPI darray rules),
and the same from `Layout.extents`."""

import re

import numpy as np

DTYPES = {
    "u8": np.uint8, "i8": np.int8, "u16": np.uint16, "i16": np.int16,
    "u32": np.uint32, "i32": np.int32, "u64": np.uint64, "i64": np.int64,
    "f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128,
}


def parse(spec):
    """(dtype, shape, dists, grid, order) of an array spec."""
    m = re.fullmatch(r"(\w+)\[([\d,]+)\] (\S+) on ([\dx]+)(?: order=([CF]))?", spec)
    assert m, spec
    dtype = np.dtype(DTYPES[m.group(1)])
    shape = tuple(int(x) for x in m.group(2).split(","))
    dists = m.group(3).split(",")
    grid = tuple(int(x) for x in m.group(4).split("x"))
    return dtype, shape, dists, grid, m.group(5) or "C"


def indices(n, dist, p, c):
    """Global indices of a dimension of extent n that grid coordinate c of p holds."""
    if dist == "*":
        return np.arange(n)
    m = re.fullmatch(r"(block|cyclic)(?:\((\d+)\))?", dist)
    kind, b = m.group(1), m.group(2)
    if kind == "block":
        b = int(b) if b else -(-n // p)
        return np.arange(c * b, min(n, (c + 1) * b))
    b = int(b) if b else 1
    i = np.arange(n)
    return i[(i // b) % p == c]


def coords(unit, grid):
    c = []
    for g in reversed(grid):
        c.append(unit % g)
        unit //= g
    return tuple(reversed(c))


def part(glob, spec, unit):
    """Unit `unit`'s local array of `glob` laid out as `spec` (MPI darray rules)."""
    _, shape, dists, grid, order = parse(spec)
    units = int(np.prod(grid))
    if unit >= units:
        return np.empty((0,) * len(shape), dtype=glob.dtype)
    c = coords(unit, grid)
    idx = [indices(n, d, p, ci) for n, d, p, ci in zip(shape, dists, grid, c)]
    loc = glob[np.ix_(*idx)]
    return np.asfortranarray(loc) if order == "F" else np.ascontiguousarray(loc)


def part_from_extents(glob, layout, unit):
    """The same, from `layout.extents(unit)` (flat offsets in the canonical order)."""
    order = layout.order or "C"
    flat = glob.ravel(order=order)
    shape = layout.local_shape(unit)
    loc = np.empty(int(np.prod(shape)), dtype=glob.dtype)
    for g, l, n in layout.extents(unit):
        loc[l : l + n] = flat[g : g + n]
    return loc.reshape(shape, order=order)


def global_array(spec, seed=0):
    """A global array for `spec` whose every element is distinct."""
    dtype, shape, _, _, _ = parse(spec)
    a = np.arange(int(np.prod(shape)), dtype=np.int64) * 7 + seed
    if dtype.kind == "c":
        return (a + 1j * (a + 1)).astype(dtype).reshape(shape)
    if dtype.kind in "ui" and dtype.itemsize < 8:
        a = a % (1 << (8 * dtype.itemsize - 1))
    return a.astype(dtype).reshape(shape)
