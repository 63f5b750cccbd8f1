//! Numpy arrays in the shared heap (`Comm.alloc`): memory the ranks of a host can map, so
//! that `redistribute` (and sends) between such arrays take one copy.

use numpy::ndarray::ArrayView1;
use numpy::PyArray1;
use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use spools::{HeapError, SharedBuf};

use crate::comm::Comm;
use crate::errors::{self, Kind};

/// The shared-heap segment behind arrays made by `Comm.alloc`: the base object of their
/// memory, freed (unmapped, its name removed) when the last array viewing it goes.
#[pyclass(frozen, module = "spools._spools")]
pub(crate) struct HeapBlock {
    buf: SharedBuf<u8>,
    /// Its length (kept here: the bytes themselves are numpy's to touch).
    bytes: usize,
}

#[pymethods]
impl HeapBlock {
    fn __repr__(&self) -> String {
        format!(
            "<spools shared-heap segment {} of {} bytes>",
            self.buf.heap_ref().name,
            self.bytes
        )
    }
}

fn heap_error(e: HeapError) -> PyErr {
    match e {
        HeapError::Create { .. } => PyMemoryError::new_err(e.to_string()),
        HeapError::TooLarge { .. } => errors::value_error(e.to_string()),
        _ => errors::raise(Kind::Spools, e.to_string()),
    }
}

/// `shape` as a list of extents: an int or a sequence of ints.
fn extents(shape: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    match shape.extract::<usize>() {
        Ok(n) => Ok(vec![n]),
        Err(_) => shape.extract::<Vec<usize>>().map_err(|_| {
            errors::type_error("shape must be a non-negative int or a sequence of them")
        }),
    }
}

#[pymethods]
impl Comm {
    /// Allocates a zero-filled numpy array of `shape` and `dtype` (default `float64`), in
    /// `order` `"C"` (default) or `"F"` (for `order=F` layouts), in the shared heap: memory that the ranks of this host can map, so that
    /// `redistribute` between such arrays (and a large send from one into another) takes
    /// one copy, straight from the peer's array into this rank's, with no pack, unpack or
    /// ring. Use it like any array (slices and views keep it alive); the memory is freed
    /// when the last array viewing it goes. Not collective: each rank allocates its own.
    ///
    /// ```python
    /// rows = spools.Layout("f64[4096,4096] block,* on 4x1")
    /// a = world.alloc(rows.local_shape(world.rank))
    /// cols = spools.Layout("f64[4096,4096] *,block on 1x4 order=F")
    /// b = world.alloc(cols.local_shape(world.rank), order="F")
    /// world.redistribute(a, rows, cols, out=b)      # one copy
    /// ```
    ///
    /// Raises `TypeError` for a bad shape or a dtype holding Python objects, `ValueError`
    /// for a size beyond the address space or an order other than `"C"` and `"F"`, `MemoryError` when the shared memory cannot
    /// be had (`/dev/shm` full, limits).
    #[pyo3(signature = (shape, dtype = None, order = "C"))]
    fn alloc<'py>(
        slf: &Bound<'py, Self>,
        shape: &Bound<'py, PyAny>,
        dtype: Option<&Bound<'py, PyAny>>,
        order: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        slf.get().live_group()?;
        if order != "C" && order != "F" {
            return Err(errors::value_error(format!(
                "alloc: order must be \"C\" or \"F\", not {order:?}"
            )));
        }
        let np = py.import("numpy")?;
        let dt = match dtype {
            Some(d) => np.call_method1("dtype", (d,))?,
            None => np.call_method1("dtype", ("float64",))?,
        };
        if dt.getattr("hasobject")?.extract::<bool>()? {
            return Err(errors::type_error(
                "alloc: a dtype holding Python objects cannot live in shared memory",
            ));
        }
        let dims = extents(shape)?;
        let item: usize = dt.getattr("itemsize")?.extract()?;
        let bytes = dims
            .iter()
            .try_fold(item, |a, &d| a.checked_mul(d))
            .ok_or_else(|| errors::value_error("alloc: the array's size overflows"))?;
        // A segment holds at least one byte; an empty array views none of it.
        let seg = bytes.max(1);
        let mut buf = slf
            .get()
            .rt
            .with_world(|w| w.alloc::<u8>(seg))?
            .map_err(heap_error)?;
        // Taken through `&mut`: the array writes through it.
        let ptr = buf.as_mut_ptr();
        let block = Bound::new(py, HeapBlock { buf, bytes: seg })?;
        // SAFETY: `ptr` is the first of at least `bytes` initialised bytes of the
        // segment, taken from an exclusive borrow that has ended; `block` keeps the
        // segment mapped and never makes a Rust reference to its bytes (it only reads its
        // name and length), so numpy's reads and writes through `ptr` alias nothing. The
        // array made below holds `block` as its base object, so the memory outlives every
        // array viewing it.
        let raw = unsafe {
            let view = ArrayView1::from_shape_ptr(bytes, ptr.cast_const());
            PyArray1::<u8>::borrow_from_array(&view, block.into_any())
        };
        let kw = pyo3::types::PyDict::new(py);
        kw.set_item("order", order)?;
        raw.call_method1("view", (dt,))?.call_method(
            "reshape",
            (PyTuple::new(py, dims)?,),
            Some(&kw),
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<HeapBlock>()
}
