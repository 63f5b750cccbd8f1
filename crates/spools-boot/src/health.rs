//! The job's health as this rank knows it: which ranks died and how (the watchdog's
//! record). Every wait in the runtime checks it, and registered wakers rouse sleeping
//! waits when it changes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A function that wakes this rank's sleeping waits.
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// Shared record of dead ranks.
pub struct JobHealth {
    dead: Vec<AtomicBool>,
    causes: Mutex<Vec<Option<String>>>,
    any: AtomicBool,
    server_lost: Mutex<Option<String>>,
    wakers: Mutex<Vec<Waker>>,
    /// The rank that died first.
    first: Mutex<Option<u32>>,
    /// Ranks that finalised, with the collectives they started per context.
    finalizing: Mutex<Vec<Finalizing>>,
    /// Whether any rank finalised (a cheap check for wait loops).
    any_finalizing: AtomicBool,
    /// Counts recorded failures; `changed` is signalled with each.
    generation: Mutex<u64>,
    changed: Condvar,
}

impl std::fmt::Debug for JobHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHealth")
            .field("any_dead", &self.any.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A rank that finalised: (context, collectives started) per communicator it held, and
/// how many tagged messages it sent to this rank.
struct Finalizing {
    rank: u32,
    collectives: Vec<(u32, u32)>,
    sent_to_me: u64,
}

/// What the watchdog knows about a failed rank or a lost rendezvous.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// A rank died.
    Rank {
        /// Which.
        rank: u32,
        /// How.
        cause: String,
    },
    /// The rendezvous (launcher or rank 0) went away.
    ServerLost(String),
}

impl JobHealth {
    /// A job of `size` ranks, all alive.
    pub fn new(size: u32) -> Arc<JobHealth> {
        Arc::new(JobHealth {
            dead: (0..size).map(|_| AtomicBool::new(false)).collect(),
            causes: Mutex::new(vec![None; size as usize]),
            any: AtomicBool::new(false),
            server_lost: Mutex::new(None),
            wakers: Mutex::new(Vec::new()),
            first: Mutex::new(None),
            finalizing: Mutex::new(Vec::new()),
            any_finalizing: AtomicBool::new(false),
            generation: Mutex::new(0),
            changed: Condvar::new(),
        })
    }

    /// Registers a function that wakes sleeping waits of this rank.
    pub fn add_waker(&self, w: Waker) {
        self.wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(w);
    }

    /// Wakes every sleeping wait of this rank (for instance when a bootstrap reply came).
    pub fn wake(&self) {
        self.wake_all();
    }

    /// Waits at most `limit` for the watchdog's verdict after a transport error with
    /// `rank`, whose true cause (the rank exited, crashed, gave up; or another rank's
    /// failure made it leave) the watchdog learns a moment later than the socket: that
    /// rank's death, else the job's first failure.
    pub fn verdict_on(&self, rank: u32, limit: Duration) -> Option<Failure> {
        let until = Instant::now() + limit;
        let mut generation = self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(f) = self.failure_of(rank).or_else(|| self.any_failure()) {
                return Some(f);
            }
            let now = Instant::now();
            if now >= until {
                return None;
            }
            generation = self
                .changed
                .wait_timeout(generation, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn changed(&self) {
        *self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner) += 1;
        self.changed.notify_all();
    }

    fn wake_all(&self) {
        let wakers = self
            .wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for w in wakers {
            w();
        }
    }

    /// Records that `rank` died and wakes every wait.
    pub fn mark_dead(&self, rank: u32, cause: &str) {
        if let Some(d) = self.dead.get(rank as usize) {
            let mut causes = self.causes.lock().unwrap_or_else(PoisonError::into_inner);
            if !d.swap(true, Ordering::SeqCst) {
                causes[rank as usize] = Some(cause.to_string());
                self.first
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(rank);
            }
        }
        self.any.store(true, Ordering::SeqCst);
        self.changed();
        self.wake_all();
    }

    /// Records that `rank` finalised after starting `collectives` (per context: how many)
    /// and sending `sent_to_me` tagged messages to this rank, and wakes every wait.
    pub fn mark_finalizing(&self, rank: u32, collectives: Vec<(u32, u32)>, sent_to_me: u64) {
        self.finalizing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Finalizing {
                rank,
                collectives,
                sent_to_me,
            });
        self.any_finalizing.store(true, Ordering::SeqCst);
        self.wake_all();
    }

    /// A rank among `members` (the job ranks of the communicator that waits) that
    /// finalised without starting collective number `k` (counted from 0) of context
    /// `ctx`, which it held: a wait in that collective can never complete. Returns that
    /// rank and how many collectives of `ctx` it started. (The communicators one `split`
    /// makes share a context: a rank of a sibling communicator says nothing about this
    /// one.)
    pub fn collective_blocker(&self, ctx: u32, k: u32, members: &[u32]) -> Option<(u32, u32)> {
        self.find_finalizing(|f| {
            if !members.contains(&f.rank) {
                return None;
            }
            f.collectives
                .iter()
                .find(|(c, n)| *c == ctx && *n <= k)
                .map(|(_, n)| (f.rank, *n))
        })
    }

    /// The first answer `f` gives for a rank that finalised (none while none has).
    fn find_finalizing<R>(&self, f: impl FnMut(&Finalizing) -> Option<R>) -> Option<R> {
        if !self.any_finalizing.load(Ordering::Relaxed) {
            return None;
        }
        self.finalizing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find_map(f)
    }

    /// Whether any rank announced that it finalises (a cheap check for wait loops).
    pub fn any_finalizing(&self) -> bool {
        self.any_finalizing.load(Ordering::Relaxed)
    }

    /// End of data from `rank`: `Some(n)` once it finalised, having sent this rank `n`
    /// tagged messages in all (none follow); `None` while it takes part in the job.
    pub fn end_of_data(&self, rank: u32) -> Option<u64> {
        self.find_finalizing(|f| (f.rank == rank).then_some(f.sent_to_me))
    }

    /// Whether `rank` announced that it finalises.
    pub fn is_finalizing(&self, rank: u32) -> bool {
        self.find_finalizing(|f| (f.rank == rank).then_some(()))
            .is_some()
    }

    /// Records that the rendezvous went away and wakes every wait.
    pub fn mark_server_lost(&self, why: &str) {
        self.server_lost
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| why.to_string());
        self.any.store(true, Ordering::SeqCst);
        self.changed();
        self.wake_all();
    }

    /// Whether anything failed (a cheap check for hot loops).
    #[inline]
    pub fn troubled(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    /// The failure that concerns `rank`: its death, or the loss of the rendezvous. A lost
    /// rendezvous after some rank died (rank 0 hosting it left because of that death) is
    /// reported as that death, the cause.
    pub fn failure_of(&self, rank: u32) -> Option<Failure> {
        if !self.troubled() {
            return None;
        }
        if let Some(f) = self.death_of(rank) {
            return Some(f);
        }
        let lost = self
            .server_lost
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        Some(self.first_death().unwrap_or(Failure::ServerLost(lost)))
    }

    /// The first failure in the job (the earliest rank to die), or the loss of the
    /// rendezvous.
    pub fn any_failure(&self) -> Option<Failure> {
        if !self.troubled() {
            return None;
        }
        self.first_death().or_else(|| {
            self.server_lost
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
                .map(Failure::ServerLost)
        })
    }

    fn death_of(&self, rank: u32) -> Option<Failure> {
        if !self
            .dead
            .get(rank as usize)
            .is_some_and(|d| d.load(Ordering::SeqCst))
        {
            return None;
        }
        let causes = self.causes.lock().unwrap_or_else(PoisonError::into_inner);
        Some(Failure::Rank {
            rank,
            cause: causes[rank as usize].clone().unwrap_or_default(),
        })
    }

    fn first_death(&self) -> Option<Failure> {
        let first = *self.first.lock().unwrap_or_else(PoisonError::into_inner);
        first.and_then(|r| self.death_of(r))
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Rank { rank, cause } => write!(f, "rank {rank} died ({cause})"),
            Failure::ServerLost(why) => write!(f, "lost the job's rendezvous ({why})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collective_is_blocked_only_by_a_rank_that_never_started_it() {
        const ALL: [u32; 4] = [0, 1, 2, 3];
        let st = JobHealth::new(4);
        assert_eq!(st.collective_blocker(3, 0, &ALL), None);
        // Rank 2 finalised after 2 collectives on context 3 and none on context 5.
        st.mark_finalizing(2, vec![(3, 2), (5, 0)], 4);
        assert_eq!(st.collective_blocker(3, 0, &ALL), None);
        assert_eq!(st.collective_blocker(3, 1, &ALL), None);
        assert_eq!(st.collective_blocker(3, 2, &ALL), Some((2, 2)));
        assert_eq!(st.collective_blocker(5, 0, &ALL), Some((2, 0)));
        // A context it never held says nothing.
        assert_eq!(st.collective_blocker(7, 9, &ALL), None);
        // Nor does it block a communicator it is not a member of (a sibling of one
        // `split`, in the same context).
        assert_eq!(st.collective_blocker(3, 2, &[0, 1, 3]), None);
        assert_eq!(st.collective_blocker(5, 0, &[1, 2]), Some((2, 0)));
        // End of data: rank 2 sent this rank 4 messages; rank 1 is still in the job.
        assert_eq!(st.end_of_data(2), Some(4));
        assert_eq!(st.end_of_data(1), None);
    }

    #[test]
    fn the_root_cause_wins_over_a_lost_rendezvous() {
        let st = JobHealth::new(3);
        st.mark_dead(1, "it exited with status 1");
        st.mark_server_lost("the connection closed");
        // Rank 0 hosted the rendezvous and left because of rank 1: errors about rank 0
        // name rank 1's failure, the cause.
        assert_eq!(
            st.failure_of(0),
            Some(Failure::Rank {
                rank: 1,
                cause: "it exited with status 1".into()
            })
        );
        assert_eq!(st.any_failure(), st.failure_of(0));
        // A verdict already known returns at once; none at all returns after the limit.
        assert!(st.verdict_on(2, Duration::from_secs(60)).is_some());
        let quiet = JobHealth::new(2);
        assert_eq!(quiet.verdict_on(1, Duration::from_millis(1)), None);
    }

    #[test]
    fn a_verdict_recorded_by_another_thread_ends_the_wait() {
        let st = JobHealth::new(2);
        let s2 = st.clone();
        let t = std::thread::spawn(move || s2.verdict_on(1, Duration::from_secs(60)));
        st.mark_dead(1, "killed by signal 9");
        assert_eq!(
            t.join().ok().flatten(),
            Some(Failure::Rank {
                rank: 1,
                cause: "killed by signal 9".into()
            })
        );
    }
}
