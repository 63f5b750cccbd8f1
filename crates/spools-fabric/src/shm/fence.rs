//! Asymmetric fences between the processes of a host (Linux `membarrier`,
//! `MEMBARRIER_CMD_GLOBAL_EXPEDITED`): a flag's setter, on the fast path, stores its flag
//! with release order and then loads whether anyone sleeps, with only a compiler barrier
//! between; a waiter about to sleep, on the slow path, counts itself as sleeping and then
//! runs [`heavy_fence`], which makes every running thread of every registered process
//! execute a full barrier, before its last look at the flags. Either the setter's load
//! comes after its barrier and sees the waiter counted, or its store came before and the
//! waiter's last look sees the flag (a thread not running at that moment went through a
//! context switch, itself a full barrier). So the setter never pays for a locked
//! instruction, which on x86 waits until the flag's line comes back from the readers that
//! poll it. The sleeper pays instead: one more system call on its way to sleep (also when
//! its last look then finds the flag, and before every nap), which interrupts every CPU
//! running a registered process, of this job or another: hence not where ranks
//! outnumber CPUs and sleeping is the common case (the users' choice).
//!
//! Only a process that registered ([`light_fences`]) gets the barrier: one that could not
//! register must store its flags sequentially consistent, and the users of a shared area
//! agree on one way for all its members.

use std::sync::OnceLock;

use rustix::thread::{membarrier, membarrier_query, MembarrierCommand};

/// Whether this process takes part in asymmetric fences: the kernel has the global
/// expedited barrier, this process registered for it (once; later calls say what the
/// first found), and a first barrier went through.
pub(crate) fn light_fences() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        let q = membarrier_query();
        q.contains_command(MembarrierCommand::GlobalExpedited)
            && q.contains_command(MembarrierCommand::RegisterGlobalExpedited)
            && membarrier(MembarrierCommand::RegisterGlobalExpedited).is_ok()
            && membarrier(MembarrierCommand::GlobalExpedited).is_ok()
    })
}

/// The heavy side: a full barrier on every running thread of every registered process,
/// ordered with this thread's accesses. `false` if the kernel refused (a setter's light
/// store may then go unseen until the sleeper's bounded sleep ends).
pub(crate) fn heavy_fence() -> bool {
    membarrier(MembarrierCommand::GlobalExpedited).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heavy_fence_goes_through_where_light_fences_are_on() {
        if light_fences() {
            assert!(heavy_fence());
        }
        // The answer does not change.
        assert_eq!(light_fences(), light_fences());
    }
}
