//! Communicators: the objects behind `MPI_Comm` handles, and the calls that make, name,
//! compare and free them.

mod agree;
pub(crate) mod attr;
pub(crate) mod attrmap;
pub(crate) mod context;
pub(crate) mod group;
pub(crate) mod inter;
mod jobs;
pub(crate) mod newjob;
mod obj;
pub(crate) mod port;
pub(crate) mod spawn;
pub(crate) mod table;
pub(crate) mod topo;
mod worlds;

pub(crate) use jobs::{by_id, holding, world_of};
pub(crate) use obj::{make_inter, CommObj, Topo};
pub(crate) use table::{comm, comm_ref, errhandler_of, insert, insert_child, remove, CommRef};
pub(crate) use worlds::{Key, WorldCtx, Worlds, APPNUM_VAR, PARENTS_VAR};

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use crate::abi::*;
use crate::env::errhandler::on_comm;
use crate::env::error::{put_string, valid_errhandler, MpiError};
use crate::out::out;
use crate::runtime::rt;

/// `MPI_Comm_rank`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_rank(comm: MPI_Comm, rank: *mut c_int) -> c_int {
    let r = self::comm(comm, "MPI_Comm_rank")
        // SAFETY: the caller's contract.
        .and_then(|c| unsafe { out(rank, c.local_rank() as c_int, "MPI_Comm_rank") });
    on_comm(comm, r)
}

/// `MPI_Comm_size`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
    let r = self::comm(comm, "MPI_Comm_size")
        // SAFETY: the caller's contract.
        .and_then(|c| unsafe { out(size, c.local_size() as c_int, "MPI_Comm_size") });
    on_comm(comm, r)
}

/// `MPI_Comm_dup`: collective; a communicator of the same ranks with a new context.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
    // SAFETY: the caller's contract.
    on_comm(comm, unsafe {
        dup(comm, MPI_INFO_NULL, newcomm, "MPI_Comm_dup")
    })
}

/// A dup with the attributes copied and, for `info`, the hints it gives (else the old
/// communicator's).
///
/// # Safety
/// `newcomm` is NULL or writable.
unsafe fn dup(
    comm: MPI_Comm,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let r = (|| {
        let c = self::comm(comm, call)?;
        let hints = hints_for(&c, info)?;
        let obj = match &c.inter {
            Some(_) => crate::comm::inter::dup(&c)?,
            None => c.child(c.comm.dup()?),
        };
        // SAFETY: the caller's contract.
        unsafe { dup_done(comm, &c, obj, hints, newcomm, call) }
    })();
    if r.is_err() && !newcomm.is_null() {
        // MPI: a dup that fails (an attribute's copy callback, say) gives
        // MPI_COMM_NULL.
        // SAFETY: non-NULL and writable (the caller's contract).
        unsafe { *newcomm = MPI_COMM_NULL };
    }
    r
}

/// The hints of a dup: `info`'s, or for `MPI_INFO_NULL` the old communicator's.
fn hints_for(c: &CommObj, info: MPI_Info) -> Result<Vec<(String, String)>, MpiError> {
    if info == MPI_INFO_NULL {
        Ok(c.info
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone())
    } else {
        Ok(crate::env::info::standard(
            crate::env::info::entries(info)?,
            &[],
        ))
    }
}

/// The end of a dup of `c` (handle `comm`): `obj` gets the hints, the topology and the
/// attributes, and its handle goes to `newcomm`.
///
/// # Safety
/// `newcomm` is NULL or writable.
unsafe fn dup_done(
    comm: MPI_Comm,
    c: &CommObj,
    obj: CommObj,
    hints: Vec<(String, String)>,
    newcomm: *mut MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    *obj.info.lock().unwrap_or_else(PoisonError::into_inner) = hints;
    *obj.topo.lock().unwrap_or_else(PoisonError::into_inner) = c
        .topo
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    crate::comm::attr::copy_all(comm, &c.attrs, &obj.attrs)?;
    let h = insert(obj)?;
    // SAFETY: the caller's contract.
    unsafe { out(newcomm, h, call) }
}

/// A non-blocking dup in flight: the communicator is made, and its handle written,
/// when its leader's context arrives (`spools::DupRequest`; an intercommunicator's two
/// contexts, from the rank 0 of its union).
struct IdupOp {
    req: Idup,
    comm: MPI_Comm,
    parent: Arc<CommObj>,
    hints: Vec<(String, String)>,
    /// The program's `newcomm`, written at completion (it must stay valid until then,
    /// as a non-blocking call's buffers do).
    newcomm: usize,
}

/// What a non-blocking dup waits for.
enum Idup {
    Intra(spools::DupRequest),
    Inter([spools::DupRequest; 2]),
}

impl crate::p2p::request::CollOp for IdupOp {
    fn poll(&mut self) -> Result<bool, MpiError> {
        Ok(match &self.req {
            Idup::Intra(r) => r.test(),
            Idup::Inter([a, b]) => a.test() & b.test(),
        })
    }

    fn finish(self: Box<Self>) -> Result<(), MpiError> {
        let this = *self;
        let made = match this.req {
            Idup::Intra(r) => r
                .wait()
                .map(|c| this.parent.child(c))
                .map_err(MpiError::from),
            Idup::Inter(rs) => crate::comm::inter::idup_done(&this.parent, rs),
        };
        let obj = match made {
            Ok(obj) => obj,
            Err(e) => {
                // A dup that failed gives MPI_COMM_NULL, as the blocking one does.
                // SAFETY: `newcomm` is the program's, valid until the request completes.
                unsafe { *(this.newcomm as *mut MPI_Comm) = MPI_COMM_NULL };
                return Err(e);
            }
        };
        // SAFETY: `newcomm` is the program's, valid until the request completes.
        unsafe {
            dup_done(
                this.comm,
                &this.parent,
                obj,
                this.hints,
                this.newcomm as *mut MPI_Comm,
                "MPI_Comm_idup",
            )
        }
    }
}

/// `MPI_Comm_dup_with_info`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_dup_with_info(
    comm: MPI_Comm,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
) -> c_int {
    // SAFETY: the caller's contract.
    on_comm(comm, unsafe {
        dup(comm, info, newcomm, "MPI_Comm_dup_with_info")
    })
}

/// A communicator of the same members as another, being made without blocking, for the
/// library's own use (a persistent collective's): no attributes, no hints, the same
/// topology and error handler.
pub(crate) struct PrivateDup {
    req: Idup,
    parent: Arc<CommObj>,
}

impl PrivateDup {
    /// Starts the dup of `c` (collective over `c`, in its members' order of calls).
    pub(crate) fn start(c: &Arc<CommObj>) -> Result<PrivateDup, MpiError> {
        let req = match &c.inter {
            Some(_) => Idup::Inter(crate::comm::inter::idup(c)?),
            None => Idup::Intra(c.comm.idup()?),
        };
        Ok(PrivateDup {
            req,
            parent: c.clone(),
        })
    }

    /// Waits for it; the new communicator's handle (freed with [`remove`]).
    pub(crate) fn finish(self) -> Result<MPI_Comm, MpiError> {
        let obj = match self.req {
            Idup::Intra(r) => self.parent.child(r.wait()?),
            Idup::Inter(rs) => crate::comm::inter::idup_done(&self.parent, rs)?,
        };
        *obj.topo.lock().unwrap_or_else(PoisonError::into_inner) = self
            .parent
            .topo
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        insert(obj)
    }
}

/// `MPI_Comm_idup`: collective, non-blocking; `newcomm` is written when the request
/// completes. Among ranks of one communicator the context comes from one broadcast of
/// its rank 0 (`spools::Communicator::idup`; an intercommunicator's two from its union's
/// rank 0), so a rank may start dups of overlapping communicators, and block in other
/// calls, before any completes.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_idup(
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { MPI_Comm_idup_with_info(comm, MPI_INFO_NULL, newcomm, request) }
}

/// `MPI_Comm_idup_with_info`: as `MPI_Comm_idup`, with `info`'s hints.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_idup_with_info(
    comm: MPI_Comm,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let call = "MPI_Comm_idup";
    let r = (|| {
        let c = self::comm(comm, call)?;
        if newcomm.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Comm_idup: newcomm is NULL",
            ));
        }
        let hints = hints_for(&c, info)?;
        let req = match &c.inter {
            Some(_) => Idup::Inter(crate::comm::inter::idup(&c)?),
            None => Idup::Intra(c.comm.idup()?),
        };
        let op = crate::p2p::request::Op::Coll(Box::new(IdupOp {
            req,
            comm,
            parent: c,
            hints,
            newcomm: newcomm as usize,
        }));
        let h = crate::p2p::request::give(op, comm)?;
        // SAFETY: the caller's contract.
        unsafe { out(request, h, call) }
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_set_info`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_set_info(comm: MPI_Comm, info: MPI_Info) -> c_int {
    let r = (|| {
        let c = self::comm(comm, "MPI_Comm_set_info")?;
        let e = crate::env::info::standard(crate::env::info::entries(info)?, &[]);
        *c.info.lock().unwrap_or_else(PoisonError::into_inner) = e;
        Ok(())
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_get_info`: a new info object of the hints in use.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_info(comm: MPI_Comm, info_used: *mut MPI_Info) -> c_int {
    let r = (|| {
        let c = self::comm(comm, "MPI_Comm_get_info")?;
        let e = c
            .info
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // SAFETY: the caller's contract.
        unsafe { out(info_used, crate::env::info::make(e)?, "MPI_Comm_get_info") }
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_split`: collective; ranks of one `color` form a communicator, ordered by
/// `key` then by their rank here; `MPI_UNDEFINED` gets `MPI_COMM_NULL`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_split(
    comm: MPI_Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        let c = self::comm(comm, "MPI_Comm_split")?;
        let col = match color {
            MPI_UNDEFINED => None,
            c if c >= 0 => Some(c as u32),
            c => {
                return Err(MpiError::invalid(
                    MPI_ERR_ARG,
                    format!("MPI_Comm_split: color {c} is negative (0 or more, or MPI_UNDEFINED)"),
                ))
            }
        };
        let h = if c.inter.is_some() {
            crate::comm::inter::split(&c, col, key)?
        } else {
            match c.comm.split(col, key)? {
                Some(s) => insert(c.child(s))?,
                None => MPI_COMM_NULL,
            }
        };
        // SAFETY: the caller's contract.
        unsafe { out(newcomm, h, "MPI_Comm_split") }
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_split_type`: `MPI_COMM_TYPE_SHARED` groups the ranks of each host; other
/// types give each rank a communicator of its own host too (the finest level Spools
/// knows); `MPI_UNDEFINED` gives `MPI_COMM_NULL`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_split_type(
    comm: MPI_Comm,
    split_type: c_int,
    key: c_int,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        let c = self::comm(comm, "MPI_Comm_split_type")?;
        let hints = crate::env::info::entries(info)?;
        let hint = |k: &str| {
            hints
                .iter()
                .find(|(kk, _)| kk == k)
                .map(|(_, v)| v.as_str())
        };
        // The host of a rank: the lowest communicator rank on the same host (of both
        // groups, for an intercommunicator).
        let all = c.inter.as_ref().map_or(&c.comm, |i| &i.union);
        let host = (0..all.size())
            .find(|&r| all.same_host(r))
            .unwrap_or_else(|| all.rank());
        let color = match split_type {
            MPI_COMM_TYPE_SHARED => Some(host),
            // The one hardware level Spools knows: shared memory (a host).
            MPI_COMM_TYPE_HW_GUIDED => {
                (hint("mpi_hw_resource_type") == Some("mpi_shared_memory")).then_some(host)
            }
            // No level strictly below the communicator that Spools knows of.
            MPI_COMM_TYPE_HW_UNGUIDED => None,
            MPI_COMM_TYPE_RESOURCE_GUIDED => match hint("mpi_pset_name")
                .map(str::to_lowercase)
                .as_deref()
            {
                Some("mpi://world") => Some(0),
                Some("mpi://self") => Some(c.comm.rank()),
                _ => (hint("mpi_hw_resource_type") == Some("mpi_shared_memory")).then_some(host),
            },
            _ => None,
        };
        let h = if c.inter.is_some() {
            crate::comm::inter::split(&c, color, key)?
        } else {
            match c.comm.split(color, key)? {
                Some(s) => insert(c.child(s))?,
                None => MPI_COMM_NULL,
            }
        };
        // SAFETY: the caller's contract.
        unsafe { out(newcomm, h, "MPI_Comm_split_type") }
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_free`: frees a communicator the program made; sets the handle to
/// `MPI_COMM_NULL`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_free(comm: *mut MPI_Comm) -> c_int {
    let h = if comm.is_null() {
        MPI_COMM_NULL
    } else {
        // SAFETY: non-NULL (the caller's contract).
        unsafe { *comm }
    };
    let r = (|| {
        rt("MPI_Comm_free")?;
        if matches!(h, MPI_COMM_WORLD | MPI_COMM_SELF) {
            return Err(MpiError::invalid(
                MPI_ERR_COMM,
                "MPI_Comm_free: MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed",
            ));
        }
        let c = table::made(h)?;
        crate::comm::attr::delete_all(h, &c.attrs)?;
        table::remove(h);
        // A spawned process's link to its parents: MPI_Comm_get_parent says no more.
        let _ = rt("MPI_Comm_free")?.parent.compare_exchange(
            h,
            MPI_COMM_NULL,
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
        );
        // SAFETY: non-NULL: the handle was read from it above.
        unsafe { *comm = MPI_COMM_NULL };
        Ok(())
    })();
    on_comm(h, r)
}

/// How two lists of job ranks compare as groups: `MPI_IDENT` for the same ranks in the
/// same order, `MPI_SIMILAR` for the same ranks in another order, `MPI_UNEQUAL`
/// otherwise.
fn compare_ranks(a: &[u32], b: &[u32]) -> c_int {
    if a == b {
        return MPI_IDENT;
    }
    let (mut sa, mut sb) = (a.to_vec(), b.to_vec());
    sa.sort_unstable();
    sb.sort_unstable();
    if sa == sb {
        MPI_SIMILAR
    } else {
        MPI_UNEQUAL
    }
}

/// `MPI_Comm_compare`: `MPI_IDENT` for the same communicator, `MPI_CONGRUENT` for the
/// same ranks in the same order, `MPI_SIMILAR` for the same ranks in another order,
/// `MPI_UNEQUAL` otherwise. Intercommunicators compare their local groups and their
/// remote groups apart, as the standard says: congruent when both pairs are the same
/// ranks in the same order, similar when both pairs are the same ranks, else unequal
/// (an intercommunicator and an intracommunicator are unequal).
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_compare(
    comm1: MPI_Comm,
    comm2: MPI_Comm,
    result: *mut c_int,
) -> c_int {
    let r = (|| {
        let a = self::comm(comm1, "MPI_Comm_compare")?;
        let b = self::comm(comm2, "MPI_Comm_compare")?;
        // Labels, not job ranks: the two may live in different jobs (`worlds.rs`).
        let ranks = |o: &CommObj| -> Result<Vec<u32>, MpiError> {
            let c = &o.comm;
            (0..c.size())
                .map(|r| {
                    c.job_rank(r)
                        .map(|j| o.ctx.label(j))
                        .map_err(MpiError::from)
                })
                .collect()
        };
        let groups = match (&a.inter, &b.inter) {
            (None, None) => Some(compare_ranks(&ranks(&a)?, &ranks(&b)?)),
            (Some(x), Some(y)) => Some(
                compare_ranks(&a.ctx.labels_of(&x.local), &b.ctx.labels_of(&y.local)).max(
                    compare_ranks(&a.ctx.labels_of(&x.remote), &b.ctx.labels_of(&y.remote)),
                ),
            ),
            _ => None,
        };
        let v = if Arc::ptr_eq(&a, &b) {
            MPI_IDENT
        } else {
            match groups {
                Some(MPI_IDENT) => MPI_CONGRUENT,
                Some(MPI_SIMILAR) => MPI_SIMILAR,
                _ => MPI_UNEQUAL,
            }
        };
        // SAFETY: the caller's contract.
        unsafe { out(result, v, "MPI_Comm_compare") }
    })();
    on_comm(comm1, r)
}

/// `MPI_Comm_set_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_set_errhandler(
    comm: MPI_Comm,
    errhandler: MPI_Errhandler,
) -> c_int {
    let r = (|| {
        let c = self::comm(comm, "MPI_Comm_set_errhandler")?;
        if !valid_errhandler(errhandler) {
            return Err(MpiError::Handle {
                class: MPI_ERR_ERRHANDLER,
                what: "error handler",
                handle: errhandler,
            });
        }
        c.errhandler.store(errhandler, Ordering::Relaxed);
        if comm == MPI_COMM_SELF {
            crate::env::errhandler::self_handler_set();
        }
        Ok(())
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_get_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_errhandler(
    comm: MPI_Comm,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let r = self::comm(comm, "MPI_Comm_get_errhandler").and_then(|c| {
        // SAFETY: the caller's contract.
        unsafe {
            out(
                errhandler,
                c.errhandler.load(Ordering::Relaxed),
                "MPI_Comm_get_errhandler",
            )
        }
    });
    on_comm(comm, r)
}

/// `MPI_Comm_call_errhandler`: reports `errorcode` on `comm` as an error of a call.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_call_errhandler(comm: MPI_Comm, errorcode: c_int) -> c_int {
    let msg = format!("MPI_Comm_call_errhandler with error code {errorcode}");
    match errhandler_of(comm) {
        MPI_ERRORS_RETURN => MPI_SUCCESS,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => crate::runtime::fatal(&msg, errorcode),
        h => {
            if let Some(f) = crate::env::error::ERRHANDLERS.get(h) {
                let (mut c, mut code) = (comm, errorcode);
                // SAFETY: a user function of the standard's errhandler type; pointers
                // to locals that live for the call.
                unsafe { f(&mut c, &mut code) };
            }
            MPI_SUCCESS
        }
    }
}

/// `MPI_Comm_set_name`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_set_name(comm: MPI_Comm, comm_name: *const c_char) -> c_int {
    let r = (|| {
        let c = self::comm(comm, "MPI_Comm_set_name")?;
        if comm_name.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Comm_set_name: NULL name",
            ));
        }
        // SAFETY: a NUL-terminated string (the caller's contract).
        let s = unsafe { CStr::from_ptr(comm_name) }.to_string_lossy();
        let max = MPI_MAX_OBJECT_NAME as usize - 1;
        *c.name.lock().unwrap_or_else(PoisonError::into_inner) = s.chars().take(max).collect();
        Ok(())
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_get_name`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_name(
    comm: MPI_Comm,
    comm_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    if comm == MPI_COMM_NULL {
        // SAFETY: the standard's contract: MPI_MAX_OBJECT_NAME bytes.
        unsafe {
            put_string(
                "MPI_COMM_NULL",
                comm_name,
                MPI_MAX_OBJECT_NAME as usize,
                resultlen,
            )
        };
        return MPI_SUCCESS;
    }
    let r = self::comm(comm, "MPI_Comm_get_name").map(|c| {
        let n = c
            .name
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // SAFETY: the standard's contract: MPI_MAX_OBJECT_NAME bytes.
        unsafe { put_string(&n, comm_name, MPI_MAX_OBJECT_NAME as usize, resultlen) };
    });
    on_comm(comm, r)
}

/// `MPI_Comm_create_group`: called by the group's members only (a subset of `comm`'s,
/// which agree on the new context through the runtime's bridge with `tag`: `context.rs`);
/// `MPI_COMM_NULL` for a process outside the group.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_create_group(
    comm: MPI_Comm,
    group: MPI_Group,
    tag: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        let call = "MPI_Comm_create_group";
        let c = self::comm(comm, call)?;
        if c.inter.is_some() {
            return Err(MpiError::invalid(
                MPI_ERR_COMM,
                format!("{call}: not defined on an intercommunicator here"),
            ));
        }
        let tag = crate::p2p::send_tag(tag, call)?;
        let g = crate::comm::group::members_of(group)?;
        let all = crate::comm::group::members(&c)?;
        let jobs: Vec<u32> = match g
            .iter()
            .map(|&x| c.ctx.job_of(x).filter(|j| all.contains(j)).ok_or(x))
            .collect::<Result<_, _>>()
        {
            Ok(j) => j,
            Err(x) => {
                return Err(MpiError::invalid(
                    MPI_ERR_GROUP,
                    format!("{call}: process {x} of the group is not in the communicator"),
                ))
            }
        };
        let h = if jobs.contains(&c.ctx.me) {
            let ctx = crate::comm::context::agree(&c.ctx, &jobs, 0, tag, None, 1)?;
            insert(c.child(c.ctx.bridge.with_context(ctx, jobs)?))?
        } else {
            MPI_COMM_NULL
        };
        // SAFETY: the caller's contract.
        unsafe { out(newcomm, h, call) }
    })();
    on_comm(comm, r)
}
