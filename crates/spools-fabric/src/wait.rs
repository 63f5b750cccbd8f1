//! Spin, then yield, then sleep: the waiting policy of every blocking call.

use std::time::{Duration, Instant};

/// CPUs this process may run on.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The state of one wait: spin for `spin`, yielding the CPU between polls when ranks
/// outnumber cores, then report that it is time to sleep.
#[derive(Debug)]
pub struct Backoff {
    start: Instant,
    spin: Duration,
    yield_cpu: bool,
    polls: u32,
}

impl Backoff {
    /// Starts a wait. `oversubscribed` makes the spin phase yield between polls so that
    /// the ranks that have work get the CPU (8 ranks on 2 cores).
    pub fn new(spin: Duration, oversubscribed: bool) -> Self {
        Backoff {
            start: Instant::now(),
            spin,
            yield_cpu: oversubscribed,
            polls: 0,
        }
    }

    /// Called after a poll that found nothing: returns `true` while spinning should go
    /// on, `false` once the caller should sleep.
    #[inline]
    pub fn spin(&mut self) -> bool {
        self.polls = self.polls.wrapping_add(1);
        // Reading the clock costs ~20 ns: check it every 16 polls.
        if self.polls % 16 == 0 && self.start.elapsed() >= self.spin {
            return false;
        }
        if self.yield_cpu {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
        true
    }

    /// Restarts the spin phase (after something arrived).
    pub fn reset(&mut self) {
        self.start = Instant::now();
        self.polls = 0;
    }
}
