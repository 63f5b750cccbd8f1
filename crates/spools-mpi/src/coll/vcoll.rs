//! The non-blocking (`MPI_I*`) and persistent (`MPI_*_init`) forms of every collective,
//! and every form of alltoallw: an intracommunicator's hand over to `icoll.rs` and
//! `icollv.rs` at once, an intercommunicator's to `inter.rs`; what is left is built here
//! on Spools' non-blocking exchange (`Communicator::iexchange`): reductions with a user
//! function, and an intercommunicator's v forms and alltoall(v/w). Each is described
//! once as what this rank sends to and receives
//! from whom ([`Xfer`]); the blocking form starts and waits it, the non-blocking form
//! returns its request, the persistent form starts it anew at each `MPI_Start`.
//! Reductions travel whole and are combined locally in rank order ([`Reducer`]).

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use smallvec::SmallVec;
use spools::{CollRequest, InterRoot};

use crate::abi::*;
use crate::coll::icoll::{self, Goal, Side};
use crate::coll::icollv::{self, Blocks};
use crate::coll::inter;
use crate::coll::op::Reducer;
use crate::comm::{comm, CommObj};
use crate::datatype::{block, buffer, committed, count as ccount, unpack, TypeObj};
use crate::env::errhandler::on_comm;
use crate::env::error::MpiError;
use crate::out::out;
use crate::p2p::data;
use crate::p2p::request::{give, CollOp, Op, Start};

/// A block this rank receives: from whom, how many elements of which type, where.
pub(crate) struct In {
    pub(crate) from: u32,
    pub(crate) key: u8,
    pub(crate) n: usize,
    pub(crate) t: Arc<TypeObj>,
    pub(crate) addr: usize,
}

/// A block this rank sends: to whom, how many elements of which type, from where.
pub(crate) struct OutB {
    pub(crate) to: u32,
    pub(crate) key: u8,
    pub(crate) n: usize,
    pub(crate) t: Arc<TypeObj>,
    pub(crate) addr: usize,
}

/// One exchange: the blocks this rank sends and receives.
pub(crate) struct Xfer {
    pub(crate) c: Arc<CommObj>,
    pub(crate) sends: Vec<OutB>,
    pub(crate) recvs: Vec<In>,
}

/// A started exchange: on completion, each received block is unpacked to its place.
struct XferOp {
    req: CollRequest<Vec<Vec<u8>>>,
    outs: Vec<(usize, Arc<TypeObj>)>,
}

impl CollOp for XferOp {
    fn poll(&mut self) -> Result<bool, MpiError> {
        Ok(self.req.test())
    }

    fn finish(self: Box<Self>) -> Result<(), MpiError> {
        let blocks = self.req.wait()?;
        for (b, (addr, t)) in blocks.iter().zip(&self.outs) {
            if !b.is_empty() {
                // SAFETY: the program's buffer for this block (MPI's contract: valid
                // until the collective completes).
                unsafe { unpack(b, *addr as *mut u8, t) };
            }
        }
        Ok(())
    }
}

fn start_xfer(x: &Xfer) -> Result<Box<dyn CollOp>, MpiError> {
    let sends = x
        .sends
        .iter()
        .map(|s| {
            (
                s.to,
                s.key,
                // SAFETY: the program's send buffer (MPI's contract).
                unsafe { data(s.addr as *const c_void, s.n, &s.t) }.into_owned(),
            )
        })
        .collect();
    let recvs = x
        .recvs
        .iter()
        .map(|r| (r.from, r.key, r.n * r.t.size))
        .collect();
    let req = x.c.comm.iexchange_keyed(sends, recvs)?;
    Ok(Box::new(XferOp {
        req,
        outs: x.recvs.iter().map(|r| (r.addr, r.t.clone())).collect(),
    }))
}

/// A barrier in flight.
struct BarrierOp(CollRequest<()>);

impl CollOp for BarrierOp {
    fn poll(&mut self) -> Result<bool, MpiError> {
        Ok(self.0.test())
    }
    fn finish(self: Box<Self>) -> Result<(), MpiError> {
        Ok(self.0.wait()?)
    }
}

/// Who gets what of a reduction done here.
#[derive(Clone, Copy)]
enum Fold {
    /// The root gets the fold of all.
    Root(u32),
    /// Everyone gets the fold of all.
    All,
    /// Rank i gets the fold of ranks 0..=i.
    Scan,
    /// Rank i gets the fold of ranks 0..i (nothing on rank 0).
    Exscan,
    /// Rank i gets block i (of `counts[i]` elements) of the fold of all.
    Scatter,
}

/// A reduction in flight: contributions arriving, then folded.
struct ReduceOp {
    req: CollRequest<Vec<Vec<u8>>>,
    red: Reducer,
    fold: Fold,
    me: usize,
    /// Where the result goes and, for `Scatter`, the element offset of each rank's block.
    recv: usize,
    counts: Vec<usize>,
}

impl CollOp for ReduceOp {
    fn poll(&mut self) -> Result<bool, MpiError> {
        Ok(self.req.test())
    }

    fn finish(self: Box<Self>) -> Result<(), MpiError> {
        let this = *self;
        let parts = this.req.wait()?;
        let self_ = ReduceRest {
            red: this.red,
            fold: this.fold,
            me: this.me,
            recv: this.recv,
            counts: this.counts,
        };
        self_.finish(parts)
    }
}

/// What a reduction does once its contributions arrived.
struct ReduceRest {
    red: Reducer,
    fold: Fold,
    me: usize,
    recv: usize,
    counts: Vec<usize>,
}

impl ReduceRest {
    fn finish(self, parts: Vec<Vec<u8>>) -> Result<(), MpiError> {
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let result = match self.fold {
            Fold::Root(r) if r as usize != self.me => return Ok(()),
            Fold::Exscan if self.me == 0 => return Ok(()),
            Fold::Root(_) | Fold::All | Fold::Scan | Fold::Exscan => self.red.fold(&refs),
            Fold::Scatter => {
                let all = self.red.fold(&refs);
                let first: usize = self.counts[..self.me].iter().sum();
                let mine = self.red.block(&all, first, self.counts[self.me]);
                let r = self.red.with_count(self.counts[self.me]);
                // SAFETY: the program's receive buffer holds this rank's block.
                unsafe { r.output(mine, self.recv as *mut u8) };
                return Ok(());
            }
        };
        // SAFETY: the program's receive buffer holds the result's elements.
        unsafe { self.red.output(&result, self.recv as *mut u8) };
        Ok(())
    }
}

/// The root of a rooted collective on an intercommunicator's side that does not take
/// part (`MPI_PROC_NULL`).
const NOBODY: u32 = u32::MAX;

/// A collective's root as a rank of `c.comm`. On an intercommunicator, `MPI_ROOT` is
/// this rank (of the view: no peer), `MPI_PROC_NULL` is [`NOBODY`], and a rank names
/// the remote group's root.
pub(crate) fn root_of(c: &CommObj, root: c_int, call: &'static str) -> Result<u32, MpiError> {
    if c.inter.is_some() {
        match root {
            MPI_ROOT => return Ok(c.comm.rank()),
            MPI_PROC_NULL => return Ok(NOBODY),
            _ => {}
        }
    }
    match u32::try_from(root) {
        Ok(r) if r < c.peers() => Ok(r),
        _ => Err(MpiError::invalid(
            MPI_ERR_ROOT,
            format!(
                "{call}: root {root} is not in this communicator of {} ranks",
                c.peers()
            ),
        )),
    }
}

/// An intercommunicator's root ([`root_of`]'s answer) as Spools names it.
fn inter_root(c: &CommObj, root: u32) -> InterRoot {
    if root == NOBODY {
        InterRoot::Bystander
    } else if root == c.comm.rank() {
        InterRoot::Here
    } else {
        InterRoot::There(root)
    }
}

/// What an intercommunicator's bystander (root `MPI_PROC_NULL`) does in a rooted
/// collective: nothing, yet it counts as one of the communicator's collectives (its
/// buffers and types are not looked at).
fn bystander(c: Arc<CommObj>) -> Start {
    xfer_start(Xfer {
        c,
        sends: Vec::new(),
        recvs: Vec::new(),
    })
}

/// `MPI_IN_PLACE` is for intracommunicators only.
fn no_in_place_on_inter(c: &CommObj, p: usize, call: &'static str) -> Result<(), MpiError> {
    if c.inter.is_some() && in_place(p as *const c_void) {
        return Err(MpiError::invalid(
            MPI_ERR_BUFFER,
            format!("{call}: MPI_IN_PLACE is not allowed on an intercommunicator"),
        ));
    }
    Ok(())
}

fn in_place(p: *const c_void) -> bool {
    p as usize == MPI_IN_PLACE
}

/// Starts a reduction of `n` elements from `send` (or `recv` in place) folded as `fold`.
fn start_reduce(
    c: &Arc<CommObj>,
    send: usize,
    recv: usize,
    n: usize,
    dt: MPI_Datatype,
    op: MPI_Op,
    fold: Fold,
    counts: Vec<usize>,
    call: &'static str,
) -> Result<Box<dyn CollOp>, MpiError> {
    let t = committed(dt, call)?;
    let red = Reducer::new(op, dt, &t, n)?;
    let size = c.peers();
    let me = c.comm.rank();
    let src = if in_place(send as *const c_void) {
        recv
    } else {
        send
    };
    let (to, from): (Vec<u32>, Vec<u32>) = match fold {
        // An intercommunicator's root gets the fold of the remote group, which sends it.
        Fold::Root(r) if c.inter.is_some() => {
            if r == me {
                (Vec::new(), (0..size).collect())
            } else if r == NOBODY {
                (Vec::new(), Vec::new())
            } else {
                (vec![r], Vec::new())
            }
        }
        Fold::Scan | Fold::Exscan if c.inter.is_some() => {
            return Err(MpiError::invalid(
                MPI_ERR_COMM,
                format!("{call}: a scan is not defined on an intercommunicator"),
            ))
        }
        Fold::Root(r) => (
            vec![r],
            if me == r {
                (0..size).collect()
            } else {
                Vec::new()
            },
        ),
        Fold::All | Fold::Scatter => ((0..size).collect(), (0..size).collect()),
        Fold::Scan => ((me..size).collect(), (0..=me).collect()),
        Fold::Exscan => ((me + 1..size).collect(), (0..me).collect()),
    };
    let len = red.len();
    // An intercommunicator's root and bystanders pass no data.
    let mine = if to.is_empty() {
        Vec::new()
    } else {
        // SAFETY: the program's buffer holds `n` elements (MPI's contract).
        unsafe { red.input(src as *const u8) }
    };
    let sends = to.into_iter().map(|r| (r, mine.clone())).collect();
    let recvs = from.into_iter().map(|r| (r, len)).collect();
    let req = c.comm.iexchange(sends, recvs)?;
    // A reduce-scatter's block is this rank's in its (local) group.
    let me = match fold {
        Fold::Scatter => c.local_rank(),
        _ => me,
    };
    Ok(Box::new(ReduceOp {
        req,
        red,
        fold,
        me: me as usize,
        recv,
        counts,
    }))
}

/// Counts or displacements of a v collective, one per rank: on the stack up to 16 ranks
/// (no allocation per call for the small v collectives of a node's ranks).
pub(crate) type Ints = SmallVec<[i64; 16]>;

/// Counts (checked), or byte counts, of a v collective, one per rank (as [`Ints`]).
pub(crate) type Counts = SmallVec<[usize; 16]>;

/// Reads `n` counts or displacements of a C array of either width.
///
/// # Safety
/// `p` holds `n` values.
pub(crate) unsafe fn arr<T: Copy + Wide>(
    p: *const T,
    n: usize,
    call: &'static str,
) -> Result<Ints, MpiError> {
    // SAFETY: the caller's contract.
    Ok(unsafe { crate::datatype::array(p, n, call) }?
        .iter()
        .map(|&x| x.wide())
        .collect())
}

/// The integer types of count and displacement arrays (`int`, `MPI_Count`, `MPI_Aint`).
pub(crate) trait Wide {
    fn wide(self) -> i64;
}
impl Wide for c_int {
    fn wide(self) -> i64 {
        i64::from(self)
    }
}
impl Wide for i64 {
    fn wide(self) -> i64 {
        self
    }
}
impl Wide for isize {
    fn wide(self) -> i64 {
        self as i64
    }
}

pub(crate) fn counts(v: &[i64], call: &'static str) -> Result<Counts, MpiError> {
    v.iter().map(|&x| ccount(x, call)).collect()
}

/// The blocks of a gather(v) to `root`.
#[allow(clippy::too_many_arguments)]
fn gatherv(
    c: Arc<CommObj>,
    send: usize,
    sn: i64,
    st: MPI_Datatype,
    recv: usize,
    rcounts: &[i64],
    displs: &[i64],
    rt: MPI_Datatype,
    root: u32,
    call: &'static str,
) -> Result<Xfer, MpiError> {
    let me = c.comm.rank();
    // On an intercommunicator the root (`MPI_ROOT`) and the bystanders send nothing.
    let sends = root != NOBODY && !(c.inter.is_some() && me == root);
    let mut x = Xfer {
        c,
        sends: Vec::new(),
        recvs: Vec::new(),
    };
    let inplace = me == root && in_place(send as *const c_void);
    if !inplace && sends {
        let (n, t) = (ccount(sn, call)?, committed(st, call)?);
        buffer(send, n, &t, call, "sendbuf")?;
        x.sends.push(OutB {
            to: root,
            key: 0,
            n,
            t,
            addr: send,
        });
    }
    if me == root {
        let t = committed(rt, call)?;
        for (i, (&k, &d)) in rcounts.iter().zip(displs).enumerate() {
            let n = ccount(k, call)?;
            block(recv, d as isize * t.extent, n, &t, call, "recvbuf")?;
            if inplace && i as u32 == me {
                continue;
            }
            x.recvs.push(In {
                from: i as u32,
                key: 0,
                n,
                t: t.clone(),
                addr: (recv as isize + d as isize * t.extent) as usize,
            });
        }
    }
    Ok(x)
}

/// The blocks of a scatter(v) from `root`.
#[allow(clippy::too_many_arguments)]
fn scatterv(
    c: Arc<CommObj>,
    send: usize,
    scounts: &[i64],
    displs: &[i64],
    st: MPI_Datatype,
    recv: usize,
    rn: i64,
    rt: MPI_Datatype,
    root: u32,
    call: &'static str,
) -> Result<Xfer, MpiError> {
    let me = c.comm.rank();
    // On an intercommunicator the root (`MPI_ROOT`) and the bystanders receive nothing.
    let receives = root != NOBODY && !(c.inter.is_some() && me == root);
    let mut x = Xfer {
        c,
        sends: Vec::new(),
        recvs: Vec::new(),
    };
    let inplace = me == root && in_place(recv as *const c_void);
    if me == root {
        let t = committed(st, call)?;
        for (i, (&k, &d)) in scounts.iter().zip(displs).enumerate() {
            let n = ccount(k, call)?;
            block(send, d as isize * t.extent, n, &t, call, "sendbuf")?;
            if inplace && i as u32 == me {
                continue;
            }
            x.sends.push(OutB {
                to: i as u32,
                key: 0,
                n,
                t: t.clone(),
                addr: (send as isize + d as isize * t.extent) as usize,
            });
        }
    }
    if !inplace && receives {
        let (n, t) = (ccount(rn, call)?, committed(rt, call)?);
        buffer(recv, n, &t, call, "recvbuf")?;
        x.recvs.push(In {
            from: root,
            key: 0,
            n,
            t,
            addr: recv,
        });
    }
    Ok(x)
}

/// The blocks of an allgather(v).
#[allow(clippy::too_many_arguments)]
fn allgatherv(
    c: Arc<CommObj>,
    send: usize,
    sn: i64,
    st: MPI_Datatype,
    recv: usize,
    rcounts: &[i64],
    displs: &[i64],
    rt: MPI_Datatype,
    call: &'static str,
) -> Result<Xfer, MpiError> {
    no_in_place_on_inter(&c, send, call)?;
    let me = c.comm.rank() as usize;
    let size = c.peers();
    let t = committed(rt, call)?;
    let inplace = in_place(send as *const c_void);
    for (&k, &d) in rcounts.iter().zip(displs) {
        block(
            recv,
            d as isize * t.extent,
            ccount(k, call)?,
            &t,
            call,
            "recvbuf",
        )?;
    }
    if !inplace {
        buffer(
            send,
            ccount(sn, call)?,
            &*committed(st, call)?,
            call,
            "sendbuf",
        )?;
    }
    let (sa, sn, stt) = if inplace {
        (
            (recv as isize + displs[me] as isize * t.extent) as usize,
            ccount(rcounts[me], call)?,
            t.clone(),
        )
    } else {
        (send, ccount(sn, call)?, committed(st, call)?)
    };
    let mut x = Xfer {
        c,
        sends: Vec::new(),
        recvs: Vec::new(),
    };
    for i in 0..size {
        if inplace && i as usize == me {
            continue;
        }
        x.sends.push(OutB {
            to: i,
            key: 0,
            n: sn,
            t: stt.clone(),
            addr: sa,
        });
        x.recvs.push(In {
            from: i,
            key: 0,
            n: ccount(rcounts[i as usize], call)?,
            t: t.clone(),
            addr: (recv as isize + displs[i as usize] as isize * t.extent) as usize,
        });
    }
    Ok(x)
}

/// The exchange of an alltoallw (displacements in bytes, a type per peer); alltoall(v)
/// pass the same type everywhere with displacements scaled by its extent. In place, the
/// data to send is what the receive buffer holds when the collective starts (at every
/// `MPI_Start` of a persistent one): each block is packed out before anything arrives.
#[allow(clippy::too_many_arguments)]
fn alltoallw(
    c: Arc<CommObj>,
    send: usize,
    sc: &[i64],
    sd: &[i64],
    st: &[MPI_Datatype],
    recv: usize,
    rc: &[i64],
    rd: &[i64],
    rt: &[MPI_Datatype],
    call: &'static str,
) -> Result<Start, MpiError> {
    no_in_place_on_inter(&c, send, call)?;
    let size = c.peers() as usize;
    let inplace = in_place(send as *const c_void);
    let (sc, sd, st) = if inplace { (rc, rd, rt) } else { (sc, sd, st) };
    let mut sends = Vec::with_capacity(size);
    let mut recvs = Vec::with_capacity(size);
    for i in 0..size {
        let (n, t) = (ccount(sc[i], call)?, committed(st[i], call)?);
        // In place, the blocks to send are the receive buffer's, checked below.
        if !inplace {
            block(send, sd[i] as isize, n, &t, call, "sendbuf")?;
        }
        sends.push((n, t, sd[i] as isize));
        let (n, t) = (ccount(rc[i], call)?, committed(rt[i], call)?);
        block(recv, rd[i] as isize, n, &t, call, "recvbuf")?;
        recvs.push(In {
            from: i as u32,
            key: 0,
            n,
            t,
            addr: (recv as isize + rd[i] as isize) as usize,
        });
    }
    let bytes = committed(MPI_BYTE, call)?;
    let recvs = Arc::new(recvs);
    Ok(Arc::new(move || {
        let base = if inplace { recv } else { send };
        // In place, the blocks to send, packed now (before any block arrives).
        let mut packed = Vec::new();
        let mut offsets = Vec::with_capacity(size);
        if inplace {
            for (n, t, d) in &sends {
                offsets.push(packed.len());
                // SAFETY: the receive buffer holds every block (MPI's contract).
                packed.extend_from_slice(&unsafe {
                    data((base as isize + d) as *const c_void, *n, t)
                });
            }
        }
        let x = Xfer {
            c: c.clone(),
            sends: sends
                .iter()
                .enumerate()
                .map(|(i, (n, t, d))| {
                    if inplace {
                        OutB {
                            to: i as u32,
                            key: 0,
                            n: n * t.size,
                            t: bytes.clone(),
                            addr: packed.as_ptr() as usize + offsets[i],
                        }
                    } else {
                        OutB {
                            to: i as u32,
                            key: 0,
                            n: *n,
                            t: t.clone(),
                            addr: (base as isize + d) as usize,
                        }
                    }
                })
                .collect(),
            recvs: recvs
                .iter()
                .map(|r| In {
                    from: r.from,
                    key: r.key,
                    n: r.n,
                    t: r.t.clone(),
                    addr: r.addr,
                })
                .collect(),
        };
        // The sends are packed into the exchange here, so `packed` may go after.
        start_xfer(&x)
    }))
}

/// Runs `start` to completion (the blocking forms).
pub(crate) fn run(start: Start) -> Result<(), MpiError> {
    start()?.finish()
}

/// What starts exchange `x` (again, for a persistent collective).
pub(crate) fn xfer_start(x: Xfer) -> Start {
    let x = Arc::new(x);
    Arc::new(move || start_xfer(&x))
}

// SAFETY: the buffers an Xfer names are the program's (addresses as integers);
// Arc<CommObj> and Arc<TypeObj> are shareable.
unsafe impl Send for Xfer {}
// SAFETY: as above.
unsafe impl Sync for Xfer {}

/// Gives a started collective as a request.
///
/// # Safety
/// `request` is NULL or writable.
pub(crate) unsafe fn nonblocking(
    start: Start,
    comm_h: MPI_Comm,
    request: *mut MPI_Request,
    call: &'static str,
) -> Result<(), MpiError> {
    let op = start()?;
    let h = give(Op::Coll(op), comm_h)?;
    // SAFETY: the caller's contract.
    unsafe { out(request, h, call) }
}

/// Defines the blocking (`$b`, `$bc`), non-blocking (`$i`, `$ic`) and persistent
/// (`$p`, `$pc`) forms of one collective from `$make`, which gives its [`Start`]
/// (`-` for a form defined elsewhere).
macro_rules! forms {
    (@b -, $($rest:tt)*) => {};
    (@b $name:ident, $comm:ident, ($($p:ident: $t:ty),*), $make:expr) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($p: $t),*) -> c_int {
            let make: &dyn Fn() -> Result<Start, MpiError> = &$make;
            on_comm($comm, make().and_then(run))
        }
    };
    (@i $name:ident, $comm:ident, ($($p:ident: $t:ty),*), $make:expr) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($p: $t,)* request: *mut MPI_Request) -> c_int {
            let make: &dyn Fn() -> Result<Start, MpiError> = &$make;
            // SAFETY: the caller's contract.
            on_comm($comm, make().and_then(|s| unsafe { nonblocking(s, $comm, request, stringify!($name)) }))
        }
    };
    (@p $name:ident, $comm:ident, ($($p:ident: $t:ty),*), $make:expr) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($p: $t,)* info: MPI_Info, request: *mut MPI_Request) -> c_int {
            let _ = info;
            // The start, on any communicator handle: the collective's own (`pcoll.rs`).
            let args = crate::coll::pcoll::Args(move |$comm: MPI_Comm| -> Result<Start, MpiError> {
                let make: &dyn Fn() -> Result<Start, MpiError> = &$make;
                make()
            });
            let maker: crate::coll::pcoll::Maker = Box::new(move |h| args.make(h));
            // SAFETY: the caller's contract.
            on_comm($comm, unsafe { crate::coll::pcoll::persistent(maker, $comm, request, stringify!($name)) })
        }
    };
    ($b:tt, $bc:tt, $i:ident, $ic:ident, $p:ident, $pc:ident, $comm:ident; ($($a:ident: $ti:ty => $tl:ty),*), $make:expr) => {
        forms!(@b $b, $comm, ($($a: $ti),*), $make);
        forms!(@b $bc, $comm, ($($a: $tl),*), $make);
        forms!(@i $i, $comm, ($($a: $ti),*), $make);
        forms!(@i $ic, $comm, ($($a: $tl),*), $make);
        forms!(@p $p, $comm, ($($a: $ti),*), $make);
        forms!(@p $pc, $comm, ($($a: $tl),*), $make);
    };
}

/// How many peers a collective addresses (the remote group, on an intercommunicator).
fn size_of(c: &CommObj) -> usize {
    c.peers() as usize
}

/// One side of a uniform collective on Spools' own ([`Side`]): `blocks` blocks of
/// `count` elements of `dt` at `addr`, checked; unused (`None`) where `blocks` is 0.
fn side(
    addr: usize,
    count: i64,
    dt: MPI_Datatype,
    blocks: usize,
    call: &'static str,
    what: &'static str,
) -> Result<Side, MpiError> {
    if blocks == 0 {
        return Ok((0, 0, None));
    }
    let (n, t) = (ccount(count, call)?, committed(dt, call)?);
    buffer(addr, n.saturating_mul(blocks), &t, call, what)?;
    Ok((addr, n, Some(t)))
}

/// The bytes of one block of a side (0 where it is unused).
fn block_bytes(s: &Side) -> usize {
    s.2.as_ref().map_or(0, |t| s.1 * t.size)
}

/// Uniform blocks: counts `n` each, at element displacements `i * n`.
fn uniform(n: i64, size: usize) -> (Vec<i64>, Vec<i64>) {
    (vec![n; size], (0..size as i64).map(|i| i * n).collect())
}

forms!(-, -, MPI_Ibcast, MPI_Ibcast_c, MPI_Bcast_init, MPI_Bcast_init_c, comm;
    (buffer: *mut c_void => *mut c_void, count: c_int => MPI_Count, datatype: MPI_Datatype => MPI_Datatype, root: c_int => c_int, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Ibcast";
    let c = self::comm(comm, call)?;
    let root = root_of(&c, root, call)?;
    if root == NOBODY {
        return Ok(bystander(c));
    }
    let t = committed(datatype, call)?;
    let n = ccount(count as i64, call)?;
    crate::datatype::buffer(buffer as usize, n, &t, call, "buffer")?;
    if c.inter.is_none() {
        return Ok(icoll::bcast(c, buffer as usize, n, t, root));
    }
    let who = inter_root(&c, root);
    Ok(inter::bcast(c, buffer as usize, n, t, who))
});

forms!(-, -, MPI_Igather, MPI_Igather_c, MPI_Gather_init, MPI_Gather_init_c, comm;
    (sendbuf: *const c_void => *const c_void, sendcount: c_int => MPI_Count, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcount: c_int => MPI_Count, recvtype: MPI_Datatype => MPI_Datatype, root: c_int => c_int, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Igather";
    let c = self::comm(comm, call)?;
    let own = crate::coll::alias::own_block(recvbuf, recvtype, i64::from(root) * recvcount as i64);
    crate::coll::alias::unaliased(comm, sendbuf, own, Some(root), sendcount != 0 && recvcount != 0, call)?;
    let root = root_of(&c, root, call)?;
    if root == NOBODY {
        return Ok(bystander(c));
    }
    if c.inter.is_none() {
        let me = c.comm.rank();
        let blocks = if me == root { size_of(&c) } else { 0 };
        let recv = side(recvbuf as usize, recvcount as i64, recvtype, blocks, call, "recvbuf")?;
        let send = if me == root && in_place(sendbuf) {
            (0, 0, None)
        } else {
            side(sendbuf as usize, sendcount as i64, sendtype, 1, call, "sendbuf")?
        };
        return Ok(icoll::gather(c, send, recv, root));
    }
    let who = inter_root(&c, root);
    let (send, recv) = if who == InterRoot::Here {
        ((0, 0, None), side(recvbuf as usize, recvcount as i64, recvtype, size_of(&c), call, "recvbuf")?)
    } else {
        no_in_place_on_inter(&c, sendbuf as usize, call)?;
        (side(sendbuf as usize, sendcount as i64, sendtype, 1, call, "sendbuf")?, (0, 0, None))
    };
    Ok(inter::gather(c, send, recv, who))
});

forms!(-, -, MPI_Igatherv, MPI_Igatherv_c, MPI_Gatherv_init, MPI_Gatherv_init_c, comm;
    (sendbuf: *const c_void => *const c_void, sendcount: c_int => MPI_Count, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcounts: *const c_int => *const MPI_Count, displs: *const c_int => *const MPI_Aint, recvtype: MPI_Datatype => MPI_Datatype, root: c_int => c_int, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Gatherv";
    let c = self::comm(comm, call)?;
    let root = root_of(&c, root, call)?;
    if root == NOBODY {
        return Ok(bystander(c));
    }
    let n = if c.comm.rank() == root { size_of(&c) } else { 0 };
    // SAFETY: `size` values at the root (the caller's contract).
    let (k, d) = unsafe { (arr(recvcounts, n, call)?, arr(displs, n, call)?) };
    if c.inter.is_none() && c.comm.rank() == root {
        // The root's own block, where its part lands.
        let (kr, dr) = (k.get(root as usize).copied().unwrap_or(0), d.get(root as usize).copied().unwrap_or(0));
        let own = crate::coll::alias::own_block(recvbuf, recvtype, dr);
        crate::coll::alias::unaliased(comm, sendbuf, own, None, sendcount != 0 && kr != 0, call)?;
    }
    if c.inter.is_none() {
        let me = c.comm.rank();
        let recv = if me == root {
            Some(Blocks::new(recvbuf as usize, (&k, &d), recvtype, (call, "recvbuf"))?)
        } else {
            None
        };
        let send = if me == root && in_place(sendbuf) {
            (0, 0, None)
        } else {
            side(sendbuf as usize, sendcount as i64, sendtype, 1, call, "sendbuf")?
        };
        return Ok(icollv::gatherv(c, send, recv, root, call));
    }
    let x = gatherv(c, sendbuf as usize, sendcount as i64, sendtype, recvbuf as usize, &k, &d, recvtype, root, call)?;
    Ok(xfer_start(x))
});

forms!(-, -, MPI_Iscatter, MPI_Iscatter_c, MPI_Scatter_init, MPI_Scatter_init_c, comm;
    (sendbuf: *const c_void => *const c_void, sendcount: c_int => MPI_Count, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcount: c_int => MPI_Count, recvtype: MPI_Datatype => MPI_Datatype, root: c_int => c_int, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Iscatter";
    let c = self::comm(comm, call)?;
    // The root's own send block against its receive (an in-place receive is no alias).
    let own = crate::coll::alias::own_block(sendbuf, sendtype, i64::from(root) * sendcount as i64);
    crate::coll::alias::unaliased(comm, recvbuf, own, Some(root), recvcount != 0 && sendcount != 0, call)?;
    let root = root_of(&c, root, call)?;
    if root == NOBODY {
        return Ok(bystander(c));
    }
    if c.inter.is_none() {
        let me = c.comm.rank();
        let blocks = if me == root { size_of(&c) } else { 0 };
        let send = side(sendbuf as usize, sendcount as i64, sendtype, blocks, call, "sendbuf")?;
        let recv = if me == root && in_place(recvbuf) {
            (0, 0, None)
        } else {
            side(recvbuf as usize, recvcount as i64, recvtype, 1, call, "recvbuf")?
        };
        // A block's bytes as this rank counts them: the root's send blocks, the others'
        // receive block.
        let part = if me == root { block_bytes(&send) } else { block_bytes(&recv) };
        return Ok(icoll::scatter(c, send, recv, root, part));
    }
    let who = inter_root(&c, root);
    let (send, recv) = if who == InterRoot::Here {
        (side(sendbuf as usize, sendcount as i64, sendtype, size_of(&c), call, "sendbuf")?, (0, 0, None))
    } else {
        no_in_place_on_inter(&c, recvbuf as usize, call)?;
        ((0, 0, None), side(recvbuf as usize, recvcount as i64, recvtype, 1, call, "recvbuf")?)
    };
    Ok(inter::scatter(c, send, recv, who))
});

forms!(-, -, MPI_Iscatterv, MPI_Iscatterv_c, MPI_Scatterv_init, MPI_Scatterv_init_c, comm;
    (sendbuf: *const c_void => *const c_void, sendcounts: *const c_int => *const MPI_Count, displs: *const c_int => *const MPI_Aint, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcount: c_int => MPI_Count, recvtype: MPI_Datatype => MPI_Datatype, root: c_int => c_int, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Scatterv";
    let c = self::comm(comm, call)?;
    let root = root_of(&c, root, call)?;
    if root == NOBODY {
        return Ok(bystander(c));
    }
    let n = if c.comm.rank() == root { size_of(&c) } else { 0 };
    // SAFETY: `size` values at the root (the caller's contract).
    let (k, d) = unsafe { (arr(sendcounts, n, call)?, arr(displs, n, call)?) };
    if c.inter.is_none() && c.comm.rank() == root {
        let (kr, dr) = (k.get(root as usize).copied().unwrap_or(0), d.get(root as usize).copied().unwrap_or(0));
        let own = crate::coll::alias::own_block(sendbuf, sendtype, dr);
        crate::coll::alias::unaliased(comm, recvbuf, own, None, recvcount != 0 && kr != 0, call)?;
    }
    if c.inter.is_none() {
        let me = c.comm.rank();
        let send = if me == root {
            Some(Blocks::new(sendbuf as usize, (&k, &d), sendtype, (call, "sendbuf"))?)
        } else {
            None
        };
        let recv = if me == root && in_place(recvbuf) {
            (0, 0, None)
        } else {
            side(recvbuf as usize, recvcount as i64, recvtype, 1, call, "recvbuf")?
        };
        return Ok(icollv::scatterv(c, send, recv, root, call));
    }
    let x = scatterv(c, sendbuf as usize, &k, &d, sendtype, recvbuf as usize, recvcount as i64, recvtype, root, call)?;
    Ok(xfer_start(x))
});

forms!(-, -, MPI_Iallgather, MPI_Iallgather_c, MPI_Allgather_init, MPI_Allgather_init_c, comm;
    (sendbuf: *const c_void => *const c_void, sendcount: c_int => MPI_Count, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcount: c_int => MPI_Count, recvtype: MPI_Datatype => MPI_Datatype, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Iallgather";
    let c = self::comm(comm, call)?;
    let own = crate::coll::alias::own_block(recvbuf, recvtype, i64::from(c.comm.rank()) * recvcount as i64);
    crate::coll::alias::unaliased(comm, sendbuf, own, None, sendcount != 0, call)?;
    if c.inter.is_none() {
        let recv = side(recvbuf as usize, recvcount as i64, recvtype, size_of(&c), call, "recvbuf")?;
        let send = if in_place(sendbuf) {
            (0, 0, None)
        } else {
            side(sendbuf as usize, sendcount as i64, sendtype, 1, call, "sendbuf")?
        };
        return Ok(icoll::allgather(c, send, recv));
    }
    no_in_place_on_inter(&c, sendbuf as usize, call)?;
    no_in_place_on_inter(&c, recvbuf as usize, call)?;
    let recv = side(recvbuf as usize, recvcount as i64, recvtype, size_of(&c), call, "recvbuf")?;
    let send = side(sendbuf as usize, sendcount as i64, sendtype, 1, call, "sendbuf")?;
    Ok(inter::allgather(c, send, recv))
});

forms!(-, -, MPI_Iallgatherv, MPI_Iallgatherv_c, MPI_Allgatherv_init, MPI_Allgatherv_init_c, comm;
    (sendbuf: *const c_void => *const c_void, sendcount: c_int => MPI_Count, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcounts: *const c_int => *const MPI_Count, displs: *const c_int => *const MPI_Aint, recvtype: MPI_Datatype => MPI_Datatype, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Allgatherv";
    let c = self::comm(comm, call)?;
    let n = size_of(&c);
    // SAFETY: `size` values (the caller's contract).
    let (k, d) = unsafe { (arr(recvcounts, n, call)?, arr(displs, n, call)?) };
    if c.inter.is_none() {
        let own = crate::coll::alias::own_block(recvbuf, recvtype, d.get(c.comm.rank() as usize).copied().unwrap_or(0));
        crate::coll::alias::unaliased(comm, sendbuf, own, None, sendcount != 0, call)?;
        let recv = Blocks::new(recvbuf as usize, (&k, &d), recvtype, (call, "recvbuf"))?;
        let send = if in_place(sendbuf) {
            (0, 0, None)
        } else {
            side(sendbuf as usize, sendcount as i64, sendtype, 1, call, "sendbuf")?
        };
        return Ok(icollv::allgatherv(c, send, recv, call));
    }
    let x = allgatherv(c, sendbuf as usize, sendcount as i64, sendtype, recvbuf as usize, &k, &d, recvtype, call)?;
    Ok(xfer_start(x))
});

/// Alltoall(v) blocks as alltoallw ones: displacements in elements of each type.
#[allow(clippy::too_many_arguments)]
fn alltoallv(
    c: Arc<CommObj>,
    send: usize,
    sc: &[i64],
    sd: &[i64],
    st: MPI_Datatype,
    recv: usize,
    rc: &[i64],
    rd: &[i64],
    rt: MPI_Datatype,
    call: &'static str,
) -> Result<Start, MpiError> {
    let n = size_of(&c);
    let rte = committed(rt, call)?.extent as i64;
    let inplace = in_place(send as *const c_void);
    let ste = if inplace {
        rte
    } else {
        committed(st, call)?.extent as i64
    };
    let sdb: Vec<i64> = sd.iter().map(|d| d * ste).collect();
    let rdb: Vec<i64> = rd.iter().map(|d| d * rte).collect();
    alltoallw(
        c,
        send,
        sc,
        &sdb,
        &vec![st; n],
        recv,
        rc,
        &rdb,
        &vec![rt; n],
        call,
    )
}

forms!(-, -, MPI_Ialltoall, MPI_Ialltoall_c, MPI_Alltoall_init, MPI_Alltoall_init_c, comm;
    (sendbuf: *const c_void => *const c_void, sendcount: c_int => MPI_Count, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcount: c_int => MPI_Count, recvtype: MPI_Datatype => MPI_Datatype, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Ialltoall";
    let c = self::comm(comm, call)?;
    crate::coll::alias::unaliased(comm, sendbuf, recvbuf, None, sendcount != 0, call)?;
    let n = size_of(&c);
    if c.inter.is_none() {
        let recv = side(recvbuf as usize, recvcount as i64, recvtype, n, call, "recvbuf")?;
        let send = if in_place(sendbuf) {
            (0, 0, None)
        } else {
            side(sendbuf as usize, sendcount as i64, sendtype, n, call, "sendbuf")?
        };
        return Ok(icoll::alltoall(c, send, recv));
    }
    let (sk, sd) = uniform(sendcount as i64, n);
    let (rk, rd) = uniform(recvcount as i64, n);
    let (sk, sd) = if in_place(sendbuf) { (rk.clone(), rd.clone()) } else { (sk, sd) };
    alltoallv(c, sendbuf as usize, &sk, &sd, sendtype, recvbuf as usize, &rk, &rd, recvtype, call)
});

forms!(-, -, MPI_Ialltoallv, MPI_Ialltoallv_c, MPI_Alltoallv_init, MPI_Alltoallv_init_c, comm;
    (sendbuf: *const c_void => *const c_void, sendcounts: *const c_int => *const MPI_Count, sdispls: *const c_int => *const MPI_Aint, sendtype: MPI_Datatype => MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcounts: *const c_int => *const MPI_Count, rdispls: *const c_int => *const MPI_Aint, recvtype: MPI_Datatype => MPI_Datatype, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Alltoallv";
    let c = self::comm(comm, call)?;
    let n = size_of(&c);
    // SAFETY: `size` values each (the caller's contract).
    let (rk, rd) = unsafe { (arr(recvcounts, n, call)?, arr(rdispls, n, call)?) };
    let (sk, sd) = if in_place(sendbuf) {
        (rk.clone(), rd.clone())
    } else {
        // SAFETY: as above.
        unsafe { (arr(sendcounts, n, call)?, arr(sdispls, n, call)?) }
    };
    // As MPICH: the same counts, displacements and type on both sides (a program may
    // send from one part of a buffer and receive into another with its displacements).
    let same = std::ptr::eq(sendcounts, recvcounts) && std::ptr::eq(sdispls, rdispls) && sendtype == recvtype;
    crate::coll::alias::unaliased(comm, sendbuf, recvbuf, None, same && sk.iter().any(|&k| k != 0), call)?;
    if c.inter.is_none() {
        let recv = Blocks::new(recvbuf as usize, (&rk, &rd), recvtype, (call, "recvbuf"))?;
        let send = if in_place(sendbuf) {
            None
        } else {
            Some(Blocks::new(sendbuf as usize, (&sk, &sd), sendtype, (call, "sendbuf"))?)
        };
        return Ok(icollv::alltoallv(c, send, recv, call));
    }
    alltoallv(c, sendbuf as usize, &sk, &sd, sendtype, recvbuf as usize, &rk, &rd, recvtype, call)
});

forms!(MPI_Alltoallw, MPI_Alltoallw_c, MPI_Ialltoallw, MPI_Ialltoallw_c, MPI_Alltoallw_init, MPI_Alltoallw_init_c, comm;
    (sendbuf: *const c_void => *const c_void, sendcounts: *const c_int => *const MPI_Count, sdispls: *const c_int => *const MPI_Aint, sendtypes: *const MPI_Datatype => *const MPI_Datatype, recvbuf: *mut c_void => *mut c_void, recvcounts: *const c_int => *const MPI_Count, rdispls: *const c_int => *const MPI_Aint, recvtypes: *const MPI_Datatype => *const MPI_Datatype, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Alltoallw";
    let c = self::comm(comm, call)?;
    let n = size_of(&c);
    // SAFETY: `size` values each (the caller's contract).
    let (rk, rd, rt) = unsafe { (arr(recvcounts, n, call)?, arr(rdispls, n, call)?, crate::datatype::array(recvtypes, n, call)?.to_vec()) };
    let (sk, sd, st) = if in_place(sendbuf) {
        (rk.clone(), rd.clone(), rt.clone())
    } else {
        // SAFETY: as above.
        unsafe { (arr(sendcounts, n, call)?, arr(sdispls, n, call)?, crate::datatype::array(sendtypes, n, call)?.to_vec()) }
    };
    let same = std::ptr::eq(sendcounts, recvcounts) && std::ptr::eq(sdispls, rdispls) && std::ptr::eq(sendtypes, recvtypes);
    crate::coll::alias::unaliased(comm, sendbuf, recvbuf, None, same && sk.iter().any(|&k| k != 0), call)?;
    if c.inter.is_none() {
        let recv = Blocks::each(recvbuf as usize, (&rk, &rd, &rt), (call, "recvbuf"))?;
        let send = if in_place(sendbuf) {
            None
        } else {
            Some(Blocks::each(sendbuf as usize, (&sk, &sd, &st), (call, "sendbuf"))?)
        };
        return Ok(icollv::alltoallv(c, send, recv, call));
    }
    alltoallw(c, sendbuf as usize, &sk, &sd, &st, recvbuf as usize, &rk, &rd, &rt, call)
});

fn reduce_start(
    (comm, c): (MPI_Comm, Arc<CommObj>),
    send: usize,
    recv: usize,
    count: i64,
    dt: MPI_Datatype,
    op: MPI_Op,
    fold: Fold,
    counts: Vec<usize>,
    call: &'static str,
) -> Result<Start, MpiError> {
    let n = ccount(count, call)?;
    let root = match fold {
        Fold::Root(r) => Some(r as c_int),
        _ => None,
    };
    // A reduce-scatter's receive buffer is this rank's block alone.
    let receives = match counts.get(c.comm.rank() as usize) {
        Some(&mine) => mine != 0,
        None => n != 0,
    };
    crate::coll::alias::unaliased(
        comm,
        send as *const c_void,
        recv as *const c_void,
        root,
        receives,
        call,
    )?;
    let t = committed(dt, call)?;
    // Check the operator and type now (errors at the call, not at the wait).
    let red = Reducer::new(op, dt, &t, n)?;
    reduce_buffers(&c, send, recv, n, &t, fold, &counts, call)?;
    let goal = match fold {
        Fold::Scan | Fold::Exscan if c.inter.is_some() => None,
        Fold::Root(r) => Some(Goal::Root(r)),
        Fold::All => Some(Goal::All),
        Fold::Scan => Some(Goal::Scan),
        Fold::Scatter => Some(Goal::Scatter(counts.clone())),
        Fold::Exscan => Some(Goal::Exscan),
    };
    if let Some(goal) = goal {
        let how = crate::coll::op::engine(op, dt, &t)?;
        if icoll::takes(&how, &goal) && c.inter.is_some() {
            let who = match fold {
                Fold::Root(r) => inter_root(&c, r),
                _ => InterRoot::Bystander,
            };
            return Ok(Arc::new(move || {
                inter::reduction(&c, (send, recv), &red, &how, (&goal, who))
            }));
        }
        if icoll::takes(&how, &goal) {
            let src = if in_place(send as *const c_void) {
                recv
            } else {
                send
            };
            return Ok(Arc::new(move || {
                icoll::reduction(&c, src, recv, &red, &how, &goal)
            }));
        }
    }
    Ok(Arc::new(move || {
        start_reduce(&c, send, recv, n, dt, op, fold, counts.clone(), call)
    }))
}

forms!(-, -, MPI_Ireduce, MPI_Ireduce_c, MPI_Reduce_init, MPI_Reduce_init_c, comm;
    (sendbuf: *const c_void => *const c_void, recvbuf: *mut c_void => *mut c_void, count: c_int => MPI_Count, datatype: MPI_Datatype => MPI_Datatype, op: MPI_Op => MPI_Op, root: c_int => c_int, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Ireduce";
    let c = self::comm(comm, call)?;
    let r = root_of(&c, root, call)?;
    if r == NOBODY {
        return Ok(bystander(c));
    }
    reduce_start((comm, c), sendbuf as usize, recvbuf as usize, count as i64, datatype, op, Fold::Root(r), Vec::new(), call)
});

forms!(-, -, MPI_Iallreduce, MPI_Iallreduce_c, MPI_Allreduce_init, MPI_Allreduce_init_c, comm;
    (sendbuf: *const c_void => *const c_void, recvbuf: *mut c_void => *mut c_void, count: c_int => MPI_Count, datatype: MPI_Datatype => MPI_Datatype, op: MPI_Op => MPI_Op, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Iallreduce";
    reduce_start((comm, self::comm(comm, call)?), sendbuf as usize, recvbuf as usize, count as i64, datatype, op, Fold::All, Vec::new(), call)
});

forms!(-, -, MPI_Iscan, MPI_Iscan_c, MPI_Scan_init, MPI_Scan_init_c, comm;
    (sendbuf: *const c_void => *const c_void, recvbuf: *mut c_void => *mut c_void, count: c_int => MPI_Count, datatype: MPI_Datatype => MPI_Datatype, op: MPI_Op => MPI_Op, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Iscan";
    reduce_start((comm, self::comm(comm, call)?), sendbuf as usize, recvbuf as usize, count as i64, datatype, op, Fold::Scan, Vec::new(), call)
});

forms!(-, -, MPI_Iexscan, MPI_Iexscan_c, MPI_Exscan_init, MPI_Exscan_init_c, comm;
    (sendbuf: *const c_void => *const c_void, recvbuf: *mut c_void => *mut c_void, count: c_int => MPI_Count, datatype: MPI_Datatype => MPI_Datatype, op: MPI_Op => MPI_Op, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Exscan";
    reduce_start((comm, self::comm(comm, call)?), sendbuf as usize, recvbuf as usize, count as i64, datatype, op, Fold::Exscan, Vec::new(), call)
});

forms!(-, -, MPI_Ireduce_scatter_block, MPI_Ireduce_scatter_block_c, MPI_Reduce_scatter_block_init, MPI_Reduce_scatter_block_init_c, comm;
    (sendbuf: *const c_void => *const c_void, recvbuf: *mut c_void => *mut c_void, recvcount: c_int => MPI_Count, datatype: MPI_Datatype => MPI_Datatype, op: MPI_Op => MPI_Op, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Reduce_scatter_block";
    let c = self::comm(comm, call)?;
    let n = c.local_size() as usize;
    let k = ccount(recvcount as i64, call)?;
    scatter_start((comm, c), sendbuf as usize, recvbuf as usize, vec![k; n], datatype, op, call)
});

forms!(-, -, MPI_Ireduce_scatter, MPI_Ireduce_scatter_c, MPI_Reduce_scatter_init, MPI_Reduce_scatter_init_c, comm;
    (sendbuf: *const c_void => *const c_void, recvbuf: *mut c_void => *mut c_void, recvcounts: *const c_int => *const MPI_Count, datatype: MPI_Datatype => MPI_Datatype, op: MPI_Op => MPI_Op, comm: MPI_Comm => MPI_Comm), || {
    let call = "MPI_Reduce_scatter";
    let c = self::comm(comm, call)?;
    let n = c.local_size() as usize;
    // SAFETY: `size` values (the caller's contract).
    let k = counts(&unsafe { arr(recvcounts, n, call)? }, call)?;
    scatter_start((comm, c), sendbuf as usize, recvbuf as usize, k.to_vec(), datatype, op, call)
});

/// Checks the buffers of a reduction of `n` elements of `t` folded as `fold`, those this
/// rank uses: its input (`send`, or `recv` in place, which an intracommunicator's
/// reduction allows wherever this rank gets a result, and an exclusive scan everywhere)
/// and where its result goes (`counts` elements of this rank's block, for a
/// reduce-scatter).
fn reduce_buffers(
    c: &CommObj,
    send: usize,
    recv: usize,
    n: usize,
    t: &TypeObj,
    fold: Fold,
    counts: &[usize],
    call: &'static str,
) -> Result<(), MpiError> {
    let me = c.comm.rank();
    let inter = c.inter.is_some();
    let (sends, gets) = match fold {
        // An intercommunicator's root gets the fold and sends nothing.
        Fold::Root(r) if inter => (r != me, r == me),
        Fold::Root(r) => (true, r == me),
        Fold::Exscan => (true, me > 0),
        Fold::All | Fold::Scan | Fold::Scatter => (true, true),
    };
    let may_be_in_place = !inter && (gets || matches!(fold, Fold::Exscan));
    if may_be_in_place && in_place(send as *const c_void) {
        buffer(recv, n, t, call, "recvbuf")?;
    } else if sends {
        buffer(send, n, t, call, "sendbuf")?;
    }
    if gets {
        let mine = match fold {
            Fold::Scatter => counts.get(c.local_rank() as usize).copied().unwrap_or(0),
            _ => n,
        };
        buffer(recv, mine, t, call, "recvbuf")?;
    }
    Ok(())
}

/// A reduce-scatter: everyone's whole vector (the sum of `counts`) is combined, and
/// rank i gets block i. In place, the input is the receive buffer.
fn scatter_start(
    comm: (MPI_Comm, Arc<CommObj>),
    send: usize,
    recv: usize,
    counts: Vec<usize>,
    dt: MPI_Datatype,
    op: MPI_Op,
    call: &'static str,
) -> Result<Start, MpiError> {
    let total: usize = counts.iter().sum();
    reduce_start(
        comm,
        send,
        recv,
        total as i64,
        dt,
        op,
        Fold::Scatter,
        counts,
        call,
    )
}

/// `MPI_Ibarrier`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Ibarrier(comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
    let r = barrier_start(comm).and_then(|s| {
        // SAFETY: the caller's contract.
        unsafe { nonblocking(s, comm, request, "MPI_Ibarrier") }
    });
    on_comm(comm, r)
}

/// `MPI_Barrier_init`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Barrier_init(
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info;
    let maker: crate::coll::pcoll::Maker = Box::new(barrier_start);
    // SAFETY: the caller's contract.
    let r = unsafe { crate::coll::pcoll::persistent(maker, comm, request, "MPI_Barrier_init") };
    on_comm(comm, r)
}

pub(crate) fn barrier_start(comm: MPI_Comm) -> Result<Start, MpiError> {
    let c = self::comm(comm, "MPI_Ibarrier")?;
    if c.inter.is_some() {
        return Ok(inter::barrier(c));
    }
    Ok(Arc::new(move || {
        Ok(Box::new(BarrierOp(c.comm.ibarrier()?)) as Box<dyn CollOp>)
    }))
}
