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
    /// When spinning began; read from the clock only once the first polls found
    /// nothing (the fast path never reads the clock).
    start: Option<Instant>,
    spin: Duration,
    yield_cpu: bool,
    polls: u32,
}

impl Backoff {
    /// Starts a wait. `oversubscribed` makes the spin phase yield between polls so that
    /// the ranks that have work get the CPU (8 ranks on 2 cores).
    pub fn new(spin: Duration, oversubscribed: bool) -> Self {
        Backoff {
            start: None,
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
        // Reading the clock costs ~20 ns: start it after 16 empty polls, then check it
        // every 16.
        if self.polls % 16 == 0 {
            match self.start {
                None => self.start = Some(Instant::now()),
                Some(t) if t.elapsed() >= self.spin => return false,
                Some(_) => {}
            }
        }
        if self.yield_cpu {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
        true
    }

    /// Yields the CPU between the remaining polls of this wait (after waking a peer that
    /// may be queued on this CPU: it then runs at once instead of after the spin).
    pub fn yield_from_now(&mut self) {
        self.yield_cpu = true;
    }

    /// Spins for `spin` from now on (the phase restarts).
    pub fn extend(&mut self, spin: Duration) {
        self.spin = spin;
        self.reset();
    }

    /// Restarts the spin phase (after something arrived).
    pub fn reset(&mut self) {
        self.start = None;
        self.polls = 0;
    }
}
