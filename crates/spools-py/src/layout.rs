//! (area: layout) `spools.Layout`: where each element of a distributed dataset lives
//! (a wrapper of `spools_map::Layout`), and the plan summary between two layouts.
//! `Comm.redistribute` is in `layout/redistribute.rs`.

pub(crate) mod redistribute;

use numpy::PyArrayDescr;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use spools_map::{DType, Layout, Order, Plan};

use crate::errors::{self, Kind};

/// The layout of a dataset over units (ranks, disks): `Layout("f64[1024,1024] block,block
/// on 2x2")`. Units are numbered row-major over the grid; rank `r` of a communicator holds
/// unit `r`.
///
/// The spec syntax (the one of `spools plan` and `spools map`)::
///
///     DTYPE[N0,N1,...] DIST,DIST,... on P0xP1x... [order=C|F]
///         DTYPE: u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 c64 c128 bytes(K)
///         DIST:  block | block(B) | cyclic | cyclic(B) | *     (MPI darray rules)
///     stripe(unit=SIZE,count=K[,size=SIZE])     RAID-0 byte stream
///     raid5(unit=SIZE,count=K[,size=SIZE])      RAID-5 byte stream (with parity)
///     bits(n=N,unit=[...][,local=[...]])        bit permutation (nCUBE)
///
/// A spec that does not parse raises `LayoutError` (also a `ValueError`) naming the column.
/// Layouts compare equal when they describe the same mapping, and are hashable.
#[pyclass(frozen, eq, hash, module = "spools", name = "Layout")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct PyLayout {
    /// The Rust layout.
    pub(crate) inner: Layout,
}

/// A layout argument: a `Layout` or a spec string. `what` names it in errors.
///
/// # Errors
/// `LayoutError` for a spec that does not parse, `TypeError` for anything else.
pub(crate) fn layout_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Layout> {
    if let Ok(l) = obj.cast::<PyLayout>() {
        return Ok(l.get().inner.clone());
    }
    if let Ok(s) = obj.extract::<String>() {
        return parse(&s);
    }
    Err(errors::type_error(format!(
        "{what} must be a spools.Layout or a layout spec string, got {}",
        crate::buffer::type_name(obj)
    )))
}

/// The layout a rank that declines its part of a collective call passes when it has
/// none of its own (its `layout` argument was refused): one byte on one unit. A declined
/// part is never compared with the others' arguments, and nothing moves for it.
pub(crate) fn placeholder() -> PyResult<Layout> {
    spools_map::StripeLayout::new(1, 1, Some(1))
        .map(Layout::Stripe)
        .map_err(|e| errors::raise(Kind::Layout, e.to_string()))
}

/// Parses a spec, as `LayoutError`.
fn parse(spec: &str) -> PyResult<Layout> {
    spec.parse::<Layout>().map_err(|e| {
        errors::raise(
            Kind::Layout,
            format!("layout spec {spec:?} does not parse: {e}"),
        )
    })
}

/// numpy's name of an element type (native byte order, which is the files' little-endian
/// order on the machines Spools runs on); `V<k>` for `bytes(k)`.
pub(crate) fn dtype_name(d: DType) -> String {
    match (d, d.long_name()) {
        (_, Some(name)) => name.to_string(),
        (DType::Bytes(n), None) => format!("V{n}"),
        (d, None) => d.to_string(),
    }
}

/// The numpy dtype of a layout's elements: the array's element type, `uint8` for byte
/// streams.
pub(crate) fn numpy_dtype<'py>(py: Python<'py>, l: &Layout) -> PyResult<Bound<'py, PyAny>> {
    let name = match l {
        Layout::Array(a) => dtype_name(a.dtype()),
        _ => "uint8".into(),
    };
    py.import("numpy")?.getattr("dtype")?.call1((name,))
}

/// Whether the layout's elements have a numeric type an array's dtype must match
/// (`bytes(k)` and byte streams take any dtype of the right size).
pub(crate) fn typed(l: &Layout) -> bool {
    matches!(l, Layout::Array(a) if !matches!(a.dtype(), DType::Bytes(_)))
}

/// Whether `arr`'s dtype is the layout's (for typed layouts).
pub(crate) fn dtype_matches(
    py: Python<'_>,
    l: &Layout,
    given: &Bound<'_, PyArrayDescr>,
) -> PyResult<bool> {
    if !typed(l) {
        return Ok(true);
    }
    let want = numpy_dtype(py, l)?;
    given.as_any().eq(want)
}

/// The local shape of `unit` (zeros for a unit beyond the layout: a rank holding
/// nothing); byte streams and other layouts are one-dimensional, in elements.
pub(crate) fn local_shape(l: &Layout, unit: u64) -> Vec<usize> {
    let ndim = match l {
        Layout::Array(a) => a.shape().len(),
        _ => 1,
    };
    if unit >= l.units() {
        return vec![0; ndim];
    }
    match l {
        Layout::Array(a) => a
            .local_shape(unit)
            .map(|s| s.into_iter().map(|n| n as usize).collect())
            .unwrap_or_else(|_| vec![0; ndim]),
        _ => vec![l
            .local_bytes(unit)
            .unwrap_or(0)
            .div_ceil(l.elem_size().max(1)) as usize],
    }
}

/// Bytes of `unit`'s local storage (0 beyond the layout).
pub(crate) fn local_bytes(l: &Layout, unit: u64) -> u64 {
    if unit >= l.units() {
        return 0;
    }
    l.local_bytes(unit).unwrap_or(0)
}

/// A plan between two layouts, as `LayoutError` when they do not describe one dataset.
pub(crate) fn plan(from: &Layout, to: &Layout) -> PyResult<Plan> {
    Plan::new(from, to)
        .map_err(|e| errors::raise(Kind::Layout, format!("cannot plan {from} -> {to}: {e}")))
}

/// A unit argument checked against the layout.
fn check_unit(l: &Layout, unit: i64) -> PyResult<u64> {
    if l.is_unsized() {
        return Err(errors::raise(
            Kind::Layout,
            format!("{l}: a byte-stream layout needs size=SIZE to describe its units"),
        ));
    }
    if unit < 0 || unit as u64 >= l.units() {
        return Err(errors::value_error(format!(
            "unit must be 0 to {} for layout {l}, got {unit}",
            l.units().saturating_sub(1)
        )));
    }
    Ok(unit as u64)
}

#[pymethods]
impl PyLayout {
    /// `Layout(spec)`: parses a spec string (or copies a `Layout`).
    #[new]
    fn new(spec: &Bound<'_, PyAny>) -> PyResult<PyLayout> {
        Ok(PyLayout {
            inner: layout_arg(spec, "spec")?,
        })
    }

    /// The element type as a numpy dtype (`uint8` for byte streams, `V<k>` for
    /// `bytes(k)`).
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        numpy_dtype(py, &self.inner)
    }

    /// The global shape: the array's, or `(bytes,)` for a byte stream (`None` for one
    /// without `size=`).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let s: Option<Vec<u64>> = match &self.inner {
            Layout::Array(a) => Some(a.shape().to_vec()),
            l => l.total_bytes().map(|b| vec![b / l.elem_size().max(1)]),
        };
        s.map(|s| PyTuple::new(py, s)).transpose()
    }

    /// Number of units (the ranks that hold a part; other ranks hold nothing).
    #[getter]
    fn units(&self) -> u64 {
        self.inner.units()
    }

    /// The grid of units of an array layout, e.g. `(2, 2)`; `(units,)` for other layouts.
    #[getter]
    fn grid<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        match &self.inner {
            Layout::Array(a) => PyTuple::new(py, a.grid()),
            l => PyTuple::new(py, [l.units()]),
        }
    }

    /// Storage order of an array layout: `"C"` (row-major, default) or `"F"`; `None` for
    /// other layouts.
    #[getter]
    fn order(&self) -> Option<&'static str> {
        match &self.inner {
            Layout::Array(a) if a.order() == Order::F => Some("F"),
            Layout::Array(_) => Some("C"),
            _ => None,
        }
    }

    /// Bytes of one element (1 for byte streams).
    #[getter]
    fn itemsize(&self) -> u64 {
        self.inner.elem_size()
    }

    /// Bytes of the whole dataset (`None` for a byte stream without `size=`).
    #[getter]
    fn nbytes(&self) -> Option<u64> {
        self.inner.total_bytes()
    }

    /// The shape of `unit`'s local array (rank `unit` of a communicator holds it), in
    /// elements of `dtype`; some extents may be 0. For `bytes(k)` that is a grid of k-byte
    /// elements (dtype `V<k>`): a buffer of another dtype holds `local_nbytes(unit)`
    /// bytes, e.g. `uint8` of shape `local_shape(unit) + (k,)`. Byte streams are
    /// one-dimensional (in bytes; a RAID-5 unit's includes its parity). Raises
    /// `ValueError` for a unit out of range.
    fn local_shape<'py>(&self, py: Python<'py>, unit: i64) -> PyResult<Bound<'py, PyTuple>> {
        let u = check_unit(&self.inner, unit)?;
        PyTuple::new(py, local_shape(&self.inner, u))
    }

    /// Bytes of `unit`'s local storage.
    fn local_nbytes(&self, unit: i64) -> PyResult<u64> {
        let u = check_unit(&self.inner, unit)?;
        Ok(local_bytes(&self.inner, u))
    }

    /// The pieces of the dataset `unit` holds, in its local storage order, as a list of
    /// `(global, local, length)` tuples: `length` elements that are contiguous both in the
    /// dataset's canonical order (row-major for `order=C`: the flat index of
    /// `numpy.ravel`) from flat index `global`, and in the unit's local array from flat
    /// index `local`. Offsets and lengths count ELEMENTS (of `itemsize` bytes); with
    /// `bytes=True` they count bytes.
    #[pyo3(signature = (unit, bytes = false))]
    fn extents(&self, unit: i64, bytes: bool) -> PyResult<Vec<(u64, u64, u64)>> {
        let u = check_unit(&self.inner, unit)?;
        let e = if bytes {
            1
        } else {
            self.inner.elem_size().max(1)
        };
        let it = self
            .inner
            .extents(u)
            .map_err(|e| errors::raise(Kind::Layout, e.to_string()))?;
        Ok(it.map(|x| (x.global / e, x.local / e, x.len / e)).collect())
    }

    /// The plan summary of moving the dataset from this layout to `other` (what `spools
    /// plan --json` prints): a dict with `from`, `to`, `src_units`, `dst_units`,
    /// `elem_size` (bytes), `total_bytes`, `total_runs`, `mean_run_bytes`, `local_share`
    /// (share of bytes that stay on the same unit number), and the traffic matrices
    /// `bytes` and `runs` (lists of rows: `bytes[s][d]` from source unit `s` to
    /// destination unit `d`). Raises `LayoutError` when the layouts do not describe one
    /// dataset (different sizes).
    fn plan<'py>(
        &self,
        py: Python<'py>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let to = layout_arg(other, "other")?;
        let p = plan(&self.inner, &to)?;
        let s = py
            .detach(|| p.summary())
            .map_err(|e| errors::raise(Kind::Layout, e.to_string()))?;
        let rows = |f: &dyn Fn(u64, u64) -> u64| -> Vec<Vec<u64>> {
            (0..s.src_units())
                .map(|a| (0..s.dst_units()).map(|b| f(a, b)).collect())
                .collect()
        };
        let d = PyDict::new(py);
        d.set_item("from", p.src().to_string())?;
        d.set_item("to", p.dst().to_string())?;
        d.set_item("src_units", s.src_units())?;
        d.set_item("dst_units", s.dst_units())?;
        d.set_item("elem_size", p.alignment())?;
        d.set_item("total_bytes", s.total_bytes())?;
        d.set_item("total_runs", s.total_runs())?;
        d.set_item("mean_run_bytes", s.mean_run_bytes())?;
        d.set_item("local_share", s.local_share())?;
        d.set_item("bytes", rows(&|a, b| s.bytes(a, b)))?;
        d.set_item("runs", rows(&|a, b| s.runs(a, b)))?;
        Ok(d)
    }

    /// The grid coordinates of `unit` in an array layout (row-major over the grid: unit
    /// `u` of a 2x3 grid is `(u // 3, u % 3)`); `(unit,)` for other layouts.
    fn coords<'py>(&self, py: Python<'py>, unit: i64) -> PyResult<Bound<'py, PyTuple>> {
        let u = check_unit(&self.inner, unit)?;
        match &self.inner {
            Layout::Array(a) => {
                let c = a
                    .coords(u)
                    .map_err(|e| errors::raise(Kind::Layout, e.to_string()))?;
                PyTuple::new(py, c)
            }
            _ => PyTuple::new(py, [u]),
        }
    }

    /// Pickles as its spec (so a layout travels with `send`, `bcast`, ... and `multiprocessing`).
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, pyo3::types::PyType>, (String,))> {
        Ok((slf.get_type(), (slf.get().inner.to_string(),)))
    }

    /// The spec, e.g. `f64[1024,1024] block,block on 2x2`.
    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        format!("spools.Layout({:?})", self.inner.to_string())
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLayout>()?;
    Ok(())
}
