//! `Comm.redistribute`: one collective call moving a distributed numpy array from one
//! layout to another (`spools_io::redistribute` on the communicator's I/O duplicate),
//! reading the caller's array and writing the new one in place, with the GIL released.
//! Also the checks every layout-driven call (redistribution, parallel files) makes of a
//! rank's buffer, and the exchange errors as exceptions.

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use spools::Communicator;
use spools_io::{ExchangeError, ExchangeOptions};
use spools_map::{Layout, Order};

use crate::buffer::{self, Access, View};
use crate::comm::Comm;
use crate::errors::{self, Kind};
use crate::runtime;
use crate::world::World;

use super::{
    dtype_matches, layout_arg, local_bytes, local_shape, numpy_dtype, placeholder, plan, typed,
};

/// An exchange error as its exception, by its kind (`ExchangeError::kind`): layouts and
/// buffers that do not fit are `LayoutError`, a transfer unit that fails its checksum a
/// `FileDamageError`, a failed single copy a `TransportError`, messaging errors their own
/// class.
pub(crate) fn exchange_error(e: ExchangeError) -> PyErr {
    errors::from_io(e.kind(), errors::exchange_msg(&e), e.to_string())
}

/// The communicator a collective I/O call of `slf` runs on: the world's I/O duplicate
/// for `World`, the communicator's own duplicate for any other (each made by the first
/// such call, so that the call's messages never match the program's own).
///
/// # Errors
/// `FinalizedError`, or the duplicate failing (a dead peer).
pub(crate) fn io_comm(py: Python<'_>, slf: &Bound<'_, Comm>) -> PyResult<Communicator> {
    slf.get().io_comm(py, slf.is_instance_of::<World>())
}

/// A layout's units against the communicator's ranks.
///
/// # Errors
/// `LayoutError` when the layout has more units than ranks.
pub(crate) fn check_units(l: &Layout, size: u32, role: &str) -> PyResult<()> {
    if l.units() > u64::from(size) {
        return Err(errors::raise(
            Kind::Layout,
            format!(
                "{role} layout {l} has {} units but the communicator has {size} ranks \
                 (rank r holds unit r)",
                l.units()
            ),
        ));
    }
    Ok(())
}

/// Checks `obj` as rank `unit`'s part of a dataset laid out as `l` (`role` and `what`
/// name the layout and the argument in errors): a C-contiguous buffer of the layout's
/// dtype (any dtype for byte streams and `bytes(k)`) holding exactly the unit's elements.
///
/// # Errors
/// `TypeError` (not a buffer, wrong dtype) or `ValueError` (not contiguous, read-only
/// for `Access::Write`, wrong size) naming the expected and the given.
pub(crate) fn check_part(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    access: Access,
    what: &str,
    l: &Layout,
    unit: u64,
    role: &str,
) -> PyResult<View> {
    let v = if fortran(l) {
        // An order=F layout's local storage is column-major: an F-contiguous array of
        // the local shape, seen through its (C-contiguous) transpose.
        match obj.cast::<PyUntypedArray>() {
            Ok(arr) if arr.ndim() > 1 => {
                if !arr.is_fortran_contiguous() {
                    return Err(errors::value_error(format!(
                        "{what} must be F-contiguous for the order=F {role} layout {l} (use \
                         numpy.asfortranarray); got an array of shape {} that is not",
                        tuple(arr.shape())
                    )));
                }
                buffer::view(&arr.getattr("T")?, access, what)?
            }
            _ => buffer::view(obj, access, what)?,
        }
    } else {
        buffer::view(obj, access, what)?
    };
    let arr = v.array(py);
    let given = arr.dtype();
    if !dtype_matches(py, l, &given)? {
        return Err(errors::type_error(format!(
            "{what} has dtype {} but the {role} layout {l} holds {}",
            given.str()?,
            numpy_dtype(py, l)?.str()?
        )));
    }
    let need = local_bytes(l, unit);
    if v.len() as u64 != need {
        return Err(errors::value_error(size_message(
            what,
            &v,
            &given.str()?.to_string(),
            l,
            unit,
            role,
        )));
    }
    Ok(v)
}

/// The destination of a call producing rank `unit`'s part of `l`: `out` checked, or a
/// new array of the local shape and the layout's dtype.
///
/// # Errors
/// As [`check_part`]; numpy's own for a new array.
pub(crate) fn destination<'py>(
    py: Python<'py>,
    out: Option<&Bound<'py, PyAny>>,
    l: &Layout,
    unit: u64,
    role: &str,
) -> PyResult<(Bound<'py, PyAny>, View)> {
    match out {
        Some(o) => {
            let v = check_part(py, o, Access::Write, "out", l, unit, role)?;
            Ok((o.clone(), v))
        }
        None if fortran(l) => {
            let mut shape = local_shape(l, unit);
            shape.reverse();
            let (a, v) = buffer::empty(py, &numpy_dtype(py, l)?, &shape)?;
            Ok((a.getattr("T")?, v))
        }
        None => {
            let (a, v) = buffer::empty(py, &numpy_dtype(py, l)?, &local_shape(l, unit))?;
            Ok((a.into_any(), v))
        }
    }
}

/// Why a buffer of the wrong size is refused as rank `unit`'s part of `l`: the bytes
/// needed and those given, each with its shape. For a typed layout in elements of its
/// dtype; for `bytes(k)` the local shape is a grid of k-byte elements, so the message
/// says what arrays hold those bytes (dtype `V<k>` of the local shape, or `uint8` with
/// a last axis of k), never quoting the element grid as a byte count; for byte streams
/// in bytes.
fn size_message(what: &str, v: &View, dtype: &str, l: &Layout, unit: u64, role: &str) -> String {
    let need = local_bytes(l, unit);
    let shape = local_shape(l, unit);
    let part = format!("rank {unit}'s part of the {role} layout {l}");
    let given = format!(
        "{} bytes (an array of shape {} and dtype {dtype})",
        v.len(),
        tuple(&v.shape)
    );
    match l {
        Layout::Array(a) if typed(l) => format!(
            "{what} has {} elements ({given}) but {part} has {} elements of dtype {} \
             (local shape {}, {need} bytes)",
            v.count(),
            need / l.elem_size().max(1),
            crate::layout::dtype_name(a.dtype()),
            tuple(&shape)
        ),
        Layout::Array(a) => {
            let k = a.dtype().size();
            let mut as_u8 = shape.clone();
            as_u8.push(k as usize);
            format!(
                "{what} has {given} but {part} needs {need} bytes: {} elements of {} bytes \
                 each in a local shape {} (e.g. dtype V{k} of shape {}, or uint8 of shape {})",
                need / k.max(1),
                k,
                tuple(&shape),
                tuple(&shape),
                tuple(&as_u8)
            )
        }
        _ => format!("{what} has {given} but {part} needs {need} bytes"),
    }
}

/// A shape as Python prints it: `(3,)`, `(13, 11)`.
pub(crate) fn tuple(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        s => format!(
            "({})",
            s.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Whether an array layout stores its elements in Fortran (column-major) order.
fn fortran(l: &Layout) -> bool {
    matches!(l, Layout::Array(a) if a.order() == Order::F)
}

/// Whether two views share memory.
pub(crate) fn overlap(a: &View, b: &View) -> bool {
    let (x, y) = (a.bytes().as_ptr_range(), b.bytes().as_ptr_range());
    a.len() > 0 && b.len() > 0 && x.start < y.end && y.start < x.end
}

#[pymethods]
impl Comm {
    /// Moves a distributed array from layout `src` to layout `dst` (each a `Layout` or a
    /// spec string) and returns this rank's part of it in `dst`: a new numpy array of the
    /// local shape `dst.local_shape(rank)` and the layout's dtype, or `out`, filled in
    /// place. Collective: every rank of the communicator calls it with the same layouts.
    ///
    /// `a` is this rank's part in `src`: a C-contiguous array of the layout's dtype with
    /// exactly `src.local_shape(rank)`'s number of elements (any shape). Rank `r` holds
    /// unit `r`; a rank beyond a layout's units passes (and gets) an empty array. The
    /// exchange reads `a` and writes the result in place, with no copy through Python
    /// objects, and releases the GIL.
    ///
    /// Raises `LayoutError` when the two layouts do not describe the same dataset or
    /// have more units than the communicator has ranks, `TypeError`/`ValueError` for an
    /// `a` or `out` of the wrong dtype or size (the other ranks then raise that rank's class
    /// with its message, naming it: the call never hangs). On a communicator other than the world, each call first
    /// duplicates it (collectively) so its messages never mix with the program's.
    #[pyo3(signature = (a, src, dst, out = None))]
    fn redistribute<'py>(
        slf: &Bound<'py, Self>,
        a: &Bound<'py, PyAny>,
        src: &Bound<'py, PyAny>,
        dst: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        slf.get().live_group()?;
        let size = slf.get().comm.size();
        let me = u64::from(slf.get().comm.rank());
        // A rank whose arguments are wrong (a layout, `a`, `out`) still takes part (with
        // nothing), so that the others fail instead of waiting for it; it raises its own
        // error afterwards.
        let mut problem = None;
        let planned = (|| {
            let from = layout_arg(src, "src")?;
            let to = layout_arg(dst, "dst")?;
            let p = plan(&from, &to)?;
            // The plan's layouts have their sizes bound (a byte stream without size=
            // takes the other layout's).
            check_units(p.src(), size, "source")?;
            check_units(p.dst(), size, "destination")?;
            Ok(p)
        })();
        let p = match planned {
            Ok(p) => p,
            Err(e) => {
                problem = Some(e);
                let l = placeholder()?;
                plan(&l, &l)?
            }
        };
        let (from, to) = (p.src().clone(), p.dst().clone());
        let (mut input, mut output) = (None, None);
        if problem.is_none() {
            input = check_part(py, a, Access::Read, "a", &from, me, "source")
                .map_err(|e| problem = Some(e))
                .ok();
            output = match destination(py, out, &to, me, "destination") {
                Ok(o) => Some(o),
                Err(e) => {
                    problem.get_or_insert(e);
                    None
                }
            };
        }
        if let (Some(i), Some((_, o))) = (&input, &output) {
            if overlap(i, o) {
                problem.get_or_insert_with(|| {
                    errors::value_error(
                        "out shares memory with a: redistribute cannot work in place",
                    )
                });
            }
        }
        let comm = io_comm(py, slf)?;
        let ok = problem.is_none();
        let src_bytes: &[u8] = match (&input, ok) {
            (Some(v), true) => v.bytes(),
            _ => &[],
        };
        let dst_bytes: &mut [u8] = match (&output, ok) {
            // SAFETY: the view is of a writable array (checked by `destination`) that
            // nothing else uses during the call: a new array, or `out`, which does not
            // overlap `a` (checked above); this is its only borrow.
            (Some((_, v)), true) => unsafe { v.bytes_mut() },
            _ => &mut [],
        };
        // This rank's own argument error is told to the others through the call.
        let opts = ExchangeOptions {
            declined: problem.as_ref().map(|p| errors::declined(py, p)),
            ..ExchangeOptions::default()
        };
        let r = runtime::blocking(py, || {
            spools_io::redistribute_plan(&comm, &p, src_bytes, dst_bytes, &opts)
        });
        match (problem, r) {
            (Some(p), _) => return Err(p),
            (None, Err(e)) => return Err(exchange_error(e)),
            (None, Ok(_)) => {}
        }
        match output {
            Some((arr, _)) => Ok(arr),
            None => Err(errors::raise(Kind::Spools, "redistribute: no destination")),
        }
    }
}
