//! Requests of non-blocking operations, and waiting for several.

use std::sync::Arc;

use crate::comm_core::CommCore;
use crate::engine::Engine;
use crate::error::MsgError;
use crate::status::{Completion, Status};

/// The operation a request stands for.
enum RequestOp {
    /// A send that already left (`id` is `None`), or rendezvous send `id`.
    Send {
        id: Option<u64>,
        buf: Vec<u8>,
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
    comm: Arc<CommCore>,
    op: Option<RequestOp>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let k = match &self.op {
            Some(RequestOp::Send { .. }) => "send",
            Some(RequestOp::Recv { .. }) => "recv",
            None => "finished",
        };
        f.debug_struct("Request").field("kind", &k).finish()
    }
}

impl Request {
    pub(crate) fn send(
        comm: Arc<CommCore>,
        id: Option<u64>,
        buf: Vec<u8>,
        tag: i32,
        len: usize,
    ) -> Request {
        Request {
            comm,
            op: Some(RequestOp::Send { id, buf, tag, len }),
        }
    }

    pub(crate) fn recv(comm: Arc<CommCore>, id: u64) -> Request {
        Request {
            comm,
            op: Some(RequestOp::Recv { id }),
        }
    }

    fn engine(&self) -> &Engine {
        &self.comm.engine
    }

    /// Waits, and removes the operation from the engine when the wait itself fails (an
    /// interrupt, a dead rank): a blocking call on memory the engine reaches through a
    /// [`crate::ScatterBuf`], a [`crate::GatherBuf`] or a [`crate::PinnedBuf`] returns
    /// with nothing more read from or written to it, whatever happens (a dropped request
    /// would finish in the background).
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let r = world.irecv(vec![0u8; 4], 0, 8).unwrap();
    /// world.send(b"pong", 0, 8).unwrap();
    /// assert_eq!(r.wait_or_release().unwrap().buf, b"pong");
    /// ```
    ///
    /// # Errors
    /// As [`Request::wait`].
    pub fn wait_or_release(mut self) -> Result<Completion, MsgError> {
        let done = self.wait_in_place();
        if done.is_err() {
            self.release_now();
        }
        done
    }

    /// Removes the operation from the engine now, finished or not: a receive that has not
    /// completed is dropped, with any message it matched (the rest of a streamed one is
    /// discarded as it comes), and a send that has not completed leaves no more bytes.
    /// Nothing of the request's memory is read or written after it returns. For a call
    /// that gives up on an operation it started (its other half failed).
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let r = world.irecv(vec![0u8; 4], 0, 9).unwrap();
    /// r.release();
    /// world.send(b"late", 0, 9).unwrap();
    /// // The message was not taken by the released receive.
    /// assert_eq!(world.recv_vec(0, 9).unwrap().0, b"late");
    /// ```
    pub fn release(mut self) {
        self.release_now();
    }

    fn release_now(&mut self) {
        match self.op.take() {
            Some(RequestOp::Send { id: Some(id), .. }) => {
                self.engine().release_send(id);
            }
            Some(RequestOp::Recv { id }) => {
                self.engine().release_recv(id);
            }
            _ => {}
        }
    }

    /// The worker whose progress completes the operation (its communicator's job's).
    pub fn worker(&self) -> &spools_am::Worker {
        &self.engine().worker
    }

    /// Whether the operation is complete, without driving progress.
    pub fn is_complete(&self) -> bool {
        match &self.op {
            Some(RequestOp::Send { id: Some(id), .. }) => self.engine().send_complete(*id),
            Some(RequestOp::Recv { id }) => self.engine().recv_outcome(*id).is_some(),
            _ => true,
        }
    }

    /// Drives progress once and says whether the operation is complete (then
    /// [`Request::wait`] returns at once).
    ///
    /// # Errors
    /// Transport failures.
    pub fn test(&mut self) -> Result<bool, MsgError> {
        self.engine().worker.progress()?;
        Ok(self.is_complete())
    }

    /// Cancels a receive that no message has matched yet; `true` if it was cancelled
    /// (then `wait` reports `status.cancelled`). Sends cannot be cancelled.
    pub fn cancel(&self) -> bool {
        match &self.op {
            Some(RequestOp::Recv { id }) => self.engine().cancel_recv(*id),
            _ => false,
        }
    }

    /// Waits until the operation completes: spin, then sleep until woken.
    ///
    /// # Errors
    /// [`MsgError::Truncated`] (nothing past the buffer's end was written; the buffer
    /// is dropped), a dead rank, transport failures.
    pub fn wait(mut self) -> Result<Completion, MsgError> {
        self.wait_in_place()
    }

    /// [`Request::wait`] that keeps the request when the wait itself fails (an
    /// interrupted wait, a dead peer): it can be waited for again. Once it returned a
    /// completion (or the operation's own error) the request is finished, and a later
    /// call is an error.
    ///
    /// # Errors
    /// As [`Request::wait`].
    pub fn wait_in_place(&mut self) -> Result<Completion, MsgError> {
        let engine: &Engine = &self.comm.engine;
        let mut seen = None;
        let recv = match self.op {
            Some(RequestOp::Recv { id }) => Some(id),
            _ => None,
        };
        let state = engine.worker.bootstrap().state();
        let mut orphaned = None;
        let done = engine.worker.wait_for_or(
            || {
                let g = engine.generation();
                if seen == Some(g) {
                    return false;
                }
                seen = Some(g);
                self.is_complete()
            },
            || {
                // A receive from a rank that finalised, all its messages in and none
                // matching, never completes (end of data).
                orphaned = recv
                    .filter(|_| state.any_finalizing())
                    .and_then(|id| engine.orphaned_recv(id));
                orphaned.is_some()
            },
        )?;
        if let (Some((rank, sent)), false) = (orphaned, done) {
            // An interrupt that came meanwhile (Ctrl-C) wins, as in a wait that slept.
            engine.worker.check_interrupt()?;
            // The request stays: it may be cancelled or dropped.
            return Err(MsgError::SourceFinalized { rank, sent });
        }
        self.finish()
    }

    /// Takes the result of a complete operation.
    fn finish(&mut self) -> Result<Completion, MsgError> {
        let engine: &Engine = &self.comm.engine;
        match self.op.take() {
            Some(RequestOp::Send { id, buf, tag, len }) => {
                let buf = match id {
                    Some(id) => engine.release_send(id),
                    None => buf,
                };
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
            Some(RequestOp::Recv { id }) => {
                // Outcome and buffer in one step; a pending receive is released anyway.
                match engine.finish_recv(id) {
                    Some((o, buf)) => self
                        .comm
                        .outcome(o)
                        .map(|status| Completion { buf, status }),
                    None => {
                        engine.release_recv(id);
                        Err(MsgError::Protocol {
                            peer: self.comm.rank,
                            what: "receive finished before completing",
                        })
                    }
                }
            }
            None => Err(MsgError::Protocol {
                peer: self.comm.rank,
                what: "request already finished",
            }),
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        match self.op.take() {
            Some(RequestOp::Send { id: Some(id), .. }) => self.engine().detach_send(id),
            Some(RequestOp::Recv { id }) => self.engine().detach_recv(id),
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
    wait_any_at(reqs).map_err(|(_, e)| e)
}

/// [`wait_any`], with the index of the request that failed (removed from `reqs`) beside
/// the error, or `None` when the wait itself failed (a dead peer) and `reqs` is intact:
/// for a caller that keeps a parallel list of what each request is.
///
/// # Errors
/// As [`wait_any`].
pub fn wait_any_at(
    reqs: &mut Vec<Request>,
) -> Result<(usize, Completion), (Option<usize>, MsgError)> {
    let Some(first) = reqs.first() else {
        return Err((
            None,
            MsgError::BadBuffer {
                op: "wait_any",
                rule: "at least one request is needed",
                got: 0,
                want: 1,
            },
        ));
    };
    let engine: &Engine = &first.comm.engine;
    let state = engine.worker.bootstrap().state();
    let mut hit = None;
    let mut orphaned = None;
    let done = engine
        .worker
        .wait_for_or(
            || {
                hit = reqs.iter().position(Request::is_complete);
                hit.is_some()
            },
            || {
                // A receive from a rank that finalised, all its messages in and none
                // matching, never completes (end of data): it fails.
                if state.any_finalizing() {
                    orphaned = reqs.iter().enumerate().find_map(|(i, r)| match r.op {
                        Some(RequestOp::Recv { id }) => {
                            r.engine().orphaned_recv(id).map(|o| (i, o))
                        }
                        _ => None,
                    });
                }
                orphaned.is_some()
            },
        )
        .map_err(|e| (None, e.into()))?;
    if let (false, Some((i, (rank, sent)))) = (done, orphaned) {
        engine
            .worker
            .check_interrupt()
            .map_err(|e| (None, e.into()))?;
        // The failed request is removed (dropping it cancels the receive).
        drop(reqs.remove(i));
        return Err((Some(i), MsgError::SourceFinalized { rank, sent }));
    }
    let i = hit.unwrap_or(0);
    let mut r = reqs.remove(i);
    r.finish().map(|c| (i, c)).map_err(|e| (Some(i), e))
}
