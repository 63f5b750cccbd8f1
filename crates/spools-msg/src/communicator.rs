//! Communicators and tagged point-to-point messaging.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::element::{as_bytes, as_bytes_mut, Element};
use crate::engine::{Buf, Done, Engine, RecvBuf, Started, MAX_CTX};
use crate::matching::Pattern;
use crate::request::{OpGuard, Request, Status};
use crate::MsgError;

/// Which sender a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Any rank (MPI_ANY_SOURCE).
    Any,
    /// This rank of the communicator.
    Rank(u32),
}

impl From<u32> for Source {
    fn from(r: u32) -> Source {
        Source::Rank(r)
    }
}

/// Which tag a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// Any tag (MPI_ANY_TAG).
    Any,
    /// This tag (0 to i32::MAX).
    Is(i32),
}

impl From<i32> for Tag {
    fn from(t: i32) -> Tag {
        Tag::Is(t)
    }
}

/// Any sender.
pub const ANY_SOURCE: Source = Source::Any;
/// Any tag.
pub const ANY_TAG: Tag = Tag::Any;

/// The collective (context, number) a message of context `ctx` with `tag` belongs to:
/// collectives use the odd context `ctx + 1` of their communicator and tags
/// `number << 8 | step` (see [`Inner::next_coll_tag`]).
fn collective_of(ctx: u32, tag: Tag) -> Option<(u32, u32)> {
    match tag {
        Tag::Is(t) if ctx % 2 == 1 => Some((ctx, (t as u32) >> 8)),
        _ => None,
    }
}

pub(crate) struct Inner {
    pub(crate) engine: Arc<Engine>,
    /// Point-to-point context; collectives use `ctx + 1`.
    pub(crate) ctx: u32,
    /// Job rank of each communicator rank.
    pub(crate) ranks: Vec<u32>,
    of_job: HashMap<u32, u32>,
    pub(crate) rank: u32,
    /// Collectives started (shared with the engine's list, reported at finalise).
    coll_seq: Arc<AtomicU32>,
}

impl Inner {
    pub(crate) fn size(&self) -> u32 {
        self.ranks.len() as u32
    }

    pub(crate) fn job_rank(&self, r: u32) -> Result<u32, MsgError> {
        self.ranks
            .get(r as usize)
            .copied()
            .ok_or(MsgError::BadRank {
                rank: r,
                size: self.size(),
            })
    }

    fn comm_rank(&self, job: u32) -> u32 {
        self.of_job.get(&job).copied().unwrap_or(u32::MAX)
    }

    pub(crate) fn status(&self, d: &Done) -> Status {
        Status {
            source: self.comm_rank(d.src),
            tag: d.tag as i32,
            len: d.len,
            cancelled: d.cancelled,
        }
    }

    pub(crate) fn truncated(&self, d: &Done, capacity: usize) -> MsgError {
        MsgError::Truncated {
            len: d.len,
            capacity,
            source_rank: self.comm_rank(d.src),
            tag: d.tag as i32,
        }
    }

    fn pattern(&self, ctx: u32, src: Source, tag: Tag) -> Result<Pattern, MsgError> {
        let src = match src {
            Source::Any => None,
            Source::Rank(r) => Some(self.job_rank(r)?),
        };
        let tag = match tag {
            Tag::Any => None,
            Tag::Is(t) if t < 0 => return Err(MsgError::BadTag(t)),
            Tag::Is(t) => Some(t as u32),
        };
        Ok(Pattern { ctx, src, tag })
    }

    /// The base tag of the next collective call (the same on every rank, as every rank
    /// calls collectives in the same order); the low 8 bits are for its steps.
    pub(crate) fn next_coll_tag(&self) -> u32 {
        self.coll_seq
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_shl(8)
    }

    /// Blocking send in context `ctx` to communicator rank `dest`.
    pub(crate) fn send_bytes(
        &self,
        ctx: u32,
        dest: u32,
        tag: u32,
        data: &[u8],
    ) -> Result<(), MsgError> {
        let job = self.job_rank(dest)?;
        // SAFETY: `data` stays borrowed until this function returns, and the guard below
        // removes the operation from the engine before that, whatever happens.
        let buf = unsafe { Buf::borrowed_ro(data) };
        match self.engine.start_send(job, ctx, tag, buf)? {
            Started::Sent(_) => Ok(()),
            Started::Pending(id) => {
                let g = OpGuard {
                    engine: &self.engine,
                    id,
                    recv: false,
                    collective: collective_of(ctx, Tag::Is(tag as i32)),
                    _buf: PhantomData,
                };
                g.wait()
            }
        }
    }

    /// Posts a receive into `buf`; the guard removes it when dropped.
    pub(crate) fn post_bytes<'a>(
        &'a self,
        ctx: u32,
        src: Source,
        tag: Tag,
        buf: &'a mut [u8],
    ) -> Result<OpGuard<'a>, MsgError> {
        let p = self.pattern(ctx, src, tag)?;
        // SAFETY: the guard returned borrows `buf` for 'a and removes the operation from
        // the engine when dropped, so the engine never writes after the borrow ends.
        let b = unsafe { Buf::borrowed(buf) };
        let id = self.engine.post_recv(p, RecvBuf::Fixed(b));
        Ok(OpGuard {
            engine: &self.engine,
            id,
            recv: true,
            collective: collective_of(ctx, tag),
            _buf: PhantomData,
        })
    }

    /// Waits for a posted receive and turns its outcome into a status.
    pub(crate) fn finish_bytes(&self, g: OpGuard<'_>) -> Result<Status, MsgError> {
        g.wait()?;
        match g.result() {
            Some(Ok(d)) => Ok(self.status(&d)),
            Some(Err((d, cap))) => Err(self.truncated(&d, cap)),
            None => Err(MsgError::Protocol {
                peer: self.rank,
                what: "receive finished before completing".into(),
            }),
        }
    }

    /// Blocking receive in context `ctx`.
    pub(crate) fn recv_bytes(
        &self,
        ctx: u32,
        src: Source,
        tag: Tag,
        buf: &mut [u8],
    ) -> Result<Status, MsgError> {
        let g = self.post_bytes(ctx, src, tag, buf)?;
        self.finish_bytes(g)
    }
}

/// A group of ranks with a communication context of its own: MPI's communicator. Ranks
/// are relative to it. Cheap to clone (shared). The job's first communicator is the
/// `World`'s; [`Communicator::dup`] and [`Communicator::split`] make others.
///
/// Messages between two ranks of one communicator are received in the order they were
/// sent when they match the same receive (MPI's non-overtaking rule); messages of
/// different communicators never match each other.
#[derive(Clone)]
pub struct Communicator {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.inner.rank)
            .field("size", &self.inner.size())
            .field("context", &self.inner.ctx)
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
        self.inner.engine.collectives_started()
    }

    pub(crate) fn from_parts(
        engine: Arc<Engine>,
        ctx: u32,
        ranks: Vec<u32>,
    ) -> Option<Communicator> {
        let me = engine.comm.rank();
        let rank = ranks.iter().position(|&r| r == me)? as u32;
        let of_job = ranks
            .iter()
            .enumerate()
            .map(|(i, &r)| (r, i as u32))
            .collect();
        Some(Communicator {
            inner: Arc::new(Inner {
                coll_seq: engine.track_collectives(ctx + 1),
                engine,
                ctx,
                ranks,
                of_job,
                rank,
            }),
        })
    }

    /// This rank in the communicator.
    pub fn rank(&self) -> u32 {
        self.inner.rank
    }

    /// Number of ranks in the communicator.
    pub fn size(&self) -> u32 {
        self.inner.size()
    }

    /// The job rank of communicator rank `r`.
    ///
    /// # Errors
    /// [`MsgError::BadRank`].
    pub fn job_rank(&self, r: u32) -> Result<u32, MsgError> {
        self.inner.job_rank(r)
    }

    /// Whether communicator rank `r` runs on this rank's host.
    pub fn same_host(&self, r: u32) -> bool {
        let hosts = &self.inner.engine.hosts;
        let me = self.inner.engine.comm.rank() as usize;
        self.inner
            .ranks
            .get(r as usize)
            .is_some_and(|&j| hosts.get(j as usize) == hosts.get(me))
    }

    /// Host index of every rank of the communicator (equal indices share a host).
    pub(crate) fn hosts(&self) -> Vec<u32> {
        let hosts = &self.inner.engine.hosts;
        self.inner
            .ranks
            .iter()
            .map(|&j| hosts.get(j as usize).copied().unwrap_or(0))
            .collect()
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
        self.inner
            .send_bytes(self.inner.ctx, dest, tag, as_bytes(data))
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
        self.inner
            .recv_bytes(self.inner.ctx, src.into(), tag.into(), as_bytes_mut(buf))
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
        let p = self.inner.pattern(self.inner.ctx, src.into(), tag.into())?;
        let id = self.inner.engine.post_recv(p, RecvBuf::Alloc(Vec::new()));
        let c = Request::recv(self.inner.clone(), id).wait()?;
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
        let t = check_tag(tag)?;
        let job = self.inner.job_rank(dest)?;
        let len = data.len();
        match self
            .inner
            .engine
            .start_send(job, self.inner.ctx, t, Buf::owned(data))?
        {
            Started::Sent(b) => Ok(Request::send(
                self.inner.clone(),
                None,
                b.take(),
                dest,
                tag,
                len,
            )),
            Started::Pending(id) => Ok(Request::send(
                self.inner.clone(),
                Some(id),
                Vec::new(),
                dest,
                tag,
                len,
            )),
        }
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
        let p = self.inner.pattern(self.inner.ctx, src.into(), tag.into())?;
        let id = self
            .inner
            .engine
            .post_recv(p, RecvBuf::Fixed(Buf::owned(buf)));
        Ok(Request::recv(self.inner.clone(), id))
    }

    /// Sends `data` to `dest` and receives into `buf` from `src` at the same time.
    ///
    /// # Errors
    /// As [`Communicator::send`] and [`Communicator::recv`].
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
        let g = self.inner.post_bytes(
            self.inner.ctx,
            src.into(),
            recv_tag.into(),
            as_bytes_mut(buf),
        )?;
        self.inner
            .send_bytes(self.inner.ctx, dest, st, as_bytes(data))?;
        self.inner.finish_bytes(g)
    }

    /// Waits until a message matching `src` and `tag` can be received and describes it
    /// (it stays queued).
    ///
    /// # Errors
    /// [`MsgError::BadRank`], [`MsgError::BadTag`], a dead rank.
    pub fn probe(&self, src: impl Into<Source>, tag: impl Into<Tag>) -> Result<Status, MsgError> {
        let p = self.inner.pattern(self.inner.ctx, src.into(), tag.into())?;
        let mut found = None;
        self.inner.engine.comm.wait_for(|| {
            found = self.inner.engine.probe(&p);
            found.is_some()
        })?;
        let (e, len) = found.ok_or(MsgError::Protocol {
            peer: self.inner.rank,
            what: "probe ended without a message".into(),
        })?;
        Ok(self.inner.status(&Done {
            src: e.src,
            tag: e.tag,
            len,
            cancelled: false,
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
        let p = self.inner.pattern(self.inner.ctx, src.into(), tag.into())?;
        self.inner.engine.comm.progress()?;
        Ok(self.inner.engine.probe(&p).map(|(e, len)| {
            self.inner.status(&Done {
                src: e.src,
                tag: e.tag,
                len,
                cancelled: false,
            })
        }))
    }

    /// Collective: a communicator with the same ranks and a new context.
    ///
    /// # Errors
    /// A dead rank; [`MsgError::NoContext`].
    pub fn dup(&self) -> Result<Communicator, MsgError> {
        let ctx = self.new_context()?;
        Communicator::from_parts(self.inner.engine.clone(), ctx, self.inner.ranks.clone()).ok_or(
            MsgError::Protocol {
                peer: self.inner.rank,
                what: "this rank is missing from its own communicator".into(),
            },
        )
    }

    /// Collective: splits the ranks by `color`; each new communicator orders its ranks
    /// by `key`, then by their rank here. A rank passing `None` gets no communicator.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let sub = world.split(Some(3), 0).unwrap().unwrap();
    /// assert_eq!((sub.rank(), sub.size()), (0, 1));
    /// assert!(world.split(None, 0).unwrap().is_none());
    /// ```
    ///
    /// # Errors
    /// A dead rank; [`MsgError::NoContext`].
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<Communicator>, MsgError> {
        let mine = [color.map_or(u64::MAX, u64::from), key as u32 as u64];
        let mut all = vec![0u64; 2 * self.size() as usize];
        self.allgather(&mine, &mut all)?;
        let ctx = self.new_context()?;
        let Some(c) = color else {
            return Ok(None);
        };
        let mut members: Vec<(i32, u32)> = all
            .chunks_exact(2)
            .enumerate()
            .filter(|(_, x)| x[0] == u64::from(c))
            .map(|(r, x)| (x[1] as u32 as i32, r as u32))
            .collect();
        members.sort();
        let ranks = members
            .iter()
            .map(|&(_, r)| self.inner.job_rank(r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Communicator::from_parts(
            self.inner.engine.clone(),
            ctx,
            ranks,
        ))
    }

    /// Agrees on a context id unused by every member: the largest next-free id any of
    /// them knows (so it is above every context a member belongs to). Communicators must
    /// be created by one thread at a time on each rank (two concurrent `dup`s of
    /// communicators sharing ranks could agree on the same id).
    fn new_context(&self) -> Result<u32, MsgError> {
        let e = &self.inner.engine;
        let mine = e.next_ctx.load(Ordering::Acquire);
        let mut agreed = [0u32];
        self.allreduce(&[mine], &mut agreed, &crate::Op::Max)?;
        let ctx = agreed[0];
        if ctx >= MAX_CTX {
            return Err(MsgError::NoContext);
        }
        e.next_ctx.fetch_max(ctx + 2, Ordering::AcqRel);
        Ok(ctx)
    }
}
