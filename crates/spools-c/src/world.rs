//! The world: joining the job, leaving it, and what it says about the job.

use std::ffi::c_char;
use std::sync::atomic::{AtomicBool, Ordering};

use spools::{Endpoint, World};

use crate::args::{give_string, handle, out, string, Handle};
use crate::comm::spools_comm_t;
use crate::status::{guard, spools_status_t, Failure};
use crate::version;

/// This process's place in a job (`spools_init()` to `spools_finalize()` or
/// `spools_abort()`): rank, size, hosts, the world communicator, active messages,
/// regions, parallel I/O.
pub struct spools_world_t {
    magic: u64,
    pub(crate) world: World,
    /// The world communicator's handle, owned by the world.
    pub(crate) comm: spools_comm_t,
}

impl Handle for spools_world_t {
    const MAGIC: u64 = 0x5350_4f4f_4c57_4f52;
    const NAME: &'static str = "spools_world_t";
    fn magic(&self) -> u64 {
        self.magic
    }
}

impl spools_world_t {
    /// Runs `f` with the world's endpoint (active messages, puts and gets of all
    /// threads go out through it, one at a time).
    pub(crate) fn with_endpoint<R>(
        &self,
        f: impl FnOnce(&mut Endpoint) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        f(&mut self.world.lock_endpoint())
    }

    fn close(mut self: Box<Self>) -> World {
        self.magic = 0;
        self.comm.retire();
        self.world
    }
}

/// `spools_init_params_t.field_mask` bit: `api_major` and `api_minor` are set, and
/// `spools_init()` checks them with `spools_check_version()`.
pub const SPOOLS_INIT_FIELD_API_VERSION: u64 = 1;

/// Parameters of `spools_init()`. Only the fields whose bit is set in `field_mask` are
/// read, so a program built against an older header (which knows fewer fields) passes a
/// smaller mask and keeps working. Start from `SPOOLS_INIT_PARAMS_DEFAULT`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct spools_init_params_t {
    /// Which of the fields below are set (`SPOOLS_INIT_FIELD_*` bits).
    pub field_mask: u64,
    /// The header's `SPOOLS_VERSION_MAJOR` (with `SPOOLS_INIT_FIELD_API_VERSION`).
    pub api_major: u32,
    /// The header's `SPOOLS_VERSION_MINOR` (with `SPOOLS_INIT_FIELD_API_VERSION`).
    pub api_minor: u32,
}

static STARTED: AtomicBool = AtomicBool::new(false);

/// Joins the job this process belongs to (started by `spools run`, `mpirun`, `srun` or
/// alone as a job of one rank) and gives its world. Every rank calls it once; a second
/// call in one process (also after `spools_finalize()`) is `SPOOLS_ERR_INVALID_ARG`.
/// Configuration comes from the `SPOOLS_*` variables (`spools info` lists them).
///
/// Thread safety: once per process, from any thread.
///
/// ```c
/// spools_init_params_t params = SPOOLS_INIT_PARAMS_DEFAULT;
/// spools_world_t *world;
/// if (spools_init(&params, &world) != SPOOLS_OK) {
///     fprintf(stderr, "%s\n", spools_last_error_message());
///     return 1;
/// }
/// ```
///
/// Errors: `SPOOLS_ERR_VERSION` (the library is older than the header),
/// `SPOOLS_ERR_INIT` (no job to join, a rendezvous that does not answer, transports
/// that cannot start), `SPOOLS_ERR_INVALID_ARG`.
///
/// # Safety
/// `params` is NULL (defaults, no version check) or points to a `spools_init_params_t`;
/// `world` points to writable memory for a pointer.
#[no_mangle]
pub unsafe extern "C" fn spools_init(
    params: *const spools_init_params_t,
    world: *mut *mut spools_world_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let world = unsafe { out(world, "world") }?;
        if !params.is_null() {
            // SAFETY: non-NULL: points to the parameters (the caller's contract).
            let p = unsafe { &*params };
            if p.field_mask & SPOOLS_INIT_FIELD_API_VERSION != 0 {
                version::check(p.api_major, p.api_minor)?;
            }
        }
        if STARTED.swap(true, Ordering::SeqCst) {
            return Err(Failure::arg(
                "spools_init was already called in this process (Spools joins a job once per \
                 process)",
            ));
        }
        let w = spools::init()?;
        let comm = spools_comm_t::borrowed(w.communicator().clone());
        *world = Box::into_raw(Box::new(spools_world_t {
            magic: spools_world_t::MAGIC,
            world: w,
            comm,
        }));
        Ok(())
    })
}

/// Leaves the job and frees the world: waits until every rank has finalised (or ends
/// the job if a rank died). Handles made from the world (communicators, regions, pipes,
/// requests) must be destroyed first; the world's own communicator goes with it.
///
/// Thread safety: once, when no other thread uses the world.
///
/// Errors: `SPOOLS_ERR_PEER_GONE` (a rank died first), `SPOOLS_ERR_INVALID_ARG`.
///
/// # Safety
/// `world` is NULL or a world from `spools_init()` not yet finalised or aborted.
#[no_mangle]
pub unsafe extern "C" fn spools_finalize(world: *mut spools_world_t) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe { handle(world) }?;
        // SAFETY: a live world, made by `Box::into_raw` in `spools_init`.
        let w = unsafe { Box::from_raw(world) };
        w.close().finalize()?;
        Ok(())
    })
}

/// Ends the whole job because of a failure on this rank: every other rank's pending and
/// later calls fail with `SPOOLS_ERR_PEER_GONE` and a message naming this rank and
/// `cause`, and the launcher stops the job. Frees the world; the process should exit
/// with a non-zero status soon after.
///
/// Thread safety: any thread, once.
///
/// # Safety
/// `world` is NULL or a live world; `cause` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn spools_abort(
    world: *mut spools_world_t,
    cause: *const c_char,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe { handle(world) }?;
        let cause = if cause.is_null() {
            "spools_abort".to_string()
        } else {
            // SAFETY: non-NULL and NUL-terminated (the caller's contract).
            unsafe { string(cause, "cause") }
                .map(str::to_string)
                .unwrap_or_else(|_| "spools_abort (cause not UTF-8)".into())
        };
        // SAFETY: a live world, made by `Box::into_raw` in `spools_init`.
        let w = unsafe { Box::from_raw(world) };
        w.close().abort(&cause);
        Ok(())
    })
}

/// This rank's number in the job (0 to size - 1).
///
/// Thread safety: any thread.
///
/// # Safety
/// `world` is NULL or a live world; `rank` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_world_rank(
    world: *const spools_world_t,
    rank: *mut u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        *unsafe { out(rank, "rank") }? = w.world.rank();
        Ok(())
    })
}

/// The number of ranks in the job.
///
/// Thread safety: any thread.
///
/// # Safety
/// `world` is NULL or a live world; `size` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_world_size(
    world: *const spools_world_t,
    size: *mut u32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        *unsafe { out(size, "size") }? = w.world.size();
        Ok(())
    })
}

/// Whether job rank `rank` runs on this rank's host (1) or not (0).
///
/// Thread safety: any thread.
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` for a rank outside the job.
///
/// # Safety
/// `world` is NULL or a live world; `same` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_world_same_host(
    world: *const spools_world_t,
    rank: u32,
    same: *mut i32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        let same = unsafe { out(same, "same") }?;
        if rank >= w.world.size() {
            return Err(Failure::arg(format!(
                "rank {rank} is not in this job of {} ranks",
                w.world.size()
            )));
        }
        *same = i32::from(w.world.same_host(rank));
        Ok(())
    })
}

/// The world communicator (all ranks, in job order). It belongs to the world: do not
/// destroy it; it is valid until `spools_finalize()`.
///
/// Thread safety: any thread.
///
/// # Safety
/// `world` is NULL or a live world; `comm` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_world_comm(
    world: *mut spools_world_t,
    comm: *mut *mut spools_comm_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        // SAFETY: the caller's contract.
        *unsafe { out(comm, "comm") }? = std::ptr::from_ref(&w.comm).cast_mut();
        Ok(())
    })
}

/// The effective configuration, as the TOML that `spools info` prints (one `key =
/// value` line each) followed by `bootstrap = "..."`: copied with a NUL into `buf` of
/// `cap` bytes, with the bytes it takes in `needed`. With a NULL world, the
/// configuration the environment gives (before `spools_init()`).
///
/// Thread safety: any thread.
///
/// Errors: `SPOOLS_ERR_TRUNCATED` when `cap < *needed` (nothing written; call again
/// with a larger buffer), `SPOOLS_ERR_INVALID_ARG` for a bad `SPOOLS_*` variable.
///
/// # Safety
/// `world` is NULL or a live world; `buf` is NULL or `cap` writable bytes; `needed` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn spools_config_string(
    world: *const spools_world_t,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> spools_status_t {
    guard(|| {
        let text = if world.is_null() {
            let c = spools::Config::load().map_err(|e| Failure::arg(crate::status::chain(&e)))?;
            format!("{c}\n")
        } else {
            // SAFETY: the caller's contract.
            let w = unsafe { handle(world) }?;
            format!(
                "{}\nbootstrap = \"{}\"\n",
                w.world.worker().config(),
                w.world.bootstrap()
            )
        };
        // SAFETY: the caller's contract.
        unsafe { give_string(&text, buf, cap, needed) }
    })
}
