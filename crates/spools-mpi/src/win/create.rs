//! Making and freeing windows: `MPI_Win_create`, `MPI_Win_allocate`,
//! `MPI_Win_allocate_shared`, `MPI_Win_create_dynamic` (with `MPI_Win_attach` /
//! `MPI_Win_detach`), `MPI_Win_shared_query` and `MPI_Win_free`.
//!
//! Every rank publishes, in one allgather, its process id, window address, size,
//! displacement unit, control block and (for the allocating flavours) the shared-heap
//! segment of its memory; every rank then maps what it can and keeps the rest for
//! cross-memory attach.

use std::ffi::{c_int, c_void};
use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;

use spools::{HeapRef, SharedBuf};

use crate::abi::*;
use crate::comm::comm;
use crate::env::errhandler::on_comm;
use crate::env::error::MpiError;
use crate::out::out;
use crate::win::ctl::CTL_BYTES;
use crate::win::mem::Mem;
use crate::win::target::{cma_allowed, Target};
use crate::win::{on_win, remote, serve, win, Epoch, WinObj, WINS};

/// What one rank tells the others about its part of a window.
struct Part {
    pid: i32,
    base: u64,
    len: u64,
    disp_unit: u64,
    ctl: HeapRef,
    /// Its memory's segment and the offset of its window in it.
    mem: Option<HeapRef>,
    /// The window's id in its process, for memory messages (`remote.rs`).
    id: u64,
}

const PART_BYTES: usize = 4 + 8 * 3 + HeapRef::WIRE_BYTES + 1 + HeapRef::WIRE_BYTES + 8;

impl Part {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(PART_BYTES);
        v.extend_from_slice(&self.pid.to_le_bytes());
        v.extend_from_slice(&self.base.to_le_bytes());
        v.extend_from_slice(&self.len.to_le_bytes());
        v.extend_from_slice(&self.disp_unit.to_le_bytes());
        v.extend_from_slice(&self.ctl.to_bytes());
        match &self.mem {
            Some(m) => {
                v.push(1);
                v.extend_from_slice(&m.to_bytes());
            }
            None => v.extend_from_slice(&[0; 1 + HeapRef::WIRE_BYTES]),
        }
        v.extend_from_slice(&self.id.to_le_bytes());
        v
    }

    fn decode(b: &[u8]) -> Result<Part, MpiError> {
        let bad = || {
            MpiError::invalid(
                MPI_ERR_INTERN,
                "a window's description from a peer is malformed",
            )
        };
        if b.len() != PART_BYTES {
            return Err(bad());
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        let h = 4 + 24;
        let ctl = HeapRef::from_bytes(&b[h..h + HeapRef::WIRE_BYTES]).map_err(|_| bad())?;
        let m = h + HeapRef::WIRE_BYTES;
        let id_at = m + 1 + HeapRef::WIRE_BYTES;
        let mem = if b[m] == 1 {
            Some(HeapRef::from_bytes(&b[m + 1..id_at]).map_err(|_| bad())?)
        } else {
            None
        };
        Ok(Part {
            pid: i32::from_le_bytes(b[0..4].try_into().unwrap_or_default()),
            base: u64_at(4),
            len: u64_at(12),
            disp_unit: u64_at(20),
            ctl,
            mem,
            id: u64_at(id_at),
        })
    }
}

/// How a window's memory is had.
enum Memory {
    /// The program's, at this address (`MPI_Win_create`).
    Program(usize),
    /// Allocated here in the shared heap (`MPI_Win_allocate`).
    Own,
    /// One segment for the whole group, rank after rank (`MPI_Win_allocate_shared`).
    Group,
    /// None yet: regions are attached later (`MPI_Win_create_dynamic`).
    Dynamic,
}

/// Makes a window over `comm_h` (collective); gives its handle and this rank's base.
fn make(
    comm_h: MPI_Comm,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    memory: Memory,
    call: &'static str,
) -> Result<(MPI_Win, usize), MpiError> {
    crate::runtime::rt(call)?;
    let c = comm(comm_h, call)?;
    if c.inter.is_some() {
        return Err(MpiError::invalid(
            MPI_ERR_COMM,
            format!("{call}: an intercommunicator cannot hold a window"),
        ));
    }
    let len = usize::try_from(size)
        .map_err(|_| MpiError::invalid(MPI_ERR_SIZE, format!("{call}: size {size} is negative")))?;
    let unit = usize::try_from(disp_unit)
        .ok()
        .filter(|&u| u > 0)
        .ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_DISP,
                format!("{call}: displacement unit {disp_unit} is not positive"),
            )
        })?;
    let info_entries = crate::env::info::standard(
        crate::env::info::entries(info)?,
        crate::env::info::WIN_HINTS,
    );
    let comm = &c.comm;
    // Peers on other hosts are reached by memory messages (`remote.rs`); a shared window
    // is shared memory, so its ranks must share a host.
    let elsewhere: Vec<bool> = (0..comm.size())
        .map(|r| !comm.same_host(r) || (remote::forced() && r != comm.rank()))
        .collect();
    if matches!(memory, Memory::Group) {
        if let Some(r) = (0..comm.size()).find(|&r| !comm.same_host(r)) {
            return Err(MpiError::invalid(
                MPI_ERR_RMA_SHARED,
                format!("{call}: rank {r} of the communicator runs on another host: a shared window needs one host"),
            ));
        }
    }
    let world = crate::comm::world_of(&c.ctx, call)?;
    let wc = comm.dup()?;
    let heap = |n: usize| -> Result<SharedBuf<u8>, MpiError> {
        world.alloc::<u8>(n.max(1)).map_err(|e| {
            MpiError::invalid(
                MPI_ERR_NO_MEM,
                format!("{call}: no shared memory for {n} bytes: {e}"),
            )
        })
    };
    // From here every rank takes part in every collective step whatever fails locally
    // (no shared memory, a segment that cannot be mapped): a failure is carried to the
    // verdict at the end, which every rank reaches, so that all fail or none.
    let mut fail: Option<MpiError> = None;
    let mut own = Vec::new();
    let ctl_ref = match heap(CTL_BYTES) {
        Ok(b) => {
            let r = b.heap_ref();
            own.push(b);
            Some(r)
        }
        Err(e) => {
            fail.get_or_insert(e);
            None
        }
    };
    // This rank's memory, and the segment it lies in (the allocating flavours).
    let (mut base, mem_ref): (usize, Option<HeapRef>) = match memory {
        Memory::Program(p) => {
            // A NULL base of a window with bytes fails the whole group (the verdict).
            if let Err(e) = crate::datatype::byte_buffer(p, len, call, "base") {
                fail.get_or_insert(e);
            }
            (p, None)
        }
        Memory::Dynamic => (0, None),
        Memory::Own => match heap(len) {
            Ok(mut b) => {
                let p = b.as_mut_ptr() as usize;
                let r = b.heap_ref();
                own.push(b);
                (p, Some(r))
            }
            Err(e) => {
                fail.get_or_insert(e);
                (0, None)
            }
        },
        Memory::Group => {
            let sizes = wc.allgather_bytes(&(len as u64).to_le_bytes())?;
            let mut offs = Vec::with_capacity(sizes.len() + 1);
            let mut total = 0u64;
            for s in &sizes {
                offs.push(total);
                total += u64::from_le_bytes(s.as_slice().try_into().unwrap_or_default());
            }
            offs.push(total);
            // Rank 0 sends an empty name when it has no segment: every rank then fails.
            let first = if wc.rank() == 0 {
                match heap(total as usize) {
                    Ok(b) => {
                        let r = b.heap_ref();
                        own.push(b);
                        r.to_bytes().to_vec()
                    }
                    Err(e) => {
                        fail.get_or_insert(e);
                        Vec::new()
                    }
                }
            } else {
                Vec::new()
            };
            let r = wc.bcast_bytes(0, &first)?;
            match HeapRef::from_bytes(&r) {
                Ok(seg) => {
                    let mine = HeapRef {
                        name: seg.name,
                        offset: seg.offset + offs[wc.rank() as usize],
                    };
                    // The address is the mapping's, known once the targets are mapped.
                    (0, Some(mine))
                }
                Err(_) => {
                    fail.get_or_insert_with(|| {
                        MpiError::invalid(
                            MPI_ERR_NO_MEM,
                            format!("{call}: rank 0 could not allocate the shared segment"),
                        )
                    });
                    (0, None)
                }
            }
        }
    };
    // A rank that failed sends nothing to describe: the others then fail too.
    let members = crate::comm::group::members(&c)?;
    let id = serve::new_id();
    let me = match (ctl_ref, &fail) {
        (Some(ctl), None) => Part {
            pid: std::process::id() as i32,
            base: base as u64,
            len: len as u64,
            disp_unit: unit as u64,
            ctl,
            mem: mem_ref,
            id,
        }
        .encode(),
        _ => Vec::new(),
    };
    let described = wc.allgather_bytes(&me)?;
    let dynamic = matches!(memory, Memory::Dynamic);
    let mut targets = Vec::with_capacity(described.len());
    let mut cma_ok = true;
    for (r, b) in described.iter().enumerate() {
        if fail.is_some() {
            break;
        }
        let p = match Part::decode(b) {
            Ok(p) => p,
            Err(_) => {
                fail = Some(MpiError::invalid(
                    MPI_ERR_WIN,
                    format!("{call}: rank {r} could not make its part of the window"),
                ));
                break;
            }
        };
        let plen = p.len as usize;
        let group = matches!(memory, Memory::Group);
        if elsewhere[r] && !group {
            targets.push(Target {
                mem: Mem::Remote {
                    comm: c.ctx.bridge.clone(),
                    rank: members[r],
                    id: p.id,
                },
                len: plen,
                disp_unit: p.disp_unit as usize,
                dynamic,
                ctl: None,
                base: 0,
            });
            continue;
        }
        let mapped_err = |e: spools::HeapError| {
            MpiError::invalid(
                MPI_ERR_WIN,
                format!("{call}: cannot map rank {r}'s part of the window: {e}"),
            )
        };
        let ctl = match world.map_shared(&p.ctl, CTL_BYTES) {
            Ok(c) => c,
            Err(e) => {
                fail = Some(mapped_err(e));
                break;
            }
        };
        // This rank's own part is its own memory, at the address the program was
        // given, except in the group's segment, whose parts all lie in one mapping.
        let mem = if r == wc.rank() as usize && !group {
            Mem::Local(if dynamic { 0 } else { base })
        } else if let Some(m) = &p.mem {
            match world.map_shared(m, plen) {
                Ok(b) => Mem::Mapped(b),
                Err(e) => {
                    fail = Some(mapped_err(e));
                    break;
                }
            }
        } else {
            if plen > 0 && !cma_allowed(p.pid, p.base as usize) {
                cma_ok = false;
            }
            Mem::Cma {
                pid: p.pid,
                base: p.base as usize,
            }
        };
        let tbase = match &mem {
            Mem::Local(b) => *b,
            Mem::Mapped(b) => b.as_mut_ptr() as usize,
            Mem::Cma { .. } | Mem::Remote { .. } => 0,
        };
        targets.push(Target {
            mem,
            len: plen,
            disp_unit: p.disp_unit as usize,
            dynamic,
            ctl: Some(ctl),
            base: tbase,
        });
    }
    // Peers may send memory messages once the verdict below is in: the function that
    // serves them is registered, and this window can be found by its id, before it.
    if fail.is_none() {
        if let Err(e) = serve::register(&c.ctx.bridge) {
            fail = Some(e);
        }
    }
    let flavor = match memory {
        Memory::Program(_) => MPI_WIN_FLAVOR_CREATE,
        Memory::Own => MPI_WIN_FLAVOR_ALLOCATE,
        Memory::Group => MPI_WIN_FLAVOR_SHARED,
        Memory::Dynamic => MPI_WIN_FLAVOR_DYNAMIC,
    };
    if matches!(memory, Memory::Group) && fail.is_none() {
        base = targets[wc.rank() as usize].base;
    }
    let handle = if fail.is_none() && cma_ok {
        let obj = WinObj {
            comm: wc.clone(),
            world,
            labels: c.ctx.labels_of(&members),
            targets,
            flavor,
            size_attr: len as MPI_Aint,
            disp_attr: c_int::try_from(unit).unwrap_or(c_int::MAX),
            model_attr: MPI_WIN_UNIFIED,
            base,
            errhandler: AtomicUsize::new(MPI_ERRORS_ARE_FATAL),
            name: Mutex::new(String::new()),
            info: Mutex::new(info_entries),
            attrs: crate::comm::attr::Attrs::default(),
            epoch: Mutex::new(Epoch::default()),
            all_open: std::sync::atomic::AtomicBool::new(false),
            _own: own,
            id,
        };
        match WINS.insert(obj) {
            Some(h) => {
                serve::publish(id, h);
                Some(h)
            }
            None => {
                fail = Some(MpiError::invalid(MPI_ERR_NO_MEM, "too many windows"));
                None
            }
        }
    } else {
        None
    };
    let undo = || {
        if let Some(h) = handle {
            serve::forget(id);
            WINS.remove(h);
            crate::win::forget_window();
        }
    };
    // The verdict: 0 fine, 1 this rank failed, 2 cross-memory attach refused.
    let verdict = match (&fail, cma_ok) {
        (Some(_), _) => 1u8,
        (None, false) => 2,
        (None, true) => 0,
    };
    let verdicts = match wc.allgather_bytes(&[verdict]) {
        Ok(v) => v,
        Err(e) => {
            undo();
            return Err(e.into());
        }
    };
    if let Some(e) = fail {
        undo();
        return Err(e);
    }
    if let Some(r) = verdicts.iter().position(|v| v.first() == Some(&1)) {
        undo();
        return Err(MpiError::invalid(
            MPI_ERR_WIN,
            format!("{call}: rank {r} could not make its part of the window"),
        ));
    }
    if verdicts.iter().any(|v| v.first() == Some(&2)) {
        undo();
        return Err(MpiError::invalid(
            MPI_ERR_WIN,
            format!("{call}: the kernel refuses cross-memory attach between the ranks (a ptrace policy), which windows on the program's memory need; MPI_Win_allocate works without it"),
        ));
    }
    let h = handle
        .ok_or_else(|| MpiError::invalid(MPI_ERR_INTERN, format!("{call}: no window made")))?;
    Ok((h, base))
}

/// # Safety
/// `win` is writable; `baseptr` (when given) points to a `void *`.
unsafe fn made(
    r: Result<(MPI_Win, usize), MpiError>,
    comm_h: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
    call: &'static str,
) -> c_int {
    let r = r.and_then(|(h, base)| {
        if !baseptr.is_null() {
            // SAFETY: the caller's contract.
            unsafe { out(baseptr.cast::<usize>(), base, call) }?;
        }
        // SAFETY: the caller's contract.
        unsafe { out(win, h, call) }
    });
    on_comm(comm_h, r)
}

/// `MPI_Win_create`: a window on the program's memory (`size` bytes at `base`).
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_create(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { MPI_Win_create_c(base, size, disp_unit as MPI_Aint, info, comm, win) }
}

/// `MPI_Win_create_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_create_c(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    let call = "MPI_Win_create";
    let r = make(
        comm,
        size,
        disp_unit,
        info,
        Memory::Program(base as usize),
        call,
    );
    // SAFETY: the caller's contract.
    unsafe { made(r, comm, std::ptr::null_mut(), win, call) }
}

/// `MPI_Win_allocate`: a window on `size` new bytes in the shared heap.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_allocate(
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { MPI_Win_allocate_c(size, disp_unit as MPI_Aint, info, comm, baseptr, win) }
}

/// `MPI_Win_allocate_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_allocate_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    let call = "MPI_Win_allocate";
    let r = make(comm, size, disp_unit, info, Memory::Own, call);
    // SAFETY: the caller's contract.
    unsafe { made(r, comm, baseptr, win, call) }
}

/// `MPI_Win_allocate_shared`: one shared segment for the group, each rank's part
/// after the previous rank's.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_allocate_shared(
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { MPI_Win_allocate_shared_c(size, disp_unit as MPI_Aint, info, comm, baseptr, win) }
}

/// `MPI_Win_allocate_shared_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_allocate_shared_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    let call = "MPI_Win_allocate_shared";
    let r = make(comm, size, disp_unit, info, Memory::Group, call);
    // SAFETY: the caller's contract.
    unsafe { made(r, comm, baseptr, win, call) }
}

/// `MPI_Win_create_dynamic`: a window with no memory until regions are attached.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_create_dynamic(
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    let call = "MPI_Win_create_dynamic";
    let r = make(comm, 0, 1, info, Memory::Dynamic, call);
    // SAFETY: the caller's contract.
    unsafe { made(r, comm, std::ptr::null_mut(), win, call) }
}

/// `MPI_Win_attach`: makes `size` bytes at `base` reachable in a dynamic window.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_attach(
    win_h: MPI_Win,
    base: *mut c_void,
    size: MPI_Aint,
) -> c_int {
    let call = "MPI_Win_attach";
    let r = (|| {
        let w = win(win_h, call)?;
        if w.flavor != MPI_WIN_FLAVOR_DYNAMIC {
            return Err(MpiError::invalid(
                MPI_ERR_RMA_FLAVOR,
                format!("{call}: the window is not dynamic"),
            ));
        }
        let len = u64::try_from(size).map_err(|_| {
            MpiError::invalid(MPI_ERR_SIZE, format!("{call}: size {size} is negative"))
        })?;
        if len == 0 {
            return Ok(());
        }
        crate::datatype::byte_buffer(base as usize, len as usize, call, "base")?;
        let t = &w.targets[w.comm.rank() as usize];
        let attached = w.with_acc(t, || {
            Ok(t.ctl().is_some_and(|c| c.attach(base as u64, len)))
        })?;
        if !attached {
            return Err(MpiError::invalid(
                MPI_ERR_RMA_ATTACH,
                format!(
                    "{call}: {} regions are attached already (the most Spools keeps)",
                    crate::win::ctl::MAX_ATTACH
                ),
            ));
        }
        Ok(())
    })();
    on_win(win_h, r)
}

/// `MPI_Win_detach`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_detach(win_h: MPI_Win, base: *const c_void) -> c_int {
    let call = "MPI_Win_detach";
    let r = (|| {
        let w = win(win_h, call)?;
        if w.flavor != MPI_WIN_FLAVOR_DYNAMIC {
            return Err(MpiError::invalid(
                MPI_ERR_RMA_FLAVOR,
                format!("{call}: the window is not dynamic"),
            ));
        }
        let t = &w.targets[w.comm.rank() as usize];
        if !w.with_acc(t, || Ok(t.ctl().is_some_and(|c| c.detach(base as u64))))? {
            return Err(MpiError::invalid(
                MPI_ERR_RMA_ATTACH,
                format!("{call}: no region is attached at {base:p}"),
            ));
        }
        Ok(())
    })();
    on_win(win_h, r)
}

/// `MPI_Win_shared_query`: a rank's part of the window, as an address here (windows
/// in the shared heap: allocated or shared); size 0 and NULL for a window on the
/// program's memory.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_shared_query(
    win_h: MPI_Win,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: *mut c_int,
    baseptr: *mut c_void,
) -> c_int {
    let mut unit: MPI_Aint = 0;
    // SAFETY: the caller's contract.
    let rc = unsafe { MPI_Win_shared_query_c(win_h, rank, size, &mut unit, baseptr) };
    if rc == MPI_SUCCESS && !disp_unit.is_null() {
        // SAFETY: the caller's contract.
        unsafe { *disp_unit = c_int::try_from(unit).unwrap_or(c_int::MAX) };
    }
    rc
}

/// `MPI_Win_shared_query_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_shared_query_c(
    win_h: MPI_Win,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: *mut MPI_Aint,
    baseptr: *mut c_void,
) -> c_int {
    let call = "MPI_Win_shared_query";
    let r = (|| {
        let w = win(win_h, call)?;
        let shared = matches!(w.flavor, MPI_WIN_FLAVOR_SHARED | MPI_WIN_FLAVOR_ALLOCATE);
        let t = if rank == MPI_PROC_NULL {
            // The lowest rank with memory.
            w.targets
                .iter()
                .find(|t| t.len > 0)
                .or_else(|| w.targets.first())
        } else {
            Some(w.target(rank, call)?)
        };
        let (len, unit, addr) = match t {
            // A rank with no memory has no base (NULL, as MPICH gives).
            Some(t) if shared && !t.remote() && t.len > 0 => (t.len, t.disp_unit, t.base),
            Some(t) => (0, t.disp_unit, 0),
            None => (0, 1, 0),
        };
        // SAFETY: the caller's contract.
        unsafe {
            out(size, len as MPI_Aint, call)?;
            out(disp_unit, unit as MPI_Aint, call)?;
            out(baseptr.cast::<usize>(), addr, call)
        }
    })();
    on_win(win_h, r)
}

/// `MPI_Win_free` (collective): waits until every rank is done with the window, then
/// frees it.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_free(win_h: *mut MPI_Win) -> c_int {
    let call = "MPI_Win_free";
    if win_h.is_null() {
        return crate::env::errhandler::on_self(Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: NULL window"),
        )));
    }
    // SAFETY: non-NULL (the caller's contract).
    let h = unsafe { *win_h };
    let r = (|| {
        let w = win(h, call)?;
        let open = {
            let e = w.epoch();
            !e.locks.is_empty() || e.access.is_some() || e.exposure.is_some()
        };
        // Every rank says whether it may free (the step doubles as the barrier that keeps
        // the memory until every rank is done with it): all free, or none.
        let all = w.comm.allgather_bytes(&[u8::from(open)])?;
        if open {
            return Err(MpiError::invalid(
                MPI_ERR_RMA_SYNC,
                format!(
                    "{call}: an epoch is still open on the window (unlock, complete or wait first)"
                ),
            ));
        }
        if let Some(r) = all.iter().position(|b| b.first() == Some(&1)) {
            return Err(MpiError::invalid(
                MPI_ERR_RMA_SYNC,
                format!("{call}: rank {r} still has an epoch open on the window"),
            ));
        }
        crate::comm::attr::delete_all(h, &w.attrs)?;
        serve::forget(w.id);
        WINS.remove(h);
        crate::win::forget_window();
        Ok(())
    })();
    let rc = on_win(h, r);
    if rc == MPI_SUCCESS {
        // SAFETY: as above.
        unsafe { *win_h = MPI_WIN_NULL };
    }
    rc
}
