//! The TCP transport: between hosts, or on one host with `SPOOLS_TRANSPORT=tcp`.
//!
//! One connection per (sender, lane, priority, receiver), opened lazily on first use
//! (SCI-MPICH's delayed connections) and authenticated with the job secret before any
//! message is read from it. Sockets are non-blocking with `TCP_NODELAY`; a message goes
//! out with one `writev` straight from the caller's buffers, and only what the kernel does
//! not take is copied into a per-connection queue. Receivers read with plain non-blocking
//! reads while they poll and sleep in `epoll` (through `mio`) when they wait.

mod rx;
mod tx;

use crate::transport::VERDICT_WAIT;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::Duration;

use spools_boot::client::Bootstrap;
use spools_boot::config::Config;
use spools_boot::health::JobHealth;
use spools_boot::keepalive::Keepalive;
use spools_proto::auth::Secret;
use spools_proto::handshake::{Identity, Purpose};

use crate::caps::{Caps, Priority, SingleCopy};
use crate::error::{FabricError, IoStep};
use crate::lock::TryLock;
use crate::transport::{Incoming, Transport};
use rx::RxSide;
pub use rx::MAX_MESSAGE;
use tx::TxConn;

/// Bytes a connection may queue beyond what the kernel took before senders see
/// back-pressure.
const QUEUE_LIMIT: usize = 4 << 20;
/// A listening socket bound before the rendezvous, so its address can be published.
#[derive(Debug)]
pub struct Listener {
    listener: TcpListener,
    addr: SocketAddr,
}

impl Listener {
    /// Binds an ephemeral port on `ip` (the interface that reaches the rendezvous).
    ///
    /// # Errors
    /// [`FabricError::Io`].
    pub fn bind(ip: IpAddr) -> Result<Listener, FabricError> {
        let listener = TcpListener::bind((ip, 0)).map_err(|source| FabricError::Io {
            step: IoStep::TcpBind { ip },
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| FabricError::Io {
            step: IoStep::TcpLocalAddr,
            source,
        })?;
        Ok(Listener { listener, addr })
    }

    /// The address to publish.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// The TCP transport.
pub struct TcpTransport {
    me: u32,
    addrs: Vec<Option<SocketAddr>>,
    /// Each rank's host name, for errors.
    hosts: Vec<String>,
    secret: Secret,
    /// The job's keepalive (`net_timeout_s`), set on every connection.
    keepalive: Option<Keepalive>,
    state: Arc<JobHealth>,
    lanes: Vec<TryLock<HashMap<(u32, u8), TxConn>>>,
    /// Lanes whose connections hold queued bytes (bit per lane).
    queued: std::sync::atomic::AtomicU64,
    /// Sending sockets that hold queued bytes: a waiting sender sleeps until one of
    /// them can take more.
    backed_up: std::sync::Mutex<Vec<std::os::fd::RawFd>>,
    rx: TryLock<RxSide>,
    waker: Arc<mio::Waker>,
    sleeping: AtomicUsize,
    stop: Arc<AtomicBool>,
    listen_addr: SocketAddr,
    caps: Caps,
}

impl std::fmt::Debug for TcpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpTransport")
            .field("me", &self.me)
            .field("listen", &self.listen_addr)
            .finish_non_exhaustive()
    }
}

impl TcpTransport {
    /// Starts the transport on a listener whose address was published at the rendezvous.
    ///
    /// # Errors
    /// [`FabricError::Io`] if the event loop cannot be created.
    pub fn new(
        listener: Listener,
        boot: &Bootstrap,
        cfg: &Config,
    ) -> Result<TcpTransport, FabricError> {
        let addrs = boot
            .endpoints()
            .iter()
            .map(|e| e.tcp.parse().ok())
            .collect();
        let poll = mio::Poll::new().map_err(|source| FabricError::Io {
            step: IoStep::EventLoop,
            source,
        })?;
        let waker = Arc::new(
            mio::Waker::new(poll.registry(), rx::WAKER).map_err(|source| FabricError::Io {
                step: IoStep::Waker,
                source,
            })?,
        );
        let (tx, incoming) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let keepalive = Keepalive::for_timeout(cfg.net_timeout_s);
        rx::spawn_acceptor(
            listener.listener,
            rx::Accepting {
                secret: boot.secret().clone(),
                keepalive,
                me: boot.rank(),
                size: boot.size(),
            },
            tx,
            waker.clone(),
            stop.clone(),
        )?;
        // One thread drives the rank: it owns the lanes and the receive side (no lock).
        let level = cfg.thread_level_in_effect();
        Ok(TcpTransport {
            me: boot.rank(),
            addrs,
            hosts: boot
                .endpoints()
                .iter()
                .map(|e| e.host.split('/').next().unwrap_or_default().to_string())
                .collect(),
            secret: boot.secret().clone(),
            keepalive,
            state: boot.state().clone(),
            lanes: (0..cfg.lanes)
                .map(|_| TryLock::new(HashMap::new(), level))
                .collect(),
            queued: std::sync::atomic::AtomicU64::new(0),
            backed_up: std::sync::Mutex::new(Vec::new()),
            rx: TryLock::new(RxSide::new(poll, incoming), level),
            waker,
            sleeping: AtomicUsize::new(0),
            stop,
            listen_addr: listener.addr,
            caps: Caps {
                name: "tcp",
                max_message: MAX_MESSAGE,
                max_inline: 64 << 10,
                ordered: true,
                lanes: usize::from(cfg.lanes),
                single_copy: SingleCopy::None,
                single_copy_reason:
                    "writev from the sender's buffer; one copy out of the receive buffer".into(),
            },
        })
    }

    /// The address this rank listens on.
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen_addr
    }

    fn flush_conns(
        &self,
        lane: usize,
        conns: &mut HashMap<(u32, u8), TxConn>,
    ) -> Result<bool, FabricError> {
        let mut pending = false;
        for ((peer, _), c) in conns.iter_mut() {
            pending |= c.flush().map_err(|e| self.peer_failed(*peer, e))?;
        }
        if !pending {
            self.queued.fetch_and(!(1 << lane), Ordering::SeqCst);
        }
        let drained: Vec<_> = conns
            .values()
            .filter(|c| !c.has_queued())
            .map(TxConn::raw_fd)
            .collect();
        if !drained.is_empty() {
            self.backed_up
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .retain(|fd| !drained.contains(fd));
        }
        Ok(pending)
    }

    /// The host name of `peer`, for errors.
    fn host_of(&self, peer: u32) -> String {
        self.hosts.get(peer as usize).cloned().unwrap_or_default()
    }

    /// The error for a failed connection to `peer`: the watchdog's cause when it learns
    /// one soon (the peer exited, crashed or gave up), else the socket's error.
    fn peer_failed(&self, peer: u32, source: std::io::Error) -> FabricError {
        match self.state.verdict_on(peer, VERDICT_WAIT) {
            Some(f) => FabricError::PeerFailed(f),
            None => FabricError::ConnectionLost {
                peer,
                host: self.host_of(peer),
                source,
            },
        }
    }

    /// As [`TcpTransport::peer_failed`], for a connection that could not be made.
    fn connect_failed(&self, peer: u32, source: spools_boot::BootError) -> FabricError {
        match self.state.verdict_on(peer, VERDICT_WAIT) {
            Some(f) => FabricError::PeerFailed(f),
            None => FabricError::Connect {
                peer,
                host: self.host_of(peer),
                source: Box::new(source),
            },
        }
    }
}

impl Transport for TcpTransport {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn reaches(&self, peer: u32) -> bool {
        peer != self.me && self.addrs.get(peer as usize).is_some_and(Option::is_some)
    }

    fn try_send(
        &self,
        lane: usize,
        priority: Priority,
        peer: u32,
        parts: &[&[u8]],
    ) -> Result<bool, FabricError> {
        if !self.reaches(peer) {
            return Err(FabricError::Unreachable(peer));
        }
        let (len, lane_state) =
            crate::transport::check_send(&self.caps, &self.state, &self.lanes, lane, peer, parts)?;
        let mut conns = lane_state.lock();
        let key = (peer, priority as u8);
        if let std::collections::hash_map::Entry::Vacant(slot) = conns.entry(key) {
            // Delayed connection (SCI-MPICH): opened on the first message to this peer.
            let addr = self.addrs[peer as usize].ok_or(FabricError::Unreachable(peer))?;
            let identity = Identity {
                rank: self.me,
                lane: lane as u16,
                priority: priority as u8,
            };
            // A peer's listener under a flood of connections may cut this one off before
            // its handshake: retry while the job is whole (after any failure it is over).
            let stream = spools_boot::net::connect_retrying(
                addr,
                &self.secret,
                self.keepalive,
                Purpose::Data,
                identity,
                std::time::Instant::now() + Duration::from_secs(10),
                || self.state.troubled(),
            )
            .map_err(|e| self.connect_failed(peer, e))?;
            slot.insert(TxConn::new(stream).map_err(|e| self.peer_failed(peer, e))?);
        }
        let Some(conn) = conns.get_mut(&key) else {
            return Err(FabricError::Unreachable(peer));
        };
        let sent = conn
            .send(parts, len, QUEUE_LIMIT)
            .map_err(|e| self.peer_failed(peer, e))?;
        if conn.has_queued() {
            // Queued bytes are pushed out by later sends, flushes and polls; a waiting
            // sender sleeps until the socket can take more.
            self.queued.fetch_or(1 << lane, Ordering::SeqCst);
            let fd = conn.raw_fd();
            let mut b = self
                .backed_up
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !b.contains(&fd) {
                b.push(fd);
            }
        }
        Ok(sent)
    }

    fn flush(&self, lane: usize) -> Result<bool, FabricError> {
        // Nothing queued on the lane (the common case, checked every progress round):
        // no lock, no walk over the connections. A sender sets its lane's bit before its
        // `try_send` returns, so its own later flushes see it.
        if lane < 64 && self.queued.load(Ordering::SeqCst) & (1 << lane) == 0 {
            return Ok(false);
        }
        let Some(lane_state) = self.lanes.get(lane) else {
            return Ok(false);
        };
        let mut conns = lane_state.lock();
        self.flush_conns(lane, &mut conns)
    }

    fn poll(&self, f: &mut dyn FnMut(Incoming<'_>)) -> Result<usize, FabricError> {
        let Some(mut rx) = self.rx.try_lock() else {
            return Ok(0);
        };
        // Push out bytes that sends left queued, on lanes no other thread holds.
        let queued = self.queued.load(Ordering::SeqCst);
        if queued != 0 {
            for lane in (0..self.lanes.len()).filter(|l| queued & (1 << l) != 0) {
                if let Some(mut conns) = self.lanes[lane].try_lock() {
                    if self.flush_conns(lane, &mut conns)? {}
                }
            }
        }
        rx.poll(f)
    }

    fn wait(&self, timeout: Duration) {
        self.wait_watching(None, timeout);
    }

    fn wait_with(&self, bell: BorrowedFd<'_>, timeout: Duration) {
        self.wait_watching(Some(bell), timeout);
    }

    fn wake(&self) {
        if self.sleeping.load(Ordering::SeqCst) != 0 {
            let _ = self.waker.wake();
        }
    }
}

impl TcpTransport {
    /// Sleeps in the event loop until a connection is readable, a backed-up sending
    /// socket can take more, the waker or `bell` fires, or `timeout` passes.
    fn wait_watching(&self, bell: Option<BorrowedFd<'_>>, timeout: Duration) {
        self.sleeping.fetch_add(1, Ordering::SeqCst);
        let writable = self
            .backed_up
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        match self.rx.try_lock() {
            Some(mut rx) if !self.state.troubled() => {
                // A bell the event loop cannot watch: nap briefly instead.
                let timeout = match bell.map(|b| rx.watch(b)) {
                    Some(false) => timeout.min(Duration::from_millis(1)),
                    _ => timeout,
                };
                rx.wait(timeout, &writable);
            }
            Some(_) => {}
            None => std::thread::sleep(timeout.min(Duration::from_micros(200))),
        }
        self.sleeping.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Unblock the acceptor's accept() so its thread ends.
        let _ = std::net::TcpStream::connect_timeout(&self.listen_addr, Duration::from_millis(100));
    }
}
