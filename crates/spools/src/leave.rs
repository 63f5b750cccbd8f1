//! How a rank leaves the job when its [`World`](crate::World) is dropped rather than
//! finalised: the contract for a rank that fails.
//!
//! - A `World` dropped while the thread panics ends the job at once: the server tells
//!   every other rank that this one panicked, and their pending operations fail naming
//!   it.
//! - A `World` dropped otherwise (the end of `main`, or an early return with an error)
//!   leaves the rest to the process's exit (until then it is still in the job). There,
//!   with exit status 0, the rank announces that it finalises and waits for every rank to
//!   finalise, serving its peers meanwhile (a clean end); ranks waiting in a collective it
//!   never started then fail, naming it. With any other status it ends the job at once,
//!   and the other ranks' pending operations fail with an error naming it and its exit
//!   status. So `fn main() -> Result<..>` that returns an error prints that error once
//!   (Rust does, after the drop) and the job ends.
//!
//! The exit status is known only to the C library's `on_exit` hook (glibc). Elsewhere a
//! dropped `World` waits for the other ranks in the drop, as an explicit
//! [`World::finalize`](crate::World::finalize) does.

use std::sync::{Arc, Mutex, PoisonError};

use spools_am::Worker;
use spools_boot::client::Bootstrap;
use spools_msg::Communicator;

/// What a dropped `World` leaves for the exit hook: the bootstrap, the collectives it
/// started (per communicator context), and the layers that serve peers while the rank
/// waits (the messaging engine finishes orphaned sends).
struct Deferred {
    boot: Arc<Bootstrap>,
    /// Collectives started per context, and tagged messages sent per peer.
    counts: Counts,
    layers: (Worker, Vec<Communicator>),
}

/// (collectives started per context, tagged messages sent per peer), as
/// [`Bootstrap::announce_finalize`] takes them.
pub(crate) type Counts = (Vec<(u32, u32)>, Vec<(u32, u64)>);

static DEFERRED: Mutex<Option<Deferred>> = Mutex::new(None);

/// Ends the job on behalf of a rank whose thread panicked while it held its `World`.
pub(crate) fn on_panic(boot: &Bootstrap) {
    boot.abort("it panicked (its own output has the panic message)");
}

/// Leaves the job for a `World` dropped without `finalize`: at process exit, announce and
/// wait for the others (status 0) or end the job (any other status); see the module
/// documentation. The announcement waits for the exit status so that the other ranks
/// hear of a failure as such, not as a rank that finalised early.
pub(crate) fn on_drop(boot: Arc<Bootstrap>, counts: Counts, layers: (Worker, Vec<Communicator>)) {
    if !exit_hook::install() {
        // No exit hook on this platform: finalise here.
        if let Err(e) = boot
            .announce_finalize(counts.0, counts.1)
            .and_then(|()| boot.wait_finalized())
        {
            spools_boot::logger::error(format_args!(
                "spools: rank {}: finalize failed: {e}",
                boot.rank()
            ));
        }
        return;
    }
    let earlier = DEFERRED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .replace(Deferred {
            boot,
            counts,
            layers,
        });
    // A process that made and dropped another job's `World` before (one-rank jobs in a
    // test harness): that process lived on, so that job ends cleanly now.
    if let Some(d) = earlier {
        finish_cleanly(&d);
    }
}

/// Announces that the rank finalises and waits for every rank (a clean end).
fn finish_cleanly(d: &Deferred) {
    // The messages sent are counted now, at the announcement: a communicator the
    // program still holds may have sent more since the `World` was dropped.
    let sent = d
        .layers
        .1
        .first()
        .map_or_else(|| d.counts.1.clone(), Communicator::messages_sent);
    if let Err(e) = d
        .boot
        .announce_finalize(d.counts.0.clone(), sent)
        .and_then(|()| d.boot.wait_finalized())
    {
        spools_boot::logger::error(format_args!(
            "spools: rank {}: finalize failed: {e}",
            d.boot.rank()
        ));
    }
}

/// Runs at process exit with the exit status.
fn at_exit(status: i32) {
    let Some(d) = DEFERRED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    else {
        return;
    };
    if status == 0 {
        finish_cleanly(&d);
    } else {
        d.boot.abort(&format!(
            "it exited with status {status}; its own output says why"
        ));
    }
    // The process is ending: nothing to tear down (threads and mappings go with it).
    std::mem::forget(d);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod exit_hook {
    use std::ffi::{c_int, c_void};
    use std::sync::OnceLock;

    extern "C" {
        /// glibc: registers `function` to run at `exit`, with the exit status.
        fn on_exit(function: extern "C" fn(c_int, *mut c_void), arg: *mut c_void) -> c_int;
    }

    extern "C" fn hook(status: c_int, _arg: *mut c_void) {
        // A panic must not unwind into the C library.
        let _ = std::panic::catch_unwind(|| super::at_exit(status));
    }

    /// Installs the exit hook once; whether it is installed.
    pub(super) fn install() -> bool {
        static INSTALLED: OnceLock<bool> = OnceLock::new();
        // SAFETY: `hook` is a plain function valid for the whole process and takes no
        // argument pointer; `on_exit` only records it (once, thanks to the `OnceLock`).
        *INSTALLED.get_or_init(|| unsafe { on_exit(hook, std::ptr::null_mut()) } == 0)
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod exit_hook {
    pub(super) fn install() -> bool {
        false
    }
}
