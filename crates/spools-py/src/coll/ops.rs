//! Reduction operators: the built-in ones by name, and a Python callable `f(a, b) ->
//! array` on whole arrays, run as the runtime's slice operator (`spools::Op::UserSlice`)
//! with the GIL taken back for each call. An exception in the callable (or a result of
//! the wrong dtype or shape) is kept, the reduction goes on without calling it again (so
//! that no rank waits forever), and the call raises that exception at its end; a
//! blocking call then tells every rank (a one-byte allgather), whose call raises too. A
//! non-blocking call cannot add that allgather (requests are waited in any order, or
//! dropped): its operator carries a [`spools::Verdict`] instead, the agreement the
//! runtime appends to the collective itself, so that every rank's `wait()` raises too
//! (the others a `SpoolsError` naming the rank whose function raised).

use std::sync::{Arc, Mutex, PoisonError};

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;
use spools::Element;

use super::carrier::Carrier;
use super::shapes::tuple;
use crate::buffer::{self, Access, Dtype, View};
use crate::errors;
use spools::DType;

/// A reduction operator made of a Python function `f(a, b) -> array`, with whether it
/// is commutative (`commute=True` lets the runtime combine contributions in any order,
/// and long arrays block by block; otherwise `a` always holds lower ranks' contributions
/// than `b`, and both are whole arrays of the reduced array's shape).
///
/// Any callable can be given as `op=` directly: it is then taken as non-commutative.
#[pyclass(frozen, module = "spools")]
pub(crate) struct Op {
    func: Py<PyAny>,
    commute: bool,
}

#[pymethods]
impl Op {
    /// `Op(f, commute=False)`: `f(a, b)` returns the combination of arrays `a` (the
    /// lower ranks' partial result) and `b` (the higher ranks'), of their dtype and shape.
    #[new]
    #[pyo3(signature = (func, commute = false))]
    fn new(func: &Bound<'_, PyAny>, commute: bool) -> PyResult<Op> {
        if !func.is_callable() {
            return Err(errors::type_error(format!(
                "Op needs a callable f(a, b) -> array, got {}",
                buffer::type_name(func)
            )));
        }
        Ok(Op {
            func: func.clone().unbind(),
            commute,
        })
    }

    /// Whether the function is commutative.
    #[getter]
    fn commute(&self) -> bool {
        self.commute
    }

    /// Calls the function: `f(a, b)`.
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        a: &Bound<'py, PyAny>,
        b: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.func.bind(py).call1((a, b))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let f = self
            .func
            .bind(py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_else(|_| "?".into());
        format!(
            "spools.Op({f}, commute={})",
            if self.commute { "True" } else { "False" }
        )
    }
}

/// A built-in operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    Sum,
    Prod,
    Min,
    Max,
}

/// A Python reduction function applied to whole arrays (see the module docs).
pub(crate) struct UserOp {
    func: Py<PyAny>,
    commute: bool,
    /// The operands' dtype.
    dtype: Py<PyArrayDescr>,
    /// A whole operand's shape (pieces of other lengths are given as 1-D arrays).
    shape: Vec<usize>,
    itemsize: usize,
    /// The first exception of the function, raised when the collective ends.
    error: Mutex<Option<PyErr>>,
    /// The lowest rank whose function raised, as a non-blocking call's agreement said.
    spoiled_by: Mutex<Option<u32>>,
}

impl spools::Verdict for UserOp {
    fn failed(&self) -> bool {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    fn agreed(&self, failed: &[u32]) {
        *self
            .spoiled_by
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = failed.first().copied();
    }
}

impl UserOp {
    /// The kept exception, if the function raised.
    pub(crate) fn take_error(&self) -> Option<PyErr> {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// The lowest rank whose function raised, if a non-blocking call's agreement said
    /// one did (taken once).
    pub(crate) fn take_spoiled(&self) -> Option<u32> {
        self.spoiled_by
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// `acc = acc op other` (`acc_is_lower`) or `other op acc`, through the function.
    fn combine(&self, acc: &mut [u8], other: &[u8], acc_is_lower: bool) {
        if self
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
        {
            return;
        }
        if let Err(e) = crate::reentry::reentering(|py| self.call(py, acc, other, acc_is_lower)) {
            let mut g = self.error.lock().unwrap_or_else(PoisonError::into_inner);
            if g.is_none() {
                *g = Some(e);
            }
        }
    }

    fn call(&self, py: Python<'_>, acc: &mut [u8], other: &[u8], lower: bool) -> PyResult<()> {
        let n = acc.len() / self.itemsize.max(1);
        let whole: usize = self.shape.iter().product();
        let shape = if n == whole {
            self.shape.clone()
        } else {
            vec![n]
        };
        let dtype = self.dtype.bind(py);
        let (a, av) = buffer::empty(py, dtype.as_any(), &shape)?;
        let (b, bv) = buffer::empty(py, dtype.as_any(), &shape)?;
        // SAFETY: both views are of arrays made just above, not shared with anyone.
        unsafe {
            av.bytes_mut().copy_from_slice(acc);
            bv.bytes_mut().copy_from_slice(other);
        }
        let (lo, hi) = if lower { (a, b) } else { (b, a) };
        let r = self.func.bind(py).call1((lo, hi))?;
        let r = ascontiguousarray(py)?.call1((r,))?;
        let rv = buffer::view(&r, Access::Read, "the result of the reduction function")?;
        let rd = rv.array(py).dtype();
        if !rd.is_equiv_to(dtype) {
            return Err(errors::type_error(format!(
                "the reduction function must return an array of its arguments' dtype \
                 {dtype}, got dtype {rd}"
            )));
        }
        if rv.len() != acc.len() {
            return Err(errors::value_error(format!(
                "the reduction function must return an array of its arguments' shape \
                 {}, got shape {}",
                tuple(&shape),
                tuple(&rv.shape)
            )));
        }
        acc.copy_from_slice(rv.bytes());
        Ok(())
    }
}

/// `numpy.ascontiguousarray`, looked up once.
fn ascontiguousarray(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static F: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    F.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("numpy")?.getattr("ascontiguousarray")?.unbind())
    })
    .map(|f| f.bind(py))
}

/// What a reduction of one array with one operator runs: the carrier type and the
/// runtime operator.
pub(crate) struct Reduction {
    pub(crate) carrier: Carrier,
    builtin: Option<Builtin>,
    user: Option<Arc<UserOp>>,
}

/// The names accepted for the built-in operators.
const NAMES: &str = "\"sum\", \"prod\", \"min\", \"max\" (spools.SUM, ...), a callable \
                     f(a, b) -> array or spools.Op(f, commute=...)";

impl Reduction {
    /// The reduction of `a` (the operand) with `op` (a name, a callable or an `Op`).
    ///
    /// # Errors
    /// `TypeError` for an operator of another kind, or a built-in one on a dtype it does
    /// not reduce (records, strings; complex numbers other than by "sum");
    /// `ValueError` for an unknown name.
    pub(crate) fn new(
        py: Python<'_>,
        a: &View,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Reduction> {
        let Some(op) = op else {
            return Self::builtin(a, Builtin::Sum);
        };
        if let Ok(s) = op.cast::<PyString>() {
            let name = s.to_cow()?;
            let b = match name.as_ref() {
                "sum" | "SUM" => Builtin::Sum,
                "prod" | "PROD" => Builtin::Prod,
                "min" | "MIN" => Builtin::Min,
                "max" | "MAX" => Builtin::Max,
                _ => {
                    return Err(errors::value_error(format!(
                        "op must be one of {NAMES}; got {name:?}"
                    )))
                }
            };
            return Self::builtin(a, b);
        }
        let (func, commute) = match op.cast::<Op>() {
            Ok(o) => (o.get().func.clone_ref(py), o.get().commute),
            Err(_) if op.is_callable() => (op.clone().unbind(), false),
            Err(_) => {
                return Err(errors::type_error(format!(
                    "op must be one of {NAMES}; got {}",
                    buffer::type_name(op)
                )))
            }
        };
        // Items of a size no runtime element has (complex128, records) go as bytes, in
        // rank order on whole arrays (so that no item is ever cut).
        let (carrier, commute) = match Carrier::unsigned(a.itemsize) {
            Some(c) => (c, commute),
            None => (Carrier::for_bytes(1), false),
        };
        crate::runtime::note_python_in_progress();
        let dtype = a.array(py).dtype().unbind();
        Ok(Reduction {
            carrier,
            builtin: None,
            user: Some(Arc::new(UserOp {
                func,
                commute,
                dtype,
                shape: a.shape.clone(),
                itemsize: a.itemsize,
                error: Mutex::new(None),
                spoiled_by: Mutex::new(None),
            })),
        })
    }

    fn builtin(a: &View, b: Builtin) -> PyResult<Reduction> {
        let d = match a.dtype {
            Dtype::Bool => {
                // Logical or and and, as numpy's sum and product of booleans are.
                let b = match b {
                    Builtin::Sum | Builtin::Max => Builtin::Max,
                    Builtin::Prod | Builtin::Min => Builtin::Min,
                };
                return Ok(Reduction {
                    carrier: Carrier::for_bytes(1),
                    builtin: Some(b),
                    user: None,
                });
            }
            // A complex sum is the sum of the real parts and of the imaginary parts.
            Dtype::Num(DType::C64) if b == Builtin::Sum => DType::F32,
            Dtype::Num(DType::C128) if b == Builtin::Sum => DType::F64,
            Dtype::Num(d) => d,
            Dtype::Other => {
                return Err(errors::type_error(
                    "built-in reductions need a numeric dtype (bool, int8 to uint64, \
                     float32, float64; complex for \"sum\"); got an array of another dtype \
                     (records, strings or non-native byte order): give a callable op",
                ))
            }
        };
        // Complex numbers are the numeric dtypes no Rust element carries.
        let Some(carrier) = Carrier::of(d) else {
            return Err(errors::type_error(format!(
                "op {:?} does not apply to complex numbers (only \"sum\" or a \
                 callable does); got an array of dtype {d}",
                format!("{b:?}").to_ascii_lowercase(),
            )));
        };
        Ok(Reduction {
            carrier,
            builtin: Some(b),
            user: None,
        })
    }

    /// The runtime operator on `T` (the carrier's type).
    pub(crate) fn op<T: Element>(&self) -> spools::Op<T> {
        match (&self.user, self.builtin) {
            (Some(u), _) => {
                let f = u.clone();
                let commute = u.commute;
                spools::Op::user_slice(
                    move |acc: &mut [T], other: &[T], lower| {
                        f.combine(spools::as_bytes_mut(acc), spools::as_bytes(other), lower)
                    },
                    commute,
                )
                // Non-blocking calls end with an agreement on whether it raised anywhere.
                .with_verdict(u.clone())
            }
            (None, Some(Builtin::Prod)) => spools::Op::Prod,
            (None, Some(Builtin::Min)) => spools::Op::Min,
            (None, Some(Builtin::Max)) => spools::Op::Max,
            (None, _) => spools::Op::Sum,
        }
    }

    /// The Python function, if the operator is one (its kept exception is raised at the
    /// end of the call).
    pub(crate) fn user(&self) -> Option<Arc<UserOp>> {
        self.user.clone()
    }

    /// The outcome of a blocking call: with a Python function, every rank then learns
    /// (a one-byte allgather) whether any rank's function raised, so that no rank keeps
    /// a result that a failed combination spoiled: the raising rank raises its own
    /// exception, the others a `SpoolsError` naming it.
    ///
    /// # Errors
    /// The function's exception, another rank's function's failure, or the collective's
    /// error.
    pub(crate) fn finish<R>(
        &self,
        py: Python<'_>,
        c: &spools::Communicator,
        r: PyResult<R>,
    ) -> PyResult<R> {
        let Some(u) = &self.user else {
            return r;
        };
        let mine = u.take_error();
        let r = match (mine, r) {
            // The collective failed here: the other ranks may be gone, no exchange.
            (Some(e), Err(_)) => return Err(e),
            (None, Err(e)) => return Err(e),
            (mine, Ok(v)) => (mine, v),
        };
        let flag = [u8::from(r.0.is_some())];
        let mut all = vec![0u8; c.size() as usize];
        crate::runtime::blocking(py, || c.allgather(&flag, &mut all))
            .map_err(super::shapes::coll_err)?;
        if let Some(e) = r.0 {
            return Err(e);
        }
        if let Some(rank) = all.iter().position(|&f| f != 0) {
            return Err(errors::raise(
                errors::Kind::Spools,
                format!(
                    "rank {rank}'s reduction function raised (that rank raises its \
                     exception): this rank's result is not valid"
                ),
            ));
        }
        Ok(r.1)
    }
}
