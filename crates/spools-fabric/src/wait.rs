//! How every blocking call waits: a few quick polls, then polling at a pace chosen from
//! what the machine is doing, then sleep once the wait has lasted long enough that its
//! CPU matters.
//!
//! The pace ([`Pace`]) is the one decision that depends on the machine, measured on 2
//! cores (docs/benchmarks.md, "Waiting on a busy machine"):
//! - when the job's ranks that are awake on this host and may run on this rank's CPUs
//!   (all of them unless ranks are bound to CPUs of their own) outnumber those CPUs, the
//!   rank that will answer may be queued behind this one: give the CPU up between polls
//!   ([`Pace::Yield`]; 8 ranks passing a token on 2 cores);
//! - when another awake rank was last seen polling on this rank's CPU, polling would keep
//!   it from running: give the CPU up, and look again after every yield, since the
//!   scheduler moves ranks meanwhile ([`Pace::YieldToNeighbour`]);
//! - otherwise the rank that will answer has a CPU of its own, even when other programs
//!   load the machine: keep polling ([`Pace::Spin`]). Yielding to a CPU-bound program
//!   hands it the rest of a time slice (the scheduler pushes the yielder back a whole
//!   slice), and sleeping makes every message pay a wake-up behind it: with two busy
//!   processes beside a 2-rank ping-pong both cost tens of microseconds per message,
//!   polling about one.
//!
//! A wait sleeps only after it polled for its hold time (`spin_us`, 1 ms by default): a
//! wait that long pays a wake-up of tens of microseconds on a few percent of its length,
//! and a rank blocked for long uses almost no CPU (one hold, then sleeps of up to 50 ms).

use std::time::{Duration, Instant};

/// CPUs this process may run on.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// How a wait polls once its first polls found nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Busy-poll with a pause hint: the ranks that will answer have CPUs of their own.
    Spin,
    /// Give the CPU up between polls: the job's ranks that are awake on this host and may
    /// run on this rank's CPUs outnumber those CPUs, so the one that will answer may be
    /// queued behind this one.
    /// Crowding changes slowly: the pace is looked at again every 256 polls.
    Yield,
    /// Give the CPU up between polls: another awake rank was last seen on this rank's
    /// CPU. Placement changes with every yield (the scheduler moves ranks), and yielding
    /// to a CPU-bound program costs it a time slice: the pace is looked at again after
    /// every poll.
    YieldToNeighbour,
}

/// The job's ranks on this host that are awake (not asleep in a wait), as a wait sees
/// them ([`crate::Transport::awake_local`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Awake {
    /// Awake ranks that may be running on the asking rank's CPUs (its affinity mask:
    /// those last seen on one of them, and those not seen yet), the asking one included.
    /// Every awake rank when the ranks are not bound; none but the asking one when each
    /// is bound to CPUs of its own (`spools run --bind core`, `srun --cpu-bind=cores`),
    /// where the CPUs this process may use are not the job's.
    pub ranks: usize,
    /// Other awake ranks last seen polling on the asking rank's CPU.
    pub on_my_cpu: usize,
}

impl Pace {
    /// The pace for the `awake` ranks of the job that may share this rank's `cpus` CPUs
    /// (its affinity mask): yield when they outnumber the CPUs, or when another of them was last seen on this rank's
    /// CPU (polling would keep it from running: two ranks that the scheduler put on one
    /// CPU beside busy programs took seconds per thousand round trips).
    ///
    /// ```
    /// use spools_fabric::{Awake, Pace};
    /// assert_eq!(Pace::for_load(Awake { ranks: 2, on_my_cpu: 0 }, 2), Pace::Spin);
    /// assert_eq!(Pace::for_load(Awake { ranks: 3, on_my_cpu: 0 }, 2), Pace::Yield);
    /// assert_eq!(Pace::for_load(Awake { ranks: 2, on_my_cpu: 1 }, 2), Pace::YieldToNeighbour);
    /// ```
    pub fn for_load(awake: Awake, cpus: usize) -> Pace {
        if awake.ranks > cpus {
            Pace::Yield
        } else if awake.on_my_cpu > 0 {
            Pace::YieldToNeighbour
        } else {
            Pace::Spin
        }
    }

    /// Whether polls give the CPU up.
    pub fn yields(self) -> bool {
        self != Pace::Spin
    }
}

/// Polls a wait makes before it reads the clock, and between two readings.
const QUICK: u32 = 16;

/// Polls between two looks at the pace (the ranks that are awake change slowly).
const REPACE: u32 = 256;

/// The state of one wait: poll at the [`Pace`] the machine calls for until the hold
/// time has passed, then tell the caller to sleep.
///
/// ```
/// use std::time::Duration;
/// use spools_fabric::{Backoff, Pace};
/// let mut b = Backoff::new(Duration::ZERO, Pace::Spin);
/// // The first polls never read the clock; then a zero hold says "sleep".
/// let polls = (0..100).take_while(|_| b.spin(|| Pace::Spin)).count();
/// assert_eq!(polls, 31);
/// ```
#[derive(Debug)]
pub struct Backoff {
    /// When the wait began to poll at its pace; read from the clock only once the first
    /// polls found nothing (the fast path never reads the clock).
    start: Option<Instant>,
    hold: Duration,
    pace: Pace,
    polls: u32,
}

impl Backoff {
    /// Starts a wait that polls for `hold` before it says to sleep, at `pace` until its
    /// first look at the machine.
    pub fn new(hold: Duration, pace: Pace) -> Self {
        Backoff {
            start: None,
            hold,
            pace,
            polls: 0,
        }
    }

    /// Called after a poll that found nothing: returns `true` while polling should go
    /// on (having paused or yielded), `false` once the caller should sleep. `pace` is
    /// asked now and then what the machine calls for.
    #[inline]
    pub fn spin(&mut self, pace: impl FnOnce() -> Pace) -> bool {
        self.polls = self.polls.wrapping_add(1);
        // Reading the clock costs ~20 ns: start it after 16 empty polls, then check it
        // every 16. A yield made way for a neighbour on this CPU lets the scheduler move
        // ranks: look at the clock and the machine after every one (a rank that looked
        // only every 256 kept yielding to CPU-bound programs, a time slice each, long
        // after the rank it made way for had moved).
        let looks = self.polls % QUICK == 0 || self.pace == Pace::YieldToNeighbour;
        if looks {
            match self.start {
                None => {
                    self.start = Some(Instant::now());
                    self.pace = pace();
                }
                Some(t) if t.elapsed() >= self.hold => return false,
                Some(_) if self.pace == Pace::YieldToNeighbour || self.polls % REPACE == 0 => {
                    self.pace = pace()
                }
                Some(_) => {}
            }
        }
        match self.pace {
            Pace::Yield | Pace::YieldToNeighbour => std::thread::yield_now(),
            Pace::Spin => std::hint::spin_loop(),
        }
        true
    }

    /// Restarts the wait (after something arrived).
    pub fn reset(&mut self) {
        self.start = None;
        self.polls = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_at_the_pace_until_the_hold_ends() {
        let mut b = Backoff::new(Duration::from_secs(3600), Pace::Spin);
        let mut asked = 0;
        for _ in 0..1000 {
            assert!(b.spin(|| {
                asked += 1;
                Pace::Spin
            }));
        }
        // Spinning, it asks when the clock starts (poll 16), then every 256 polls.
        assert_eq!(asked, 1 + 1000 / 256);
        assert_eq!(b.pace, Pace::Spin);
        // Once a look says a neighbour shares the CPU, it asks after every poll.
        let mut asked = 0;
        for _ in 0..300 {
            assert!(b.spin(|| {
                asked += 1;
                Pace::YieldToNeighbour
            }));
        }
        assert_eq!(b.pace, Pace::YieldToNeighbour);
        let first = asked;
        assert!(b.spin(|| {
            asked += 1;
            Pace::YieldToNeighbour
        }));
        assert_eq!(
            asked,
            first + 1,
            "a wait yielding to a neighbour looks after every poll"
        );
        let mut b = Backoff::new(Duration::ZERO, Pace::Spin);
        let n = (0..1000).take_while(|_| b.spin(|| Pace::Spin)).count();
        assert_eq!(
            n,
            2 * QUICK as usize - 1,
            "a zero hold ends at the second reading"
        );
        let mut b = Backoff::new(Duration::ZERO, Pace::Yield);
        let n = (0..1000).take_while(|_| b.spin(|| Pace::Yield)).count();
        assert_eq!(
            n,
            2 * QUICK as usize - 1,
            "a crowded wait looks every 16 polls"
        );
        let mut b = Backoff::new(Duration::ZERO, Pace::YieldToNeighbour);
        let n = (0..1000)
            .take_while(|_| b.spin(|| Pace::YieldToNeighbour))
            .count();
        assert_eq!(
            n, 1,
            "a wait yielding to a neighbour reads the clock after every poll"
        );
        b.reset();
        assert!(b.spin(|| Pace::Spin), "a reset wait polls again");
    }
}
