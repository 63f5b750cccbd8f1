//! The receiving side: the acceptor thread (handshakes off the data path) and the
//! connections a rank reads from.

use std::io::{ErrorKind, Read};
use std::net::TcpListener;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use spools_proto::auth::Secret;
use spools_proto::handshake::{Identity, Purpose};

use spools_boot::admission::Admission;
use spools_boot::keepalive::Keepalive;

use crate::caps::Priority;
use crate::error::{Defect, FabricError, IoStep};
use crate::transport::Incoming;

/// Largest message on a TCP connection.
pub const MAX_MESSAGE: usize = 16 << 20;

pub(crate) const WAKER: Token = Token(usize::MAX);
/// The token of a bell watched for another transport (see [`RxSide::watch`]).
const BELL: Token = Token(usize::MAX - 1);
const BUDGET: usize = 64;

pub(crate) type NewConn = (std::net::TcpStream, Identity);

/// Whom the acceptor admits, and how it sets their connections up.
pub(crate) struct Accepting {
    /// The job secret a connection must prove.
    pub(crate) secret: Secret,
    /// The job's keepalive, set on every connection.
    pub(crate) keepalive: Option<Keepalive>,
    /// This rank, and the job's size: a connection says it is one of the others.
    pub(crate) me: u32,
    pub(crate) size: u32,
}

/// Accepts connections and runs their handshakes on a thread of its own, so that a rank
/// that is busy (or itself connecting) never blocks a peer's connection set-up.
pub(crate) fn spawn_acceptor(
    listener: TcpListener,
    accepting: Accepting,
    tx: Sender<NewConn>,
    waker: Arc<mio::Waker>,
    stop: Arc<AtomicBool>,
) -> Result<(), FabricError> {
    std::thread::Builder::new()
        .name("spools-tcp-accept".into())
        .spawn(move || {
            let Accepting {
                secret,
                keepalive,
                me,
                size,
            } = accepting;
            let gate = Admission::new();
            for conn in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut s) = conn else { continue };
                let (tx, waker, secret) = (tx.clone(), waker.clone(), secret.clone());
                let ticket = gate.admit(&s);
                // Without a thread the connection is closed; the peer retries.
                let spawned = std::thread::Builder::new()
                    .name("spools-tcp-handshake".into())
                    .spawn(move || {
                        // A connection that cannot prove the job secret is closed here:
                        // not one of its bytes reaches the active-message layer.
                        let Ok((purpose, id)) =
                            spools_boot::net::accept_admitted(&mut s, &secret, keepalive, || {
                                ticket.take()
                            })
                        else {
                            return;
                        };
                        drop(ticket);
                        if purpose != Purpose::Data
                            || id.rank >= size
                            || id.rank == me
                            || id.priority > 1
                        {
                            return;
                        }
                        let _ = s.set_write_timeout(None);
                        if s.set_nonblocking(true).is_ok() && tx.send((s, id)).is_ok() {
                            let _ = waker.wake();
                        }
                    });
                if let Err(e) = spawned {
                    spools_boot::logger::warn(format_args!(
                        "spools: tcp: cannot serve a connection: {e}"
                    ));
                }
            }
        })
        .map_err(|source| FabricError::Io {
            step: IoStep::Acceptor,
            source,
        })?;
    Ok(())
}

struct RxConn {
    stream: std::net::TcpStream,
    id: Identity,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    closed: bool,
    /// Bytes may remain in the socket (the budget ran out before WouldBlock).
    more: bool,
}

pub(crate) struct RxSide {
    poll: Poll,
    events: Events,
    conns: Vec<RxConn>,
    incoming: Receiver<NewConn>,
    /// The bell registered in the event loop, if any.
    bell: Option<RawFd>,
}

impl RxSide {
    pub(crate) fn new(poll: Poll, incoming: Receiver<NewConn>) -> RxSide {
        RxSide {
            poll,
            events: Events::with_capacity(64),
            conns: Vec::new(),
            incoming,
            bell: None,
        }
    }

    /// Makes the event loop watch `bell` (another transport's, for sleeps that cover
    /// both); returns whether it does. Registered once: a transport's bell never changes.
    pub(crate) fn watch(&mut self, bell: BorrowedFd<'_>) -> bool {
        let fd = bell.as_raw_fd();
        if self.bell == Some(fd) {
            return true;
        }
        let registry = self.poll.registry();
        if let Some(old) = self.bell.take() {
            let _ = registry.deregister(&mut SourceFd(&old));
        }
        let ok = registry
            .register(&mut SourceFd(&fd), BELL, Interest::READABLE)
            .is_ok();
        if ok {
            self.bell = Some(fd);
        }
        ok
    }

    fn adopt(&mut self) {
        while let Ok((stream, id)) = self.incoming.try_recv() {
            let token = Token(self.conns.len());
            let fd = stream.as_raw_fd();
            if self
                .poll
                .registry()
                .register(&mut SourceFd(&fd), token, Interest::READABLE)
                .is_err()
            {
                continue;
            }
            self.conns.push(RxConn {
                stream,
                id,
                buf: vec![0; 256 << 10],
                start: 0,
                end: 0,
                closed: false,
                more: true,
            });
        }
    }

    pub(crate) fn poll(&mut self, f: &mut dyn FnMut(Incoming<'_>)) -> Result<usize, FabricError> {
        self.adopt();
        let mut total = 0;
        for want_high in [1u8, 0] {
            for c in self
                .conns
                .iter_mut()
                .filter(|c| c.id.priority == want_high && !c.closed)
            {
                total += c.read_some(f)?;
            }
        }
        Ok(total)
    }

    /// Sleeps until a connection is readable, the waker fires, one of `writable` (sending
    /// sockets with queued bytes) can take more, or `timeout` passes.
    pub(crate) fn wait(&mut self, timeout: Duration, writable: &[RawFd]) {
        self.adopt();
        if self.conns.iter().any(|c| c.more && !c.closed) {
            return;
        }
        if writable.is_empty() {
            let _ = self.poll.poll(&mut self.events, Some(timeout));
            for e in self.events.iter() {
                if let Some(c) = self.conns.get_mut(e.token().0) {
                    c.more = true;
                }
            }
            return;
        }
        // The epoll instance is itself pollable: wait on it and on the blocked senders.
        let mut fds: Vec<libc::pollfd> = std::iter::once(libc::pollfd {
            fd: self.poll.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .chain(writable.iter().map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        }))
        .collect();
        let ms = libc::c_int::try_from(timeout.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: `fds` is a live array of `fds.len()` pollfd structures.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        // Drain epoll's ready list, or the epoll fd stays readable and the next wait
        // returns at once.
        let _ = self.poll.poll(&mut self.events, Some(Duration::ZERO));
        for c in &mut self.conns {
            c.more = true;
        }
    }
}

impl RxConn {
    /// Reads what the socket has (up to a budget of messages) and delivers whole frames.
    fn read_some(&mut self, f: &mut dyn FnMut(Incoming<'_>)) -> Result<usize, FabricError> {
        let mut delivered = 0;
        let priority = if self.id.priority == 1 {
            Priority::High
        } else {
            Priority::Low
        };
        // A read that did not fill the space it was given emptied the socket: stop there
        // rather than spend a system call on the read that would say WouldBlock (epoll
        // is edge-triggered on every arrival, so nothing that comes later is missed).
        let mut drained = false;
        loop {
            // Deliver complete frames first.
            while self.end - self.start >= 4 {
                let mut p = [0u8; 4];
                p.copy_from_slice(&self.buf[self.start..self.start + 4]);
                let len = u32::from_le_bytes(p) as usize;
                if len > MAX_MESSAGE {
                    self.closed = true;
                    return Err(FabricError::Corrupt {
                        rank: self.id.rank,
                        defect: Defect::FrameTooLong {
                            len,
                            max: MAX_MESSAGE,
                        },
                    });
                }
                if self.end - self.start < 4 + len {
                    if self.buf.len() - self.start < 4 + len {
                        // Make room: move the partial frame to the front, grow if needed.
                        self.buf.copy_within(self.start..self.end, 0);
                        self.end -= self.start;
                        self.start = 0;
                        if self.buf.len() < 4 + len {
                            self.buf.resize(4 + len, 0);
                        }
                    }
                    break;
                }
                f(Incoming {
                    from: self.id.rank,
                    lane: self.id.lane,
                    priority,
                    bytes: &self.buf[self.start + 4..self.start + 4 + len],
                });
                self.start += 4 + len;
                delivered += 1;
                if delivered >= BUDGET {
                    self.more = true;
                    return Ok(delivered);
                }
            }
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            }
            if self.end == self.buf.len() {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if drained {
                self.more = false;
                return Ok(delivered);
            }
            let space = self.buf.len() - self.end;
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    // The peer closed: at the end of a job, or because it died (the
                    // watchdog reports deaths).
                    self.closed = true;
                    self.more = false;
                    return Ok(delivered);
                }
                Ok(n) => {
                    self.end += n;
                    drained = n < space;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.more = false;
                    return Ok(delivered);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    self.closed = true;
                    self.more = false;
                    return Ok(delivered);
                }
            }
        }
    }
}
