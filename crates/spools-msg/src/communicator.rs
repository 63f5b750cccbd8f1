//! Communicators and tagged point-to-point messaging.

use std::sync::Arc;

use crate::buffer::{Buf, RecvBuf};
use crate::comm_core::CommCore;
use crate::element::{as_bytes, as_bytes_mut, Element};
use crate::engine::{Engine, SendStart};
use crate::error::MsgError;
use crate::protocol::MessageInfo;
use crate::request::Request;
use crate::status::{Source, Status, Tag};

/// A group of ranks with a communication context of its own: MPI's communicator. Ranks
/// are relative to it. Cheap to clone (shared). The job's first communicator is the
/// `World`'s; [`Communicator::dup`] and [`Communicator::split`] make others.
///
/// Messages between two ranks of one communicator are received in the order they were
/// sent when they match the same receive (MPI's non-overtaking rule); messages of
/// different communicators never match each other.
#[derive(Clone)]
pub struct Communicator {
    pub(crate) core: Arc<CommCore>,
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.core.rank)
            .field("size", &self.core.size())
            .field("context", &self.core.ctx)
            .finish()
    }
}

fn check_tag(tag: i32) -> Result<u32, MsgError> {
    u32::try_from(tag).map_err(|_| MsgError::BadTag(tag))
}

impl Communicator {
    /// For each communicator this rank holds (any of them: they share one engine), the
    /// collective context and how many collectives were started on it. The runtime
    /// reports it when this rank finalises, so that ranks waiting in a collective this
    /// rank never starts fail instead of hanging.
    pub fn collectives_started(&self) -> Vec<(u32, u32)> {
        self.core.engine.collectives_started()
    }

    /// For each job rank this rank sent tagged messages to (on any communicator, RPC
    /// included), how many. The runtime reports it when this rank finalises, so that a
    /// receive from this rank fails once all of them have arrived and none matches it.
    pub fn messages_sent(&self) -> Vec<(u32, u64)> {
        self.core.engine.messages_sent()
    }

    /// (messages, bytes) of the tagged messages (and RPC calls) this rank has sent so
    /// far, on any communicator, to ranks on other hosts: a statistic for tests, which
    /// shows the path a host-aware collective took.
    #[doc(hidden)]
    pub fn cross_host_sends(&self) -> (u64, u64) {
        self.core.engine.cross_host_sends()
    }

    /// A communicator of job ranks `ranks` in context `ctx`; `None` if this rank is not
    /// among them.
    pub(crate) fn from_parts(
        engine: Arc<Engine>,
        ctx: u32,
        ranks: Vec<u32>,
    ) -> Option<Communicator> {
        CommCore::new(engine, ctx, ranks).map(|core| Communicator {
            core: Arc::new(core),
        })
    }

    /// The configuration this rank's runtime started with (the one `init_with` was
    /// given): every layer above reads its settings here, never from the environment
    /// again.
    pub fn config(&self) -> &spools_boot::config::Config {
        self.core.engine.worker.config()
    }

    /// This job's cache of same-host peers' shared-heap segments (the world's own): the
    /// layers above map a peer's heap block through it, never through a process global.
    pub fn heaps(&self) -> &std::sync::Arc<spools_heap::PeerHeaps> {
        self.core.engine.worker.heaps()
    }

    /// The active-message worker of the communicator's job (whose progress moves its
    /// messages): a process in several jobs (MPI's spawn) has one per job.
    pub fn worker(&self) -> &spools_am::Worker {
        &self.core.engine.worker
    }

    /// This rank in the communicator.
    pub fn rank(&self) -> u32 {
        self.core.rank
    }

    /// Number of ranks in the communicator.
    pub fn size(&self) -> u32 {
        self.core.size()
    }

    /// The job rank of communicator rank `r`.
    ///
    /// # Errors
    /// [`MsgError::BadRank`].
    pub fn job_rank(&self, r: u32) -> Result<u32, MsgError> {
        self.core.job_rank(r)
    }

    /// Whether communicator rank `r` runs on this rank's host.
    pub fn same_host(&self, r: u32) -> bool {
        let hosts = &self.core.engine.hosts;
        let me = self.core.engine.worker.rank() as usize;
        self.core
            .ranks
            .get(r as usize)
            .is_some_and(|&j| hosts.get(j as usize) == hosts.get(me))
    }

    /// Host index of every rank of the communicator: equal indices share a host (what
    /// [`Communicator::same_host`] compares), known on every rank without communication.
    pub fn hosts(&self) -> Vec<u32> {
        self.core.hosts.clone()
    }

    /// Sends `data` to rank `dest` with `tag`; returns when `data` may be reused. Up to
    /// `short_limit` bytes travel inline, up to `eager_limit` eagerly, beyond by
    /// rendezvous (then it returns once the receiver has matched and taken the data).
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// world.send(&[1.5f64, 2.5], 0, 7).unwrap();
    /// let mut got = [0.0f64; 2];
    /// let st = world.recv(&mut got, 0, 7).unwrap();
    /// assert_eq!((got, st.source, st.tag, st.count::<f64>()), ([1.5, 2.5], 0, 7, 2));
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadRank`], [`MsgError::BadTag`], a dead peer, transport failures.
    pub fn send<T: Element>(&self, data: &[T], dest: u32, tag: i32) -> Result<(), MsgError> {
        let tag = check_tag(tag)?;
        self.core
            .send_bytes(self.core.ctx, dest, tag, as_bytes(data))
    }

    /// Receives a message matching `src` and `tag` (either may be any) into `buf`.
    ///
    /// # Errors
    /// [`MsgError::Truncated`] if the message is longer than `buf` (nothing past `buf`
    /// is written), [`MsgError::BadRank`], [`MsgError::BadTag`], a dead rank.
    pub fn recv<T: Element>(
        &self,
        buf: &mut [T],
        src: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<Status, MsgError> {
        self.core
            .recv_bytes(self.core.ctx, src.into(), tag.into(), as_bytes_mut(buf))
    }

    /// Receives a message of any length into a new vector of its size.
    ///
    /// # Errors
    /// As [`Communicator::recv`], without truncation.
    pub fn recv_vec(
        &self,
        src: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<(Vec<u8>, Status), MsgError> {
        let p = self.core.pattern(self.core.ctx, src.into(), tag.into())?;
        let id = self.core.engine.post_recv(p, RecvBuf::Alloc(Vec::new()));
        let c = Request::recv(self.core.clone(), id).wait()?;
        Ok((c.buf, c.status))
    }

    /// Starts sending `data` (which the request owns until `wait` gives it back).
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let r = world.irecv(vec![0u8; 4], 0, 1).unwrap();
    /// let s = world.isend(b"ping".to_vec(), 0, 1).unwrap();
    /// let got = r.wait().unwrap();
    /// s.wait().unwrap();
    /// assert_eq!(got.buf, b"ping");
    /// ```
    ///
    /// # Errors
    /// As [`Communicator::send`].
    pub fn isend(&self, data: Vec<u8>, dest: u32, tag: i32) -> Result<Request, MsgError> {
        self.send_request(Buf::owned(data), dest, tag, false)
    }

    /// Starts sending `data` in synchronous mode: the request completes only once a
    /// receive on `dest` matched the message and took it (MPI's `MPI_Issend`), whatever
    /// its length (it always goes by rendezvous).
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let mut s = world.issend(b"sync".to_vec(), 0, 3).unwrap();
    /// assert!(!s.test().unwrap()); // nobody received it yet
    /// let got = world.recv_vec(0, 3).unwrap();
    /// s.wait().unwrap();
    /// assert_eq!(got.0, b"sync");
    /// ```
    ///
    /// # Errors
    /// As [`Communicator::send`].
    pub fn issend(&self, data: Vec<u8>, dest: u32, tag: i32) -> Result<Request, MsgError> {
        self.send_request(Buf::owned(data), dest, tag, true)
    }

    /// Starts sending `buf` (in synchronous mode when asked) and makes its request: a
    /// message that left at once gives its owned vector back to the completion (a pinned
    /// or gathered owner is dropped here, outside the engine's lock); a rendezvous is
    /// waited for by its id.
    pub(crate) fn send_request(
        &self,
        buf: Buf,
        dest: u32,
        tag: i32,
        synchronous: bool,
    ) -> Result<Request, MsgError> {
        let t = check_tag(tag)?;
        let job = self.core.job_rank(dest)?;
        let len = buf.len();
        let (id, back) =
            match self
                .core
                .engine
                .start_send_mode(job, self.core.ctx, t, buf, synchronous)?
            {
                SendStart::Complete(b) => (None, b.take()),
                SendStart::Rendezvous(id) => (Some(id), Vec::new()),
            };
        Ok(Request::send(self.core.clone(), id, back, tag, len))
    }

    /// Posts a receive into `buf` from `src` with `tag` and makes its request.
    pub(crate) fn recv_request(
        &self,
        buf: RecvBuf,
        src: Source,
        tag: Tag,
    ) -> Result<Request, MsgError> {
        let p = self.core.pattern(self.core.ctx, src, tag)?;
        let id = self.core.engine.post_recv(p, buf);
        Ok(Request::recv(self.core.clone(), id))
    }

    /// Starts receiving into `buf` (which the request owns until `wait` gives it back).
    ///
    /// # Errors
    /// [`MsgError::BadRank`], [`MsgError::BadTag`].
    pub fn irecv(
        &self,
        buf: Vec<u8>,
        src: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<Request, MsgError> {
        self.recv_request(RecvBuf::Fixed(Buf::owned(buf)), src.into(), tag.into())
    }

    /// Starts receiving a message of any length: `wait` gives back a vector of exactly
    /// the message's bytes. A thread that takes a message it probed (MPI's matched probe)
    /// receives this way, so that another thread's receive taking the probed message
    /// first leaves it the next matching one, whatever its length.
    ///
    /// # Errors
    /// [`MsgError::BadRank`], [`MsgError::BadTag`].
    pub fn irecv_any_len(
        &self,
        src: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<Request, MsgError> {
        self.recv_request(RecvBuf::Alloc(Vec::new()), src.into(), tag.into())
    }

    /// Sends `data` to `dest` and receives into `buf` from `src` at the same time.
    ///
    /// # Errors
    /// As [`Communicator::send`] and [`Communicator::recv`] (a `dest` or a tag out of
    /// range before anything starts); a send that fails once started in the transport
    /// (its peer died) still waits for the receive, and its error is the one returned;
    /// an interrupt ends the call at once.
    #[allow(clippy::too_many_arguments)]
    pub fn sendrecv<T: Element, U: Element>(
        &self,
        data: &[T],
        dest: u32,
        send_tag: i32,
        buf: &mut [U],
        src: impl Into<Source>,
        recv_tag: impl Into<Tag>,
    ) -> Result<Status, MsgError> {
        let st = check_tag(send_tag)?;
        self.core.job_rank(dest)?;
        let g = self.core.post_bytes(
            self.core.ctx,
            src.into(),
            recv_tag.into(),
            as_bytes_mut(buf),
        )?;
        match self
            .core
            .send_bytes(self.core.ctx, dest, st, as_bytes(data))
        {
            Ok(()) => self.core.finish_bytes(g),
            // A send that failed in the transport (its peer died): the receive is
            // finished still, so that a message it already matched from a live rank is
            // delivered, not dropped with the posting; the send's error is reported.
            Err(e @ MsgError::Am(spools_am::AmError::Fabric(_))) => {
                let _ = self.core.finish_bytes(g);
                Err(e)
            }
            // Anything else (an interrupt, which the wait took: waiting on would miss
            // it) ends the call at once, the receive released.
            Err(e) => Err(e),
        }
    }

    /// Waits until a message matching `src` and `tag` can be received and describes it
    /// (it stays queued).
    ///
    /// # Errors
    /// [`MsgError::BadRank`], [`MsgError::BadTag`], a dead rank.
    pub fn probe(&self, src: impl Into<Source>, tag: impl Into<Tag>) -> Result<Status, MsgError> {
        let p = self.core.pattern(self.core.ctx, src.into(), tag.into())?;
        let mut found = None;
        self.core.engine.worker.wait_for(|| {
            found = self.core.engine.probe(&p);
            found.is_some()
        })?;
        let (e, len) = found.ok_or(MsgError::Protocol {
            peer: self.core.rank,
            what: "probe ended without a message",
        })?;
        Ok(self.core.status(&MessageInfo {
            src: e.src,
            tag: e.tag,
            len,
        }))
    }

    /// Like [`Communicator::probe`] but returns at once: `None` if no such message has
    /// arrived.
    ///
    /// # Errors
    /// As [`Communicator::probe`].
    pub fn iprobe(
        &self,
        src: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<Option<Status>, MsgError> {
        let p = self.core.pattern(self.core.ctx, src.into(), tag.into())?;
        self.core.engine.worker.progress()?;
        Ok(self.core.engine.probe(&p).map(|(e, len)| {
            self.core.status(&MessageInfo {
                src: e.src,
                tag: e.tag,
                len,
            })
        }))
    }
}

impl Communicator {
    /// The address this rank's own TCP endpoint listens on: the interface through which
    /// it reaches the job's rendezvous, hence one that the job's other hosts reach. For
    /// listeners of upper layers (a parallel pipe's consumer ranks). `None` if the
    /// published endpoint is not an address.
    pub fn endpoint_ip(&self) -> Option<std::net::IpAddr> {
        let worker = &self.core.engine.worker;
        let me = worker.rank() as usize;
        worker
            .bootstrap()
            .endpoints()
            .get(me)
            .and_then(|e| e.tcp.parse::<std::net::SocketAddr>().ok())
            .map(|a| a.ip())
    }

    /// Asks the process's interrupt check (`spools_am::Worker::set_interrupt`), which
    /// every messaging wait asks before it sleeps: an upper layer that waits on something
    /// of its own (a socket, a thread's queue: parallel pipes, streams) asks it at least
    /// every 50 ms while it waits, on the waiting thread, so that a signal (Python's
    /// Ctrl-C) ends that wait as it ends a messaging one.
    ///
    /// # Errors
    /// [`MsgError::Am`] holding `AmError::Interrupted` when the check says so.
    pub fn check_interrupt(&self) -> Result<(), MsgError> {
        Ok(self.core.engine.worker.check_interrupt()?)
    }
}
