//! Requests of non-blocking operations, and the guards that keep borrowed buffers of
//! blocking operations safe.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::communicator::Inner;
use crate::engine::{Done, Engine};
use crate::MsgError;

/// What a completed receive (or send) reports: MPI's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The sender, as a rank of the communicator (for a send: this rank).
    pub source: u32,
    /// The message's tag.
    pub tag: i32,
    /// Bytes received (for a send: bytes sent).
    pub len: usize,
    /// Whether the receive was cancelled before any message matched it.
    pub cancelled: bool,
}

impl Status {
    /// Elements of type `T` received (whole elements only).
    pub fn count<T>(&self) -> usize {
        self.len / std::mem::size_of::<T>().max(1)
    }
}

/// A completed non-blocking operation: its buffer back, and its status.
#[derive(Debug)]
pub struct Completion {
    /// The buffer given to `isend` or `irecv`, with the message in it for a receive.
    pub buf: Vec<u8>,
    /// What happened.
    pub status: Status,
}

enum Kind {
    /// A send that already left, or a rendezvous `id`.
    Send {
        id: Option<u64>,
        buf: Vec<u8>,
        dest: u32,
        tag: i32,
        len: usize,
    },
    Recv {
        id: u64,
    },
}

/// A non-blocking send or receive in flight. It owns its buffer, which
/// [`Request::wait`] gives back. Dropping an unfinished request cancels a receive that
/// has not matched yet; anything else finishes in the background.
#[must_use = "a request does nothing unless waited for or tested"]
pub struct Request {
    comm: Arc<Inner>,
    kind: Option<Kind>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let k = match &self.kind {
            Some(Kind::Send { .. }) => "send",
            Some(Kind::Recv { .. }) => "recv",
            None => "finished",
        };
        f.debug_struct("Request").field("kind", &k).finish()
    }
}

impl Request {
    pub(crate) fn send(
        comm: Arc<Inner>,
        id: Option<u64>,
        buf: Vec<u8>,
        dest: u32,
        tag: i32,
        len: usize,
    ) -> Request {
        Request {
            comm,
            kind: Some(Kind::Send {
                id,
                buf,
                dest,
                tag,
                len,
            }),
        }
    }

    pub(crate) fn recv(comm: Arc<Inner>, id: u64) -> Request {
        Request {
            comm,
            kind: Some(Kind::Recv { id }),
        }
    }

    fn engine(&self) -> &Engine {
        &self.comm.engine
    }

    /// Whether the operation is complete, without driving progress.
    pub fn is_complete(&self) -> bool {
        match &self.kind {
            Some(Kind::Send { id: Some(id), .. }) => self.engine().send_done(*id),
            Some(Kind::Recv { id }) => self.engine().recv_result(*id).is_some(),
            _ => true,
        }
    }

    /// Drives progress once and says whether the operation is complete (then
    /// [`Request::wait`] returns at once).
    ///
    /// # Errors
    /// Transport failures.
    pub fn test(&mut self) -> Result<bool, MsgError> {
        self.engine().comm.progress()?;
        Ok(self.is_complete())
    }

    /// Cancels a receive that no message has matched yet; `true` if it was cancelled
    /// (then `wait` reports `status.cancelled`). Sends cannot be cancelled.
    pub fn cancel(&self) -> bool {
        match &self.kind {
            Some(Kind::Recv { id }) => self.engine().cancel_recv(*id),
            _ => false,
        }
    }

    /// Waits until the operation completes: spin, then sleep until woken.
    ///
    /// # Errors
    /// [`MsgError::Truncated`] (nothing past the buffer's end was written; the buffer
    /// is dropped), a dead rank, transport failures.
    pub fn wait(mut self) -> Result<Completion, MsgError> {
        let engine = self.comm.engine.clone();
        let mut seen = None;
        engine.comm.wait_for(|| {
            let g = engine.generation();
            if seen == Some(g) {
                return false;
            }
            seen = Some(g);
            self.is_complete()
        })?;
        self.finish()
    }

    /// Takes the result of a complete operation.
    fn finish(&mut self) -> Result<Completion, MsgError> {
        let engine = self.comm.engine.clone();
        match self.kind.take() {
            Some(Kind::Send {
                id,
                buf,
                dest,
                tag,
                len,
            }) => {
                let buf = match id {
                    Some(id) => engine.finish_send(id),
                    None => buf,
                };
                let _ = dest;
                Ok(Completion {
                    buf,
                    status: Status {
                        source: self.comm.rank,
                        tag,
                        len,
                        cancelled: false,
                    },
                })
            }
            Some(Kind::Recv { id }) => {
                let r = engine.recv_result(id);
                let buf = engine.finish_recv(id);
                match r {
                    Some(Ok(d)) => Ok(Completion {
                        buf,
                        status: self.comm.status(&d),
                    }),
                    Some(Err((d, cap))) => Err(self.comm.truncated(&d, cap)),
                    None => Err(MsgError::Protocol {
                        peer: self.comm.rank,
                        what: "receive finished before completing".into(),
                    }),
                }
            }
            None => Err(MsgError::Protocol {
                peer: self.comm.rank,
                what: "request already finished".into(),
            }),
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        match self.kind.take() {
            Some(Kind::Send { id: Some(id), .. }) => self.engine().orphan_send(id),
            Some(Kind::Recv { id }) => self.engine().orphan_recv(id),
            _ => {}
        }
    }
}

/// Waits for every request; the completions come in the same order.
///
/// # Errors
/// The first error of any request (the others are still waited for).
pub fn wait_all(reqs: Vec<Request>) -> Result<Vec<Completion>, MsgError> {
    let mut out = Vec::with_capacity(reqs.len());
    let mut first_err = None;
    for r in reqs {
        match r.wait() {
            Ok(c) => out.push(c),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Waits until one of the requests completes, removes it from `reqs` and returns its
/// index (in `reqs` before the removal) and its completion.
///
/// # Errors
/// [`MsgError::BadBuffer`] for an empty list; the completed request's error.
pub fn wait_any(reqs: &mut Vec<Request>) -> Result<(usize, Completion), MsgError> {
    let Some(first) = reqs.first() else {
        return Err(MsgError::BadBuffer {
            op: "wait_any",
            what: "no requests".into(),
        });
    };
    let engine = first.comm.engine.clone();
    let mut hit = None;
    engine.comm.wait_for(|| {
        hit = reqs.iter().position(Request::is_complete);
        hit.is_some()
    })?;
    let i = hit.unwrap_or(0);
    let mut r = reqs.remove(i);
    r.finish().map(|c| (i, c))
}

/// A blocking operation's hold on the engine: removes the operation, under the engine's
/// lock, when dropped, so that a borrowed buffer is never touched after the call returns
/// (on success, error or panic alike).
pub(crate) struct OpGuard<'a> {
    pub(crate) engine: &'a Engine,
    pub(crate) id: u64,
    pub(crate) recv: bool,
    /// The collective (context, number) this operation is a step of, if any.
    pub(crate) collective: Option<(u32, u32)>,
    pub(crate) _buf: PhantomData<&'a mut [u8]>,
}

impl OpGuard<'_> {
    pub(crate) fn done(&self) -> bool {
        if self.recv {
            self.engine.recv_result(self.id).is_some()
        } else {
            self.engine.send_done(self.id)
        }
    }

    pub(crate) fn wait(&self) -> Result<(), MsgError> {
        let mut seen = None;
        let mut blocker = None;
        let state = self.engine.comm.bootstrap().state();
        let done = self.engine.comm.wait_for_or(
            || {
                // Look the operation up only after some operation completed.
                let g = self.engine.generation();
                if seen == Some(g) {
                    return false;
                }
                seen = Some(g);
                self.done()
            },
            || {
                // A rank that finalised before starting this collective never will.
                blocker = self
                    .collective
                    .and_then(|(ctx, k)| state.collective_blocker(ctx, k).map(|b| (b, k)));
                blocker.is_some()
            },
        )?;
        match blocker {
            Some(((rank, started), waiting)) if !done => {
                let e = MsgError::PeerFinalized {
                    rank,
                    started,
                    waiting,
                };
                // The job is over: end it in the name of the rank at fault.
                self.engine.comm.bootstrap().blame(
                    rank,
                    &format!(
                        "it finalised after {started} collective(s) on a communicator whose collective #{waiting} other ranks wait in"
                    ),
                );
                Err(e)
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn result(&self) -> Option<Result<Done, (Done, usize)>> {
        self.engine.recv_result(self.id)
    }
}

impl Drop for OpGuard<'_> {
    fn drop(&mut self) {
        if self.recv {
            self.engine.finish_recv(self.id);
        } else {
            self.engine.finish_send(self.id);
        }
    }
}
