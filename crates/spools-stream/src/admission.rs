//! How many links a [`crate::Receiver`] takes at once, and how long a link may take to say
//! its hello: what a peer that has not said who it is (or proved the secret) can cost the
//! receiver is bounded, in links, threads, memory and time.
//!
//! A link is *pending* from its accept until it said its hello (and, when the receiver
//! requires it, proved the secret), then *served*. Pending links are at most
//! [`Admission::max_pending`]: one more evicts the oldest (closed without a word). Links at
//! once, pending and served, are at most [`Admission::max_links`] (and fewer when the
//! process's limit on open files is lower): past it, a new link evicts the oldest pending
//! one, or, when every link is served, is refused at once. A pending link that has not
//! finished its hello within [`Admission::hello_timeout`] of its accept is closed.

use std::collections::VecDeque;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Time a link has, from its accept, to say its hello and (when the receiver requires it)
/// to prove the job secret: 10 seconds. See [`Admission::hello_timeout`].
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Links a receiver holds at once that have not said their hello (or proved the secret)
/// yet: 64. See [`Admission::max_pending`].
pub const MAX_PENDING: usize = 64;

/// Links a receiver holds at once, pending or served: 1024. See [`Admission::max_links`].
pub const MAX_OPEN_LINKS: usize = 1024;

/// File descriptors a receiver leaves to the rest of its process (its output files, a
/// job's own connections): at most this many, and at most a quarter of the limit.
const FD_RESERVE: u64 = 64;

/// A receiver's bounds on the links it holds at once: links that have not finished their
/// hello (the oldest silent one gives way to a new link), all links, and how long a link
/// may stay silent.
///
/// ```
/// use std::time::Duration;
/// use spools_stream::{Admission, Limits, Receiver};
/// let r = Receiver::bind("127.0.0.1:0", Limits::default())?.admission(Admission {
///     hello_timeout: Duration::from_secs(3),
///     ..Admission::default()
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admission {
    /// Links accepted that have not said their hello (and proved the secret, when it is
    /// required) yet; one more evicts the oldest of them. At least 1.
    pub max_pending: usize,
    /// Links at once, pending and served. Also at most the process's limit on open files
    /// (`RLIMIT_NOFILE`) less a reserve of 64 (or a quarter of it, if that is less). At
    /// least 1.
    pub max_links: usize,
    /// Time from a link's accept to the end of its hello (and of the secret handshake,
    /// when the receiver requires it); a link still pending then is closed.
    pub hello_timeout: Duration,
}

impl Default for Admission {
    /// [`MAX_PENDING`], [`MAX_OPEN_LINKS`] and [`HELLO_TIMEOUT`].
    fn default() -> Self {
        Admission {
            max_pending: MAX_PENDING,
            max_links: MAX_OPEN_LINKS,
            hello_timeout: HELLO_TIMEOUT,
        }
    }
}

impl Admission {
    /// These bounds within what the process can open: `max_links` at most the open-file
    /// limit less the reserve, `max_pending` at most `max_links`, both at least 1.
    fn effective(self) -> Admission {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        let room = limit.map_or(usize::MAX, |n| {
            let keep = FD_RESERVE.min(n / 4);
            usize::try_from(n.saturating_sub(keep)).unwrap_or(usize::MAX)
        });
        let max_links = self.max_links.min(room).max(1);
        Admission {
            max_links,
            max_pending: self.max_pending.min(max_links).max(1),
            hello_timeout: self.hello_timeout,
        }
    }
}

/// A link that has not said its hello yet.
pub(crate) struct Pending {
    pub(crate) id: usize,
    pub(crate) peer: SocketAddr,
    since: Instant,
    sock: Arc<TcpStream>,
}

impl Pending {
    /// Closes it: its thread's read ends.
    pub(crate) fn close(&self) {
        let _ = self.sock.shutdown(Shutdown::Both);
    }
}

#[derive(Default)]
struct State {
    /// Oldest first (their deadlines in the same order).
    pending: VecDeque<Pending>,
    served: usize,
}

/// What [`Gate::arrive`] decided for a new link.
pub(crate) enum Arrival {
    /// Pending now; these older ones were evicted to make room (to be closed and named).
    Pending(Vec<Pending>),
    /// Every link the receiver may hold is served: refuse the new one.
    Full(usize),
}

/// The links a receiver holds, pending and served, within its [`Admission`].
pub(crate) struct Gate {
    state: Mutex<State>,
    bounds: Admission,
}

impl Gate {
    pub(crate) fn new(a: Admission) -> Gate {
        Gate {
            state: Mutex::new(State::default()),
            bounds: a.effective(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The bounds in effect.
    pub(crate) fn bounds(&self) -> Admission {
        self.bounds
    }

    /// A link was accepted.
    pub(crate) fn arrive(&self, id: usize, peer: SocketAddr, sock: Arc<TcpStream>) -> Arrival {
        let b = self.bounds;
        let mut s = self.lock();
        let mut evicted = Vec::new();
        while s.pending.len() >= b.max_pending || s.pending.len() + s.served >= b.max_links {
            match s.pending.pop_front() {
                Some(p) => evicted.push(p),
                None => break,
            }
        }
        if s.pending.len() + s.served >= b.max_links {
            return Arrival::Full(b.max_links);
        }
        s.pending.push_back(Pending {
            id,
            peer,
            since: Instant::now(),
            sock,
        });
        Arrival::Pending(evicted)
    }

    /// Takes the pending links whose time ran out (to be closed and named), and says when
    /// the next one's runs out.
    pub(crate) fn expired(&self, now: Instant) -> (Vec<Pending>, Option<Instant>) {
        let t = self.bounds.hello_timeout;
        let mut s = self.lock();
        let mut out = Vec::new();
        while s.pending.front().is_some_and(|p| p.since + t <= now) {
            out.extend(s.pending.pop_front());
        }
        let next = s.pending.front().map(|p| p.since + t);
        (out, next)
    }

    /// Takes the oldest pending link (the process ran out of file descriptors: the others
    /// come first).
    pub(crate) fn evict_oldest(&self) -> Option<Pending> {
        self.lock().pending.pop_front()
    }

    /// Takes every pending link (the receiver stops).
    pub(crate) fn take_all(&self) -> Vec<Pending> {
        self.lock().pending.drain(..).collect()
    }

    /// Pending link `id` said its hello (and proved the secret): it is served from now on,
    /// until the slot is dropped. `None` when it was evicted or ran out of time meanwhile.
    pub(crate) fn promote(self: &Arc<Gate>, id: usize) -> Option<Slot> {
        let mut s = self.lock();
        let at = s.pending.iter().position(|p| p.id == id)?;
        s.pending.remove(at);
        s.served += 1;
        Some(Slot { gate: self.clone() })
    }

    /// Pending link `id` failed before its hello was taken: true when it was still pending
    /// (its own thread names it), false when it had been evicted or ran out of time (and
    /// was named then).
    pub(crate) fn leave(&self, id: usize) -> bool {
        let mut s = self.lock();
        match s.pending.iter().position(|p| p.id == id) {
            Some(at) => {
                s.pending.remove(at);
                true
            }
            None => false,
        }
    }
}

/// A served link's place among the links a receiver holds; given back when dropped.
pub(crate) struct Slot {
    gate: Arc<Gate>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut s = self.gate.lock();
        s.served = s.served.saturating_sub(1);
    }
}
