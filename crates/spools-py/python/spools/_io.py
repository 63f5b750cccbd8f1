"""Parallel files read by one process: ``spools.open(path)`` returns a :class:`File`
that reads a whole dataset or an h5py-like slice of it (``f[10:20, :]``), without a
job and without ``spools.init()``.

The collective calls (``Comm.redistribute``, ``Comm.write_file``, ``Comm.read_file``)
and :class:`spools.Layout` are in the extension module (``src/layout.rs``,
``src/files.rs``).
"""

import numbers as _numbers
import os as _os

import numpy as _np

from . import _spools

__all__ = ["open", "File"]

# Above this many separate byte ranges, a slice is read as the one range covering them
# all when that range is not much larger than what the slice needs.
_MANY_RUNS = 64
# A covering range up to this size is read at once rather than range by range: a
# canonical file's (fewer system calls) and a striped file's (each range would read its
# whole stripe rows again).
_SMALL_SPAN = 256 << 10
_SMALL_SPAN_STRIPED = 64 << 20


def open(path, dtype=None, shape=None, layout=None):  # noqa: A001 (h5py's name)
    """Opens the parallel file ``path`` (``.npy``, canonical or a RAID-0/RAID-5 striped
    file's manifest) for reading by this process alone; no job is needed. Returns a
    :class:`File`, also a context manager::

        with spools.open("heat-00050.npy") as f:
            f.shape, f.dtype        # (768, 768), float64
            rows = f[10:20, :]      # reads only those rows' bytes
            whole = f[()]           # or f.read()

    A ``.npy`` file records its dtype and shape, a striped file the layout it was
    written from; a canonical file records neither and reads as ``uint8`` bytes unless
    ``dtype`` (and ``shape``), or a ``layout`` (a :class:`spools.Layout` or spec), say
    otherwise. Raises ``FileNotFoundError`` for a missing file, ``FileDamageError`` for a
    damaged header or manifest, ``ValueError`` when ``dtype``/``shape`` do not fit the
    file's size.
    """
    return File(path, dtype=dtype, shape=shape, layout=layout)


class File:
    """A parallel file opened by one process (see :func:`spools.open`).

    ``f.shape``, ``f.dtype``, ``f.ndim``, ``f.size``, ``f.nbytes``, ``f.format``
    (``"npy"``, ``"canonical"``, ``"raid0"``, ``"raid5"``), ``len(f)`` (the first
    extent), ``f[key]``, ``f.read()``, ``f.close()``, ``with``.

    Indexing takes integers and slices of step 1 (negative indices count from the end,
    as in numpy), at most one ``...``, and ``()`` for the whole dataset; it reads only
    the byte ranges the selection covers (rebuilding RAID-5 blocks from parity where
    needed) and returns a new numpy array. Other steps, index arrays, boolean masks and
    ``None`` raise ``TypeError``/``ValueError``: read the smallest covering slice and
    index that in numpy.
    """

    def __init__(self, path, dtype=None, shape=None, layout=None):
        self._path = _os.fspath(path)
        self._r = _spools._FileReader(self._path)
        nbytes = self._r.nbytes
        order = "C"
        if self._r.format == "npy":
            fdtype, fshape = _np.dtype(self._r.descr), tuple(self._r.shape)
            order = "F" if self._r.fortran else "C"
        elif self._r.dataset is not None and _array_layout(self._r.dataset) is not None:
            lay = _array_layout(self._r.dataset)
            fdtype, fshape, order = lay.dtype, tuple(lay.shape), lay.order
        else:
            fdtype, fshape = _np.dtype(_np.uint8), (nbytes,)
        if layout is not None:
            if not isinstance(layout, _spools.Layout):
                layout = _spools.Layout(layout)
            if dtype is not None or shape is not None:
                self._r.close()
                raise TypeError("give either layout= or dtype=/shape=, not both")
            dtype, shape = layout.dtype, layout.shape
            order = layout.order or "C"
        if dtype is not None or shape is not None:
            dt = _np.dtype(dtype) if dtype is not None else fdtype
            if shape is None:
                if nbytes % dt.itemsize:
                    self._r.close()
                    raise ValueError(
                        "%s holds %d bytes, not a whole number of %s elements (%d bytes each)"
                        % (self._path, nbytes, dt, dt.itemsize)
                    )
                shape = (nbytes // dt.itemsize,)
            shape = tuple(int(n) for n in (shape if not isinstance(shape, int) else (shape,)))
            need = int(_np.prod(shape, dtype=_np.int64)) * dt.itemsize
            if need != nbytes:
                self._r.close()
                raise ValueError(
                    "%s holds %d bytes but dtype %s and shape %r describe %d"
                    % (self._path, nbytes, dt, shape, need)
                )
            fdtype, fshape = dt, shape
        self._dtype, self._shape, self._order = fdtype, fshape, order

    # ---- what the file holds ----

    @property
    def path(self):
        """The path given to :func:`spools.open`."""
        return self._path

    @property
    def shape(self):
        """The dataset's shape."""
        return self._shape

    @property
    def dtype(self):
        """The dataset's numpy dtype."""
        return self._dtype

    @property
    def ndim(self):
        """Number of dimensions."""
        return len(self._shape)

    @property
    def size(self):
        """Number of elements."""
        return int(_np.prod(self._shape, dtype=_np.int64))

    @property
    def nbytes(self):
        """Bytes of the dataset."""
        return self._r.nbytes

    @property
    def format(self):
        """How the file is stored: ``"npy"``, ``"canonical"``, ``"raid0"`` or ``"raid5"``."""
        return self._r.format

    @property
    def order(self):
        """``"C"`` (row-major) or ``"F"`` (column-major): the order of the bytes in the
        file."""
        return self._order

    @property
    def closed(self):
        """Whether :meth:`close` ran."""
        return self._r.closed

    def __len__(self):
        """The first extent (``TypeError`` for a 0-d dataset)."""
        if not self._shape:
            raise TypeError("len() of a 0-d dataset")
        return self._shape[0]

    def __repr__(self):
        state = "closed " if self.closed else ""
        return "<%sspools.File %r: %s %s, shape %r>" % (
            state,
            self._path,
            self.format,
            self._dtype,
            self._shape,
        )

    # ---- reading ----

    def read(self, out=None):
        """The whole dataset as a new array (or into ``out``, a C-contiguous array of
        the same dtype and shape, returned)."""
        if out is None:
            out = _np.empty(self._storage_shape(), dtype=self._dtype)
            self._r.read_into(0, out)
            return out.T if self._order == "F" else out
        if not isinstance(out, _np.ndarray) or out.dtype != self._dtype or out.shape != self._shape:
            raise ValueError(
                "out must be a numpy array of dtype %s and shape %r; got %s"
                % (self._dtype, self._shape, _describe(out))
            )
        target = out.T if self._order == "F" else out
        if not target.flags.c_contiguous:
            raise ValueError("out must be %s-contiguous to be filled in place" % self._order)
        self._r.read_into(0, target)
        return out

    def __array__(self, dtype=None, copy=None):
        """``numpy.asarray(f)``: the whole dataset."""
        a = self.read()
        return a if dtype is None else a.astype(dtype)

    def __getitem__(self, key):
        """``f[10:20, :]``, ``f[3]``, ``f[..., 0]``, ``f[()]``: a new array of the
        selection, read from the byte ranges it covers (see the class's docstring)."""
        sel, squeeze = _selection(key, self._shape)
        if self._order == "F":
            a = self._read_c(sel[::-1], self._shape[::-1]).T
        else:
            a = self._read_c(sel, self._shape)
        if squeeze:
            a = a[tuple(0 if s else slice(None) for s in squeeze)]
        return a

    def _storage_shape(self):
        return self._shape[::-1] if self._order == "F" else self._shape

    def _read_c(self, sel, shape):
        """Reads the box ``sel`` (per dimension (start, count)) of a C-order dataset of
        ``shape``; returns it as a C-contiguous array of the box's shape."""
        counts = tuple(c for _, c in sel)
        out = _np.empty(counts, dtype=self._dtype)
        if out.size == 0:
            return out
        isz = self._dtype.itemsize
        nd = len(shape)
        # Element strides of the C-order dataset.
        strides = [1] * nd
        for k in range(nd - 2, -1, -1):
            strides[k] = strides[k + 1] * shape[k + 1]
        # The last dimension selected partly: everything after it is whole, so each
        # index of the dimensions before it is one contiguous run.
        d = nd - 1
        while d > 0 and sel[d] == (0, shape[d]):
            d -= 1
        if nd == 0:
            self._r.read_into(0, out)
            return out
        run = sel[d][1] * strides[d]
        outer = counts[:d]
        nruns = int(_np.prod(outer, dtype=_np.int64)) if outer else 1
        base = sum(s * strides[k] for k, (s, _) in enumerate(sel))
        if nruns == 1:
            self._r.read_into(base * isz, out)
            return out
        last = base + sum((c - 1) * strides[k] for k, c in enumerate(outer)) + run
        span = last - base
        if self._covering(nruns, span * isz, out.nbytes):
            # One read of the covering range, then numpy picks the box out of it.
            flat = _np.empty(span, dtype=self._dtype)
            self._r.read_into(base * isz, flat)
            idx = _np.zeros(outer, dtype=_np.int64)
            for k, c in enumerate(outer):
                shp = [1] * len(outer)
                shp[k] = c
                idx = idx + (_np.arange(c, dtype=_np.int64) * strides[k]).reshape(shp)
            rows = idx.reshape(-1)[:, None] + _np.arange(run, dtype=_np.int64)[None, :]
            out.reshape(-1)[:] = flat[rows.reshape(-1)]
            return out
        rows = out.reshape(nruns, run)
        for j, ix in enumerate(_np.ndindex(*outer)):
            off = base + sum(i * strides[k] for k, i in enumerate(ix))
            self._r.read_into(off * isz, rows[j])
        return out

    def _covering(self, nruns, span, need):
        """Whether to read the `span` bytes covering `nruns` separate ranges of `need`
        bytes in all, rather than each range."""
        if self._r.format in ("raid0", "raid5"):
            return span <= _SMALL_SPAN_STRIPED
        return span <= _SMALL_SPAN or (nruns > _MANY_RUNS and span <= 4 * need)

    # ---- closing ----

    def close(self):
        """Closes the file; later reads raise ``ValueError``."""
        self._r.close()

    def __enter__(self):
        """``with spools.open(path) as f:`` closes the file at the end of the block."""
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _array_layout(spec):
    """The layout a striped file records, when it is an array layout."""
    try:
        lay = _spools.Layout(spec)
    except ValueError:
        return None
    return lay if lay.order is not None else None


def _describe(x):
    if isinstance(x, _np.ndarray):
        return "an array of dtype %s and shape %r" % (x.dtype, x.shape)
    return type(x).__name__


def _selection(key, shape):
    """Normalises an index into per-dimension (start, count) and which dimensions an
    integer selects (to drop from the result)."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        if sum(1 for k in key if k is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        fill = len(shape) - (len(key) - 1)
        if fill < 0:
            raise IndexError(
                "too many indices: the dataset has %d dimensions, %d were given"
                % (len(shape), len(key) - 1)
            )
        key = key[:i] + (slice(None),) * fill + key[i + 1 :]
    if len(key) > len(shape):
        raise IndexError(
            "too many indices: the dataset has %d dimensions, %d were given"
            % (len(shape), len(key))
        )
    key = key + (slice(None),) * (len(shape) - len(key))
    sel, squeeze = [], []
    for dim, (k, n) in enumerate(zip(key, shape)):
        if isinstance(k, (bool, _np.bool_)):
            raise TypeError("boolean indices are not supported by spools.File; read a slice and index it in numpy")
        if isinstance(k, _numbers.Integral):
            i = int(k)
            if i < -n or i >= n:
                raise IndexError("index %d is out of bounds for axis %d with size %d" % (i, dim, n))
            sel.append((i % n, 1))
            squeeze.append(True)
        elif isinstance(k, slice):
            start, stop, step = k.indices(n)
            if step != 1:
                raise ValueError(
                    "spools.File slices take step 1 only (axis %d has step %d); read the "
                    "covering slice and step through it in numpy" % (dim, step)
                )
            sel.append((start, max(0, stop - start)))
            squeeze.append(False)
        else:
            raise TypeError(
                "spools.File indices are integers, slices of step 1 and '...'; got %s for "
                "axis %d (read a slice and index it in numpy)" % (type(k).__name__, dim)
            )
    return sel, (squeeze if any(squeeze) else None)
