//! Reduction operators: the built-in ones, and user operators made of a C function.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError};

use spools::{Element, Op};

use crate::args::out;
use crate::dtype::spools_dtype_t;
use crate::status::{guard, spools_status_t, Failure};

/// A reduction operator: a built-in one (`SPOOLS_OP_*`) or one made by
/// `spools_op_create()`.
pub type spools_op_t = u32;

/// Sum (integers wrap around).
pub const SPOOLS_OP_SUM: spools_op_t = 1;
/// Product (integers wrap around).
pub const SPOOLS_OP_PROD: spools_op_t = 2;
/// Minimum.
pub const SPOOLS_OP_MIN: spools_op_t = 3;
/// Maximum.
pub const SPOOLS_OP_MAX: spools_op_t = 4;

/// A user operator (MPI_User_function's contract): combine `count` elements of type
/// `dtype`, `inout[i] = in[i] op inout[i]`, where `in` holds lower ranks' contributions
/// than `inout`. `ctx` is the pointer given to `spools_op_create()`. Called on the
/// thread that runs the collective; it must not call Spools.
pub type spools_user_fn = Option<
    unsafe extern "C" fn(
        in_: *const c_void,
        inout: *mut c_void,
        count: usize,
        dtype: spools_dtype_t,
        ctx: *mut c_void,
    ),
>;

#[derive(Clone, Copy)]
struct UserOp {
    f: unsafe extern "C" fn(*const c_void, *mut c_void, usize, spools_dtype_t, *mut c_void),
    ctx: *mut c_void,
    commutative: bool,
}

// SAFETY: the C caller's contract for `spools_op_create`: the function and its context
// may be used from any thread of the rank.
unsafe impl Send for UserOp {}
// SAFETY: as for `Send`.
unsafe impl Sync for UserOp {}

const FIRST_USER_OP: spools_op_t = 1024;

struct Registry {
    next: spools_op_t,
    ops: HashMap<spools_op_t, UserOp>,
}

static OPS: Mutex<Option<Registry>> = Mutex::new(None);

fn with_registry<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut g = OPS.lock().unwrap_or_else(PoisonError::into_inner);
    let r = g.get_or_insert_with(|| Registry {
        next: FIRST_USER_OP,
        ops: HashMap::new(),
    });
    f(r)
}

/// Makes a user operator of `func` and `ctx` (see `spools_user_fn`); `commutative` (1 or
/// 0) lets the runtime combine contributions in any order. Make it with the same
/// arguments on every rank before the collectives that use it.
///
/// Thread safety: any thread. `func` may be called from any thread of the rank with
/// `ctx`.
///
/// ```c
/// static void absmax(const void *in, void *inout, size_t n, spools_dtype_t dt, void *ctx) {
///     const double *a = in; double *b = inout;
///     for (size_t i = 0; i < n; i++) b[i] = fabs(a[i]) > fabs(b[i]) ? a[i] : b[i];
/// }
/// spools_op_t op;
/// spools_op_create(absmax, NULL, 1, &op);
/// spools_allreduce(comm, x, y, n, SPOOLS_DTYPE_F64, op);
/// spools_op_destroy(op);
/// ```
///
/// # Safety
/// `func` is NULL (an error) or a function of `spools_user_fn`'s contract; `op` is
/// writable.
#[no_mangle]
pub unsafe extern "C" fn spools_op_create(
    func: spools_user_fn,
    ctx: *mut c_void,
    commutative: i32,
    op: *mut spools_op_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let op = unsafe { out(op, "op") }?;
        let f = func.ok_or_else(|| Failure::arg("fn is NULL"))?;
        *op = with_registry(|r| {
            let id = r.next;
            r.next += 1;
            r.ops.insert(
                id,
                UserOp {
                    f,
                    ctx,
                    commutative: commutative != 0,
                },
            );
            id
        });
        Ok(())
    })
}

/// Forgets a user operator (collectives still running with it are not affected).
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` for a built-in or unknown operator.
#[no_mangle]
pub extern "C" fn spools_op_destroy(op: spools_op_t) -> spools_status_t {
    guard(|| match with_registry(|r| r.ops.remove(&op)) {
        Some(_) => Ok(()),
        None => Err(Failure::arg(format!("op {op} is not a user operator"))),
    })
}

/// The runtime's operator for `op` on elements `T` of dtype `dt`.
pub(crate) fn op_for<T: Element>(op: spools_op_t, dt: spools_dtype_t) -> Result<Op<T>, Failure> {
    match op {
        SPOOLS_OP_SUM => Ok(Op::Sum),
        SPOOLS_OP_PROD => Ok(Op::Prod),
        SPOOLS_OP_MIN => Ok(Op::Min),
        SPOOLS_OP_MAX => Ok(Op::Max),
        _ => {
            let u = with_registry(|r| r.ops.get(&op).copied()).ok_or_else(|| {
                Failure::arg(format!(
                    "op {op} is neither a built-in operator (SPOOLS_OP_SUM = 1 to \
                     SPOOLS_OP_MAX = 4) nor a live user operator"
                ))
            })?;
            let commutative = u.commutative;
            let u = Arc::new(u);
            Ok(Op::user_slice(
                move |acc: &mut [T], other: &[T], acc_is_lower: bool| {
                    if acc_is_lower {
                        // acc = acc op other: `in` is acc, `inout` a copy of other.
                        let mut tmp = other.to_vec();
                        // SAFETY: both hold `acc.len()` elements of `dt` (`T`); the
                        // function's contract is the caller's of `spools_op_create`.
                        unsafe {
                            (u.f)(
                                acc.as_ptr().cast(),
                                tmp.as_mut_ptr().cast(),
                                acc.len(),
                                dt,
                                u.ctx,
                            );
                        }
                        acc.copy_from_slice(&tmp);
                    } else {
                        // SAFETY: as above; `in` is other, `inout` acc.
                        unsafe {
                            (u.f)(
                                other.as_ptr().cast(),
                                acc.as_mut_ptr().cast(),
                                acc.len(),
                                dt,
                                u.ctx,
                            );
                        }
                    }
                },
                commutative,
            ))
        }
    }
}
