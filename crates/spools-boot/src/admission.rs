//! Admission of incoming connections: at most [`MAX_PENDING`] handshakes (threads) run at
//! once on a listener; when a new connection arrives with all slots taken, the oldest
//! pending one is cut off and the new one waits for its thread to end. A flood of idle or garbage connections thus holds a bounded number of threads
//! for a bounded time ([`ACCEPT_TIMEOUT`]), and a legitimate rank, whose handshake takes
//! milliseconds, still gets through while the flood lasts (a rank whose attempt is cut
//! off retries).
//!
//! ```
//! use spools_boot::admission::Admission;
//! let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
//! let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
//! let (s, _) = l.accept().unwrap();
//! let gate = Admission::new();
//! let ticket = gate.admit(&s);
//! assert_eq!(gate.pending(), 1);
//! drop(ticket);
//! assert_eq!(gate.pending(), 0);
//! ```

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// Most handshakes in progress on one listener.
pub const MAX_PENDING: usize = 64;
/// Time an accepted connection gets for each step of its handshake.
pub const ACCEPT_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Default)]
struct Pending {
    next: u64,
    /// Handshakes in progress, oldest first: an id and a handle to cut the connection.
    conns: VecDeque<(u64, TcpStream)>,
    /// Tickets alive (handshakes in progress, and cut-off ones whose thread still runs).
    alive: usize,
}

#[derive(Default)]
struct Slots {
    pending: Mutex<Pending>,
    freed: Condvar,
}

/// The handshake slots of one listener.
#[derive(Clone, Default)]
pub struct Admission {
    slots: Arc<Slots>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("pending", &self.pending())
            .finish()
    }
}

/// A connection's slot, held while its handshake runs.
#[derive(Debug)]
pub struct Ticket {
    id: u64,
    gate: Admission,
}

impl Admission {
    /// No handshakes pending.
    pub fn new() -> Admission {
        Admission::default()
    }

    /// Takes a slot for `conn` and sets its handshake timeout. When all slots are taken,
    /// cuts off the oldest pending connection and waits for a slot to free.
    pub fn admit(&self, conn: &TcpStream) -> Ticket {
        let _ = conn.set_read_timeout(Some(ACCEPT_TIMEOUT));
        let _ = conn.set_write_timeout(Some(ACCEPT_TIMEOUT));
        let mut p = self.lock();
        while p.alive >= MAX_PENDING {
            if let Some((_, oldest)) = p.conns.pop_front() {
                // Its handshake thread sees the end of the stream and returns.
                let _ = oldest.shutdown(Shutdown::Both);
            }
            // Bounded in case a thread is slow to notice: handshakes time out anyway.
            p = self
                .slots
                .freed
                .wait_timeout(p, ACCEPT_TIMEOUT)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let id = p.next;
        p.next += 1;
        p.alive += 1;
        if let Ok(handle) = conn.try_clone() {
            p.conns.push_back((id, handle));
        }
        Ticket {
            id,
            gate: self.clone(),
        }
    }

    /// Handshakes in progress (threads holding a ticket).
    pub fn pending(&self) -> usize {
        self.lock().alive
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.slots
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Ticket {
    /// Claims the connection once its handshake succeeded: it can no longer be cut off.
    /// False if it was cut off already (its stream is shut down).
    pub fn take(&self) -> bool {
        let mut p = self.gate.lock();
        match p.conns.iter().position(|(id, _)| *id == self.id) {
            Some(i) => {
                p.conns.remove(i);
                true
            }
            None => false,
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut p = self.gate.lock();
        if let Some(i) = p.conns.iter().position(|(id, _)| *id == self.id) {
            p.conns.remove(i);
        }
        p.alive -= 1;
        drop(p);
        self.gate.slots.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    #[test]
    fn a_full_gate_cuts_off_the_oldest_and_admits_the_newest() -> std::io::Result<()> {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let addr = l.local_addr()?;
        let gate = Admission::new();
        let mut clients = Vec::new();
        let mut tickets = Vec::new();
        for _ in 0..MAX_PENDING {
            clients.push(TcpStream::connect(addr)?);
            let (s, _) = l.accept()?;
            tickets.push(Some(gate.admit(&s)));
        }
        assert_eq!(gate.pending(), MAX_PENDING);
        // One more: the oldest is cut off, and the newcomer waits for its slot.
        clients.push(TcpStream::connect(addr)?);
        let (s, _) = l.accept()?;
        let g = gate.clone();
        let newcomer = std::thread::spawn(move || g.admit(&s).take());
        let oldest = tickets[0].take();
        // The cut-off client sees its connection end (an event, not a clock).
        let mut byte = [0u8; 1];
        assert_eq!(clients[0].read(&mut byte)?, 0);
        assert_eq!(oldest.as_ref().map(Ticket::take), Some(false));
        drop(oldest);
        assert_eq!(newcomer.join().ok(), Some(true));
        // The others were not touched and can still be claimed.
        assert_eq!(tickets[1].as_ref().map(Ticket::take), Some(true));
        Ok(())
    }
}
