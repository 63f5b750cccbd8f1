//! What a [`crate::Receiver`]'s owner decides or does from outside its serving loop: which
//! links it serves, moves or refuses ([`Admit`]), acks sent when the consumer is done with
//! an ADU rather than when it was handed over ([`Acker`]), and ending the serving loop
//! ([`Stopper`]).

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use spools_proto::stream::{Hello, Open};

use crate::acks::{AckBoard, AckFan};
use crate::connection::Shared;
use crate::share::Share;

/// What a receiver does with a link that said hello (see [`crate::Receiver::admit`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Serves it here: with every link of its connection (`None`), or as a [`Share`] of a
    /// connection spread over several receivers. A connection's first link decides.
    Serve(Option<Share>),
    /// Moves it to another receiver of the connection: `welcome` with `WELCOME_MOVE`, then
    /// `move` with this address. Only a hello with `HELLO_CAN_MOVE` is moved; another one
    /// is refused.
    Move(SocketAddr),
    /// Refuses it (named in [`crate::Summary::refused`] with this reason).
    Refuse(&'static str),
}

/// Decides for each hello.
pub(crate) type AdmitFn = Arc<dyn Fn(&Hello) -> Admit + Send + Sync>;

/// Told every stream announced (`open`) on a link, with its connection's link count.
pub(crate) type OnOpen = Arc<dyn Fn(u16, &Open) + Send + Sync>;

#[derive(Default)]
struct Served {
    boards: AckFan,
    conns: Vec<Arc<Shared>>,
}

/// Acknowledges ADUs when the consumer is done with them (see
/// [`crate::Receiver::consumer_acks`]): on every link the receiver serves.
#[derive(Clone, Default)]
pub struct Acker {
    served: Arc<Mutex<Served>>,
}

impl Acker {
    fn lock(&self) -> MutexGuard<'_, Served> {
        self.served.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The consumer is done with ADUs `0..=adu` of `stream`: an `ack` goes out on every
    /// link this receiver serves, and a [`Share`]'s reassembly refuses SUs of them from
    /// now on. Never blocks on a sender (the acks are written by each link's thread).
    pub fn ack(&self, stream: u32, adu: u64) {
        let mut s = self.lock();
        for c in &s.conns {
            c.with(|r| r.taken(stream, adu));
        }
        s.boards.post(stream, adu);
    }

    /// The size of ADU `adu` of `stream`, whose piece a [`Share`] handed out and the
    /// consumer did not acknowledge yet (a piece's length does not say it).
    pub fn piece_of(&self, stream: u32, adu: u64) -> Option<u64> {
        self.lock()
            .conns
            .iter()
            .find_map(|c| c.with(|r| r.piece_of(stream, adu)).flatten())
    }

    pub(crate) fn add_link(&self, board: Arc<AckBoard>) {
        self.lock().boards.add(board);
    }

    pub(crate) fn add_conn(&self, c: Arc<Shared>) {
        self.lock().conns.push(c);
    }
}

/// A receiver's stop: a flag, and an event its acceptor polls beside the listening socket,
/// so that stopping wakes it at once (without a connection to its port, which a full
/// backlog would hold).
pub(crate) struct Stop {
    flag: AtomicBool,
    event: OwnedFd,
}

impl Stop {
    /// A stop not set.
    ///
    /// # Errors
    /// The operating system's, creating the event.
    pub(crate) fn new() -> std::io::Result<Stop> {
        use rustix::event::{eventfd, EventfdFlags};
        Ok(Stop {
            flag: AtomicBool::new(false),
            event: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
        })
    }

    /// Sets it: true if it was set before.
    pub(crate) fn set(&self) -> bool {
        let was = self.flag.swap(true, Ordering::SeqCst);
        // A full counter (never, at one write per stop) or a closed event would leave the
        // acceptor to see the flag at its next tick.
        let _ = rustix::io::write(&self.event, &1u64.to_ne_bytes());
        was
    }

    /// Whether it was set.
    pub(crate) fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// The event, readable once it was set.
    pub(crate) fn event(&self) -> &OwnedFd {
        &self.event
    }
}

/// Ends a receiver's [`crate::Receiver::serve`] from another thread: the serving loop
/// returns with what it saw, and the links still open are cut.
#[derive(Clone)]
pub struct Stopper {
    pub(crate) stop: Arc<Stop>,
}

impl Stopper {
    /// Stops the serving loop (at once if it waits for a connection; a connection being
    /// served is cut). Does nothing once it stopped.
    pub fn stop(&self) {
        // Wakes the acceptor, which sees the flag; never blocks.
        self.stop.set();
    }
}
