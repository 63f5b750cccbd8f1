//! Reduction operators: the predefined ones on the types MPI defines them for (run by
//! Spools' typed reductions), MINLOC and MAXLOC on the pair types, and user functions
//! (`MPI_Op_create`), applied in rank order when not commutative.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use spools::{Communicator, Element, Op};

use crate::abi::*;
use crate::coll::segment::{agree, SEGMENT};
use crate::datatype::runs::Way;
use crate::datatype::{Basic, Held, TypeObj};
use crate::env::errhandler::on_self;
use crate::env::error::MpiError;
use crate::handles::{Kind, Table};
use crate::out::out;

/// `MPI_User_function`: `f(invec, inoutvec, len, datatype)`, `inoutvec = invec op
/// inoutvec`.
type UserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut MPI_Datatype);

/// `MPI_User_function_c`: as [`UserFn`] with an `MPI_Count` length.
type UserFnC = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut MPI_Count, *mut MPI_Datatype);

/// A user operator's function, of either length type.
#[derive(Clone, Copy)]
enum UserFunc {
    Int(UserFn),
    Large(UserFnC),
}

/// A user operator.
pub(crate) struct UserOp {
    f: UserFunc,
    commute: bool,
}

static OPS: Table<UserOp> = Table::new(Kind::Op);

/// Which ranks get the result of a reduction.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Which {
    /// Every rank (allreduce).
    All,
    /// The root only (reduce).
    Root(u32),
    /// Rank i gets the reduction of ranks 0..=i (scan).
    Scan,
    /// Rank i > 0 gets the reduction of ranks 0..i (exclusive scan).
    Exscan,
}

impl Which {
    /// Whether rank `me` gets a result.
    pub(crate) fn gets(self, me: u32) -> bool {
        match self {
            Which::Root(r) => me == r,
            Which::Exscan => me > 0,
            Which::All | Which::Scan => true,
        }
    }
}

/// A byte-wise combining function: `f(in, inout)`, `inout = in op inout`.
/// `f(in, inout, n)` on `n` elements; for the datatype's own layout the buffers start at
/// the lowest byte of the elements (see [`Reducer`]).
type Combine = Arc<dyn Fn(&[u8], &mut [u8], usize) + Send + Sync>;

/// How a reduction runs.
enum Plan {
    /// A predefined operator on a primitive type: Spools' typed reduction, on packed
    /// elements.
    Typed(Basic, MPI_Op),
    /// Combined byte-wise in rank order, on buffers laid out as the datatype is
    /// (extent by extent): MINLOC/MAXLOC and long double / complex arithmetic, whose
    /// types are laid out alike in every process.
    Bytes(Combine),
    /// Combined in rank order on packed elements, each rank's laid out as its own
    /// datatype says only for the user function's call: user functions, whose datatypes
    /// may place the elements differently in each process (absolute addresses on
    /// `MPI_BOTTOM`, structs of the same signature).
    Packed(Combine),
}

fn plan(op: MPI_Op, dt: MPI_Datatype, t: &impl Held) -> Result<Plan, MpiError> {
    let bad = |what: &str| {
        MpiError::invalid(
            MPI_ERR_OP,
            format!("reduction operator {op:#x} is not defined for datatype {dt:#x} ({what})"),
        )
    };
    match op {
        MPI_SUM | MPI_PROD | MPI_MIN | MPI_MAX => match t.basic {
            Some(b @ (Basic::LongDouble | Basic::Complex)) => {
                let kind = if b == Basic::LongDouble { 'g' } else { 'c' };
                let f = crate::special::combine(op, kind, t.basic_size)
                    .ok_or_else(|| bad("MIN and MAX are not defined on complex numbers"))?;
                Ok(Plan::Bytes(Arc::new(
                    move |inv: &[u8], io: &mut [u8], _n: usize| f(op, inv, io),
                )))
            }
            Some(b) if b != Basic::Opaque && b != Basic::Bool => Ok(Plan::Typed(b, op)),
            _ => Err(bad("not a real, complex or integer type")),
        },
        // MPI defines the bitwise operators on bytes too.
        MPI_BAND | MPI_BOR | MPI_BXOR if t.named == Some(MPI_BYTE) => {
            Ok(Plan::Typed(Basic::U8, op))
        }
        MPI_BAND | MPI_BOR | MPI_BXOR | MPI_LAND | MPI_LOR | MPI_LXOR => match t.basic {
            Some(b)
                if !matches!(
                    b,
                    Basic::F32 | Basic::F64 | Basic::Opaque | Basic::LongDouble | Basic::Complex
                ) =>
            {
                Ok(Plan::Typed(b, op))
            }
            _ => Err(bad("not an integer or logical type")),
        },
        MPI_MINLOC | MPI_MAXLOC => {
            let pair = pair_of(t).ok_or_else(|| bad("MINLOC and MAXLOC take the pair types"))?;
            let cmp = PairCmp::of(pair, op == MPI_MINLOC);
            // Where the pairs of one element are, from its first byte: a pair type's one
            // at 0; a type made of pairs (a vector of them, a struct of one pair type),
            // every other basic element of its type map.
            let at: Vec<isize> = if t.named.is_some() {
                vec![0]
            } else {
                let all = crate::datatype::external::offsets(t)?;
                all.iter().step_by(2).copied().collect()
            };
            let ext = t.extent;
            let t = t.arc();
            Ok(Plan::Bytes(Arc::new(
                move |inv: &[u8], io: &mut [u8], n: usize| {
                    // The buffers start at the elements' lowest byte (a negative extent
                    // puts the last element first).
                    let lo = span(&t, n).0;
                    for i in 0..n as isize {
                        for &o in &at {
                            let Ok(from) = usize::try_from(i * ext + o - lo) else {
                                continue;
                            };
                            let to = from + cmp.need;
                            let (Some(a), Some(b)) = (inv.get(from..to), io.get_mut(from..to))
                            else {
                                continue;
                            };
                            cmp.combine(a, b);
                        }
                    }
                },
            )))
        }
        h => {
            let u = OPS.get(h).ok_or(MpiError::Handle {
                class: MPI_ERR_OP,
                what: "operator",
                handle: h,
            })?;
            // The contributions are packed elements. The function gets buffers laid out
            // as this process's datatype says, from their base, where an element's
            // offsets count from: a contiguous type's packed bytes are that already;
            // others are unpacked into buffers that start at the elements' lowest byte
            // (`span`), whose base is `-lo` bytes in (outside the buffers when the offsets
            // are absolute addresses, `MPI_BOTTOM`, which bring the function back into
            // them), and the result packed again.
            let t = t.arc();
            Ok(Plan::Packed(Arc::new(
                move |inv: &[u8], io: &mut [u8], n: usize| {
                    let bytes = n.saturating_mul(t.size);
                    if n == 0 || bytes == 0 || io.len() < bytes || inv.len() < bytes {
                        return;
                    }
                    let mut d = dt;
                    let call = |a: *mut c_void, b: *mut c_void, d: &mut MPI_Datatype| {
                        // SAFETY: the user function of the standard's type, on `n`
                        // elements of `dt` laid out as the type says from the base of
                        // both buffers.
                        unsafe {
                            match u.f {
                                UserFunc::Int(f) => f(a, b, &mut (n as c_int), d),
                                UserFunc::Large(f) => f(a, b, &mut (n as MPI_Count), d),
                            }
                        }
                    };
                    if t.contiguous() {
                        let a = inv.as_ptr().cast_mut().cast::<c_void>();
                        call(a, io.as_mut_ptr().cast(), &mut d);
                        return;
                    }
                    let (lo, len) = span(&t, n);
                    let (mut a, mut b) = (vec![0u8; len], vec![0u8; len]);
                    let (pa, pb) = (
                        a.as_mut_ptr().wrapping_offset(-lo),
                        b.as_mut_ptr().wrapping_offset(-lo),
                    );
                    // SAFETY: `n` elements of `t` laid out from base `pa` (`pb`) lie in
                    // `a` (`b`), `span`'s bytes; `inv` and `io` hold `n` packed elements.
                    let packed = unsafe {
                        crate::datatype::unpack(&inv[..bytes], pa, &t);
                        crate::datatype::unpack(&io[..bytes], pb, &t);
                        call(pa.cast(), pb.cast(), &mut d);
                        crate::datatype::pack(pb, n, &t)
                    };
                    io[..bytes].copy_from_slice(&packed[..bytes]);
                },
            )))
        }
    }
}

/// The elements of `T` in `bytes` (a copy, aligned).
pub(crate) fn cast<T: Element>(bytes: &[u8]) -> Vec<T> {
    let n = bytes.len() / std::mem::size_of::<T>();
    let mut v = vec![T::default(); n];
    spools::as_bytes_mut(&mut v).copy_from_slice(&bytes[..n * std::mem::size_of::<T>()]);
    v
}

/// Where a typed reduction's elements are.
#[derive(Clone, Copy)]
enum Src<'a> {
    /// Packed bytes (a copy); the result comes back as bytes.
    Packed(&'a [u8]),
    /// The program's own buffers, used in place: `send` and (where this rank gets the
    /// result) `recv` hold `bytes` bytes, aligned for the element type and disjoint.
    Direct {
        send: *const u8,
        recv: *mut u8,
        bytes: usize,
    },
}

fn run<T: Element>(
    c: &Communicator,
    src: Src<'_>,
    op: &Op<T>,
    which: Which,
) -> Result<Vec<u8>, MpiError> {
    let input = match src {
        Src::Packed(b) => b,
        Src::Direct { send, recv, bytes } => {
            let n = bytes / std::mem::size_of::<T>();
            // SAFETY: `Src::Direct`'s contract: `n` aligned elements.
            let s = unsafe { std::slice::from_raw_parts(send.cast::<T>(), n) };
            // An exclusive scan's rank 0 gets nothing, yet passes a buffer as long.
            let mut scratch = Vec::new();
            let r: &mut [T] = if which.gets(c.rank()) {
                // SAFETY: as above, and disjoint from `s`.
                unsafe { std::slice::from_raw_parts_mut(recv.cast::<T>(), n) }
            } else if matches!(which, Which::Exscan) {
                scratch.resize(n, T::default());
                &mut scratch
            } else {
                &mut []
            };
            match which {
                Which::All => c.allreduce(s, r, op)?,
                Which::Scan => c.scan(s, r, op)?,
                Which::Exscan => c.exscan(s, r, op)?,
                Which::Root(root) => c.reduce(s, r, op, root)?,
            }
            return Ok(Vec::new());
        }
    };
    let send: Vec<T> = cast(input);
    let mut recv = vec![T::default(); send.len()];
    match which {
        Which::All => c.allreduce(&send, &mut recv, op)?,
        Which::Scan => c.scan(&send, &mut recv, op)?,
        Which::Exscan => c.exscan(&send, &mut recv, op)?,
        Which::Root(r) => {
            if c.rank() == r {
                c.reduce(&send, &mut recv, op, r)?;
            } else {
                c.reduce(&send, &mut [], op, r)?;
            }
        }
    }
    Ok(spools::as_bytes(&recv).to_vec())
}

/// What runs with Spools' typed operator for a predefined one ([`with_op`]): a reduction,
/// blocking or not, or a combining function.
pub(crate) trait WithOp {
    /// What it gives.
    type Out;
    /// Runs with `op` on elements of `T`.
    ///
    /// # Errors
    /// Those of what it runs.
    fn with<T: Element>(self, op: Op<T>) -> Result<Self::Out, MpiError>;
}

/// Calls `w` with Spools' operator for the predefined `op` on elements of `b` (as
/// [`plan`] found them: `Plan::Typed`).
///
/// # Errors
/// `MPI_ERR_OP` for a type without typed arithmetic, and `w`'s own.
pub(crate) fn with_op<W: WithOp>(b: Basic, op: MPI_Op, w: W) -> Result<W::Out, MpiError> {
    // The bitwise and logical operators: one slice operator per operator and type, its
    // loop vectorised (`zip_with`), where a function per element was one indirect call
    // per element.
    macro_rules! slice {
        ($t:ty, $f:expr) => {
            Op::<$t>::user_slice(|acc, other, _| spools::zip_with(acc, other, $f), true)
        };
    }
    macro_rules! ints {
        ($t:ty) => {{
            let o: Op<$t> = match op {
                MPI_SUM => Op::Sum,
                MPI_PROD => Op::Prod,
                MPI_MIN => Op::Min,
                MPI_MAX => Op::Max,
                MPI_BAND => slice!($t, |a, b| a & b),
                MPI_BOR => slice!($t, |a, b| a | b),
                MPI_BXOR => slice!($t, |a, b| a ^ b),
                MPI_LAND => slice!($t, |a, b| <$t>::from(a != 0 && b != 0)),
                MPI_LOR => slice!($t, |a, b| <$t>::from(a != 0 || b != 0)),
                _ => slice!($t, |a, b| <$t>::from((a != 0) != (b != 0))),
            };
            w.with(o)
        }};
    }
    fn floats<T: Element, W: WithOp>(op: MPI_Op, w: W) -> Result<W::Out, MpiError> {
        w.with::<T>(match op {
            MPI_SUM => Op::Sum,
            MPI_PROD => Op::Prod,
            MPI_MIN => Op::Min,
            _ => Op::Max,
        })
    }
    match b {
        Basic::I8 => ints!(i8),
        Basic::U8 | Basic::Bool => ints!(u8),
        Basic::I16 => ints!(i16),
        Basic::U16 => ints!(u16),
        Basic::I32 => ints!(i32),
        Basic::U32 => ints!(u32),
        Basic::I64 => ints!(i64),
        Basic::U64 => ints!(u64),
        Basic::F32 => floats::<f32, W>(op, w),
        Basic::F64 => floats::<f64, W>(op, w),
        Basic::Opaque | Basic::LongDouble | Basic::Complex => Err(MpiError::invalid(
            MPI_ERR_OP,
            "no typed arithmetic on this datatype",
        )),
    }
}

/// A blocking typed reduction of `input` (packed elements for predefined operators,
/// the datatype's own layout otherwise: see [`reduce`]); it gives the result bytes where
/// `which` says this rank gets them.
struct Blocking<'a> {
    c: &'a Communicator,
    input: Src<'a>,
    which: Which,
}

impl WithOp for Blocking<'_> {
    type Out = Vec<u8>;
    fn with<T: Element>(self, op: Op<T>) -> Result<Vec<u8>, MpiError> {
        run(self.c, self.input, &op, self.which)
    }
}

/// A blocking typed reduction of `bytes` packed bytes of non-contiguous `t` elements at
/// `send` into `recv` (where `which` says this rank gets the result; the same buffer in
/// place), in segments of [`SEGMENT`] bytes: each is packed, reduced and unpacked
/// while it is in the caches, through two scratch buffers of one segment (a whole
/// message went through four fresh buffers of its size and three more copies).
struct Segmented<'a, H: Held> {
    c: &'a Communicator,
    send: *const u8,
    recv: *mut u8,
    t: &'a H,
    bytes: usize,
    which: Which,
}

impl<H: Held> WithOp for Segmented<'_, H> {
    type Out = ();
    fn with<T: Element>(self, op: Op<T>) -> Result<(), MpiError> {
        let Segmented {
            c,
            send,
            recv,
            t,
            bytes,
            which,
        } = self;
        let size = std::mem::size_of::<T>();
        // A segment holds whole elements (its length is a multiple of every basic size).
        let per = SEGMENT.min(bytes) / size;
        let (mut input, mut output) = (vec![T::default(); per], vec![T::default(); per]);
        let gets = which.gets(c.rank());
        let mut off = 0;
        while off < bytes {
            let k = (bytes - off).min(per * size) / size;
            let (inp, out) = (&mut input[..k], &mut output[..k]);
            let pack = spools::as_bytes_mut(inp).as_mut_ptr();
            // SAFETY: bytes `off..off + k * size` of the data lie at `send` (the
            // caller's contract); `inp` holds them, apart from it.
            unsafe { t.copy_at(Way::Pack, send.cast_mut(), off, pack, k * size) };
            match which {
                Which::All => c.allreduce(inp, out, &op)?,
                Which::Scan => c.scan(inp, out, &op)?,
                Which::Exscan => c.exscan(inp, out, &op)?,
                Which::Root(r) if gets => c.reduce(inp, out, &op, r)?,
                Which::Root(r) => c.reduce(inp, &mut [], &op, r)?,
            }
            if gets {
                let result = spools::as_bytes_mut(out).as_mut_ptr();
                // SAFETY: as above, for `recv`, which holds the elements where this
                // rank gets the result (the caller's contract).
                unsafe { t.copy_at(Way::Unpack, recv, off, result, k * size) };
            }
            off += k * size;
        }
        Ok(())
    }
}

/// The combining function of a typed operator.
struct ToCombine;

impl WithOp for ToCombine {
    type Out = Combine;
    fn with<T: Element>(self, op: Op<T>) -> Result<Combine, MpiError> {
        Ok(typed_combine(op))
    }
}

/// How a reduction runs on Spools' non-blocking collectives.
pub(crate) enum Engine {
    /// A predefined operator on a primitive type: Spools' typed reduction.
    Typed(Basic, MPI_Op),
    /// Combined byte-wise in rank order by the reduction's [`Reducer`] ([`slice_op`]):
    /// MINLOC/MAXLOC and long double / complex arithmetic.
    Bytes,
    /// A user function, which those collectives could call from the progress thread:
    /// the caller folds the contributions itself, on its own thread.
    User,
}

/// How a reduction of `dt` with `op` runs on Spools' non-blocking collectives.
///
/// # Errors
/// `MPI_ERR_OP` for an operator not defined on the type, or an unknown one.
pub(crate) fn engine(op: MPI_Op, dt: MPI_Datatype, t: &Arc<TypeObj>) -> Result<Engine, MpiError> {
    Ok(match plan(op, dt, t)? {
        Plan::Typed(b, op) => Engine::Typed(b, op),
        Plan::Bytes(_) => Engine::Bytes,
        Plan::Packed(_) => Engine::User,
    })
}

/// Spools' operator on the bytes of `red`'s contributions, combined in rank order by
/// its function: not commutative, so never split into blocks, but for a reduce-scatter's
/// blocks (of packed elements only: each call counts the elements its bytes hold).
pub(crate) fn slice_op(red: &Reducer) -> Op<u8> {
    let (g, n, packed, esize) = (red.f.clone(), red.n, red.packed, red.t.size);
    let count = move |len: usize| if packed && esize > 0 { len / esize } else { n };
    Op::<u8>::user_slice(
        move |acc: &mut [u8], other: &[u8], acc_is_lower: bool| {
            if acc_is_lower {
                let mut io = other.to_vec();
                g(acc, &mut io, count(acc.len()));
                acc.copy_from_slice(&io);
            } else {
                g(other, acc, count(acc.len()));
            }
        },
        false,
    )
}

/// Whether a typed reduction may use the program's buffers in place: the input at
/// `send` (`send_bytes`) and, where this rank gets a result, the output `recv` (its
/// address and bytes) are neither empty nor NULL (no slice is made of a NULL pointer),
/// of a contiguous type `t`, aligned for its elements, and disjoint.
pub(crate) fn direct(
    t: &TypeObj,
    (send, send_bytes): (usize, usize),
    recv: Option<(usize, usize)>,
) -> bool {
    let aligned = |p: usize| p % t.basic_size.max(1) == 0;
    let usable = |(p, n): (usize, usize)| p != 0 && n > 0 && aligned(p);
    usable((send, send_bytes))
        && t.contiguous()
        && recv.is_none_or(|(r, rb)| usable((r, rb)) && (send + send_bytes <= r || r + rb <= send))
}

/// Reduces `n` elements of `t` from `send` (the program's buffer) with `op`; the ranks
/// `which` names get the result in `recv`.
///
/// # Safety
/// `send` holds `n` elements of `t`; `recv` too on the ranks that get the result.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn reduce(
    c: &Communicator,
    send: *const u8,
    recv: *mut u8,
    n: usize,
    t: &impl Held,
    dt: MPI_Datatype,
    op: MPI_Op,
    which: Which,
) -> Result<(), MpiError> {
    let gets = which.gets(c.rank());
    let (f, packed) = match plan(op, dt, t)? {
        Plan::Typed(b, op) => {
            let bytes = n * t.size;
            // The program's buffers in place when they can be: no copies, and the same
            // buffers call after call, which Spools' large-message paths reuse.
            let out = gets.then_some((recv as usize, bytes));
            if direct(t, (send as usize, bytes), out) {
                let input = Src::Direct { send, recv, bytes };
                with_op(b, op, Blocking { c, input, which })?;
                return Ok(());
            }
            if !t.contiguous() && bytes > 0 {
                // Every rank passes the same datatype (the standard's rule for
                // reductions), so every rank makes this choice alike, at any length. In
                // more than one segment the ranks first agree on the length, so that an
                // erroneous program fails alike on every rank instead of making more
                // collectives on some (a rank that passed a contiguous type of the same
                // signature meets the agreement with its reduction and fails too).
                if bytes > SEGMENT {
                    agree(c, "reduction", bytes, true)?;
                }
                let seg = Segmented {
                    c,
                    send,
                    recv,
                    t,
                    bytes,
                    which,
                };
                return with_op(b, op, seg);
            }
            // SAFETY: the caller's contract.
            let input = unsafe { crate::p2p::data(send.cast(), n, t) };
            let src = Src::Packed(&input);
            let out = with_op(
                b,
                op,
                Blocking {
                    c,
                    input: src,
                    which,
                },
            )?;
            if gets && !out.is_empty() {
                // SAFETY: `recv` holds `n` elements of `t` here (the caller's contract).
                unsafe { crate::datatype::unpack(&out, recv, t) };
            }
            return Ok(());
        }
        Plan::Bytes(f) => (f, false),
        Plan::Packed(f) => (f, true),
    };
    let red = Reducer::bytes(f, t, n, packed);
    // SAFETY: the caller's contract.
    let input = unsafe { red.input(send) };
    let op = slice_op(&red);
    let out = run::<u8>(c, Src::Packed(&input), &op, which)?;
    if gets {
        // Only the datatype's own bytes go to `recv` (not the gaps between).
        // SAFETY: `recv` holds `n` elements (the caller's contract).
        unsafe { red.output(&out, recv) };
    }
    Ok(())
}

/// `MPI_Op_create`: a user operator (`commute` nonzero: commutative).
#[no_mangle]
pub unsafe extern "C" fn MPI_Op_create(
    user_fn: *const c_void,
    commute: c_int,
    op: *mut MPI_Op,
) -> c_int {
    let r = (|| {
        if user_fn.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Op_create: NULL function",
            ));
        }
        // SAFETY: a C function of the standard's type (the caller's contract).
        let f: UserFn = unsafe { std::mem::transmute(user_fn) };
        let h = OPS
            .insert(UserOp {
                f: UserFunc::Int(f),
                commute: commute != 0,
            })
            .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many operators"))?;
        // SAFETY: the caller's contract.
        unsafe { out(op, h, "MPI_Op_create") }
    })();
    on_self(r)
}

/// Whether `h` is one of the standard's operators (all commutative; none can be freed).
fn predefined_op(h: MPI_Op) -> bool {
    matches!(
        h,
        MPI_SUM
            | MPI_PROD
            | MPI_MIN
            | MPI_MAX
            | MPI_BAND
            | MPI_BOR
            | MPI_BXOR
            | MPI_LAND
            | MPI_LOR
            | MPI_LXOR
            | MPI_MINLOC
            | MPI_MAXLOC
            | MPI_REPLACE
            | MPI_NO_OP
    )
}

/// `MPI_Op_free`: frees a user operator (predefined ones cannot be freed).
#[no_mangle]
pub unsafe extern "C" fn MPI_Op_free(op: *mut MPI_Op) -> c_int {
    let r = (|| {
        if op.is_null() {
            return Err(MpiError::invalid(MPI_ERR_ARG, "MPI_Op_free: NULL"));
        }
        // SAFETY: non-NULL (the caller's contract).
        let h = unsafe { *op };
        if predefined_op(h) {
            return Err(MpiError::invalid(
                MPI_ERR_OP,
                "MPI_Op_free: a predefined operator cannot be freed",
            ));
        }
        OPS.remove(h).ok_or(MpiError::Handle {
            class: MPI_ERR_OP,
            what: "operator",
            handle: h,
        })?;
        // SAFETY: as above.
        unsafe { *op = MPI_OP_NULL };
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Op_commutative`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Op_commutative(op: MPI_Op, commute: *mut c_int) -> c_int {
    let r = (|| {
        let c = match op {
            h if predefined_op(h) => true,
            h => {
                OPS.get(h)
                    .ok_or(MpiError::Handle {
                        class: MPI_ERR_OP,
                        what: "operator",
                        handle: h,
                    })?
                    .commute
            }
        };
        // SAFETY: the caller's contract.
        unsafe { out(commute, c_int::from(c), "MPI_Op_commutative") }
    })();
    on_self(r)
}

/// A reduction done by this layer itself (non-blocking and persistent reductions,
/// exscan, reduce-scatter): contributions travel whole and are combined locally, in
/// rank order, by [`Reducer::combine`].
pub(crate) struct Reducer {
    f: Combine,
    /// Contributions are packed elements (predefined operators) or laid out as the
    /// datatype (user functions, MINLOC/MAXLOC).
    packed: bool,
    t: Arc<TypeObj>,
    n: usize,
}

/// The pair type a type is made of: a pair type itself, or a derived type all of whose
/// parts are made of one pair type (`MINLOC` and `MAXLOC` take those).
fn pair_of(t: &TypeObj) -> Option<MPI_Datatype> {
    match t.named {
        Some(
            h @ (MPI_FLOAT_INT
            | MPI_2REAL
            | MPI_DOUBLE_INT
            | MPI_2DOUBLE_PRECISION
            | MPI_LONG_INT
            | MPI_2INT
            | MPI_2INTEGER
            | MPI_SHORT_INT
            | MPI_LONG_DOUBLE_INT),
        ) => Some(h),
        Some(_) => None,
        None => {
            let mut parts = t.envelope.keep.iter().map(|k| pair_of(k));
            let first = parts.next()??;
            parts.all(|p| p == Some(first)).then_some(first)
        }
    }
}

/// How `MINLOC` or `MAXLOC` compares two pairs of one pair type.
#[derive(Clone, Copy)]
struct PairCmp {
    min: bool,
    /// The value's size, and whether it is a floating-point one.
    vsize: usize,
    float: bool,
    /// The index's offset and size.
    ioff: usize,
    isize_: usize,
    /// Bytes of a pair's data (its padding after the index excluded).
    need: usize,
}

impl PairCmp {
    fn of(pair: MPI_Datatype, min: bool) -> PairCmp {
        let (vsize, ioff, float) = match pair {
            MPI_FLOAT_INT | MPI_2REAL => (4, 4, true),
            MPI_DOUBLE_INT | MPI_2DOUBLE_PRECISION => (8, 8, true),
            MPI_LONG_INT => (8, 8, false),
            MPI_SHORT_INT => (2, 4, false),
            MPI_LONG_DOUBLE_INT => (16, 16, true),
            _ => (4, 4, false),
        };
        let isize_ = if pair == MPI_2DOUBLE_PRECISION { 8 } else { 4 };
        PairCmp {
            min,
            vsize,
            float,
            ioff,
            isize_,
            need: ioff + isize_,
        }
    }

    /// `b = a op b` for one pair (`need` bytes each): values compared in their own type
    /// (64-bit integers exactly), the lower index on a tie.
    fn combine(&self, a: &[u8], b: &mut [u8]) {
        let b4 = |v: &[u8]| -> [u8; 4] { v[..4].try_into().unwrap_or_default() };
        let b8 = |v: &[u8]| -> [u8; 8] { v[..8].try_into().unwrap_or_default() };
        let b2 = |v: &[u8]| -> [u8; 2] { v[..2].try_into().unwrap_or_default() };
        let ord = match (self.vsize, self.float) {
            (16, _) => crate::special::f80_cmp(a, b),
            (4, true) => f32::from_ne_bytes(b4(a)).partial_cmp(&f32::from_ne_bytes(b4(b))),
            (8, true) => f64::from_ne_bytes(b8(a)).partial_cmp(&f64::from_ne_bytes(b8(b))),
            (8, false) => Some(i64::from_ne_bytes(b8(a)).cmp(&i64::from_ne_bytes(b8(b)))),
            (4, false) => Some(i32::from_ne_bytes(b4(a)).cmp(&i32::from_ne_bytes(b4(b)))),
            _ => Some(i16::from_ne_bytes(b2(a)).cmp(&i16::from_ne_bytes(b2(b)))),
        };
        let idx = |x: &[u8]| -> f64 {
            let i = &x[self.ioff..];
            if self.isize_ == 8 {
                f64::from_ne_bytes(b8(i))
            } else {
                f64::from(i32::from_ne_bytes(b4(i)))
            }
        };
        let take_a = match ord {
            Some(std::cmp::Ordering::Equal) => idx(a) < idx(b),
            Some(std::cmp::Ordering::Less) => self.min,
            Some(std::cmp::Ordering::Greater) => !self.min,
            None => false,
        };
        if take_a {
            b.copy_from_slice(a);
        }
    }
}

/// Where the bytes of `n` elements of `t` lie, from the buffer's address: (first,
/// length), from the lowest byte of the elements' data to past the highest. Nothing
/// outside the data is in it: not address 0 for a type of absolute addresses on
/// `MPI_BOTTOM`, whose first byte is its true lower bound.
pub(crate) fn span(t: &TypeObj, n: usize) -> (isize, usize) {
    if n == 0 || t.size == 0 {
        return (0, 0);
    }
    let step = (n as isize - 1).saturating_mul(t.extent);
    let lo = t.true_lb.saturating_add(step.min(0));
    let hi = t
        .true_lb
        .saturating_add(t.true_extent)
        .saturating_add(step.max(0));
    (lo, hi.saturating_sub(lo).max(0) as usize)
}

fn typed_combine<T: Element>(op: Op<T>) -> Combine {
    Arc::new(move |inv: &[u8], io: &mut [u8], _n: usize| {
        let (size, align) = (std::mem::size_of::<T>(), std::mem::align_of::<T>());
        if inv.len() == io.len()
            && inv.len() % size == 0
            && inv.as_ptr() as usize % align == 0
            && io.as_ptr() as usize % align == 0
        {
            // In place: no copies of megabytes.
            // SAFETY: both buffers are aligned for `T` and hold whole elements; every bit
            // pattern is a valid `Element` (plain numbers); `inv` and `io` are distinct
            // borrows, so they do not overlap.
            let (a, b) = unsafe {
                (
                    std::slice::from_raw_parts(inv.as_ptr().cast::<T>(), inv.len() / size),
                    std::slice::from_raw_parts_mut(io.as_mut_ptr().cast::<T>(), io.len() / size),
                )
            };
            op.combine(b, a, false);
            return;
        }
        let a: Vec<T> = cast(inv);
        let mut b: Vec<T> = cast(io);
        op.combine(&mut b, &a, false);
        io.copy_from_slice(spools::as_bytes(&b));
    })
}

impl Reducer {
    /// The reducer of `n` elements of `t` with `op`.
    ///
    /// # Errors
    /// `MPI_ERR_OP` for an operator not defined on the type.
    pub(crate) fn new(
        op: MPI_Op,
        dt: MPI_Datatype,
        t: &Arc<TypeObj>,
        n: usize,
    ) -> Result<Reducer, MpiError> {
        let (f, packed) = match plan(op, dt, t)? {
            Plan::Typed(b, op) => (with_op(b, op, ToCombine)?, true),
            Plan::Bytes(f) => (f, false),
            Plan::Packed(f) => (f, true),
        };
        Ok(Reducer {
            f,
            packed,
            t: t.clone(),
            n,
        })
    }

    /// A reduction of `n` elements of `t` with `f`, on packed elements or (not `packed`)
    /// in their own layout.
    fn bytes(f: Combine, t: &impl Held, n: usize, packed: bool) -> Reducer {
        Reducer {
            f,
            packed,
            t: t.arc(),
            n,
        }
    }

    /// The same reduction of `n` elements.
    pub(crate) fn with_count(&self, n: usize) -> Reducer {
        Reducer {
            f: self.f.clone(),
            packed: self.packed,
            t: self.t.clone(),
            n,
        }
    }

    /// The bytes of elements `first..first + count` in a result of its `n` elements (as
    /// [`Reducer::fold`] gives it): packed, or in the type's layout (elements an extent
    /// apart, from the first one's lowest byte; a type of negative extent gives none).
    pub(crate) fn block<'a>(&self, all: &'a [u8], first: usize, count: usize) -> &'a [u8] {
        let (start, len) = if self.packed {
            (first * self.t.size, count * self.t.size)
        } else if self.t.extent < 0 {
            (0, 0)
        } else {
            (first * self.t.extent as usize, span(&self.t, count).1)
        };
        all.get(start..start + len).unwrap_or(&[])
    }

    /// The number of elements it reduces.
    pub(crate) fn count(&self) -> usize {
        self.n
    }

    /// Bytes of one contribution.
    pub(crate) fn len(&self) -> usize {
        if self.packed {
            self.n * self.t.size
        } else {
            span(&self.t, self.n).1
        }
    }

    /// This rank's contribution, from the program's buffer.
    ///
    /// # Safety
    /// `buf` holds `n` elements of the type.
    pub(crate) unsafe fn input(&self, buf: *const u8) -> Vec<u8> {
        if self.packed {
            // SAFETY: the caller's contract.
            unsafe { crate::p2p::data(buf.cast(), self.n, &self.t) }.into_owned()
        } else {
            let (lo, len) = span(&self.t, self.n);
            if len == 0 {
                return Vec::new();
            }
            // SAFETY: `n` elements of the type lie in these bytes (the caller's
            // contract), `MPI_BOTTOM` with absolute displacements included.
            unsafe { std::slice::from_raw_parts(buf.wrapping_offset(lo), len) }.to_vec()
        }
    }

    /// Writes a result into the program's buffer (only the datatype's own bytes).
    ///
    /// # Safety
    /// `buf` holds `n` elements of the type.
    pub(crate) unsafe fn output(&self, bytes: &[u8], buf: *mut u8) {
        if bytes.is_empty() {
            return;
        }
        // SAFETY: the caller's contract.
        unsafe {
            if self.packed {
                crate::datatype::unpack(bytes, buf, &self.t);
            } else {
                // `bytes` starts at the elements' lowest byte: their base is `-lo` in.
                let (lo, len) = span(&self.t, self.n);
                if bytes.len() < len {
                    return;
                }
                let p = crate::datatype::pack(bytes.as_ptr().wrapping_offset(-lo), self.n, &self.t);
                crate::datatype::unpack(&p, buf, &self.t);
            }
        }
    }

    /// Combines `input` into `inout` in place (`inout = input op inout`), both packed
    /// elements (an accumulate of one-sided communication).
    pub(crate) fn apply(&self, input: &[u8], inout: &mut [u8]) {
        (self.f)(input, inout, self.n);
    }

    /// Whether contributions are packed elements (else laid out as the datatype).
    pub(crate) fn packed(&self) -> bool {
        self.packed
    }

    /// Combines contributions in rank order: `parts[0] op parts[1] op ...` (at least one).
    pub(crate) fn fold(&self, parts: &[&[u8]]) -> Vec<u8> {
        let Some((last, rest)) = parts.split_last() else {
            return Vec::new();
        };
        let mut acc = last.to_vec();
        for p in rest.iter().rev() {
            (self.f)(p, &mut acc, self.n);
        }
        acc
    }
}

/// `MPI_Op_create_c`: a user operator whose function takes an `MPI_Count` length.
#[no_mangle]
pub unsafe extern "C" fn MPI_Op_create_c(
    user_fn: *const c_void,
    commute: c_int,
    op: *mut MPI_Op,
) -> c_int {
    let r = (|| {
        if user_fn.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Op_create_c: NULL function",
            ));
        }
        // SAFETY: a C function of the standard's type (the caller's contract).
        let f: UserFnC = unsafe { std::mem::transmute(user_fn) };
        let h = OPS
            .insert(UserOp {
                f: UserFunc::Large(f),
                commute: commute != 0,
            })
            .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many operators"))?;
        // SAFETY: the caller's contract.
        unsafe { out(op, h, "MPI_Op_create_c") }
    })();
    on_self(r)
}
