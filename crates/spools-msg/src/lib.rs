//! Spools messaging: communicators, MPI-style tagged point-to-point messages, collectives
//! and remote procedure calls, built on the comm layer's active messages.
//!
//! - **Communicators.** The `World` is one; [`Communicator::dup`] and
//!   [`Communicator::split`] make others. Ranks are communicator-relative; every
//!   communicator has contexts of its own, so its messages never match another's.
//! - **Tagged point-to-point** with MPI's semantics: [`Communicator::send`] /
//!   [`Communicator::recv`] with tags, [`ANY_SOURCE`] and [`ANY_TAG`], non-overtaking
//!   order, a [`Status`], [`Communicator::probe`] / [`Communicator::iprobe`], truncation
//!   reported as [`MsgError::Truncated`] (never an overrun), non-blocking
//!   [`Communicator::isend`] / [`Communicator::irecv`] with [`Request::test`],
//!   [`Request::wait`], [`wait_all`], [`wait_any`] and [`Request::cancel`].
//! - **Protocols by size** (`short_limit`, `eager_limit` in the configuration): *short*
//!   (inline in one control message), *eager* (into the receiver's pre-allocated
//!   buffers; unexpected messages queued), *rendezvous* (RTS, CTS, then the data straight
//!   from the sender's buffer into the receiver's, pipelined in chunks).
//! - **Asynchronous progress.** With `progress_thread = true`, the progress thread
//!   answers rendezvous requests and streams the data while the application computes;
//!   without it, progress happens inside Spools calls.
//! - **Collectives**, blocking and non-blocking, chosen by size and rank count and aware
//!   of hosts (see the `coll` module docs).
//! - **RPC**: [`Communicator::rpc`] runs a function registered with
//!   [`Communicator::register_rpc`] on another rank and returns its result.
//!
//! ```
//! use spools::{Op, ANY_SOURCE, ANY_TAG};
//! let world = spools::init().unwrap();
//! let (me, n) = (world.rank(), world.size());
//! world.send(&[me as u64], (me + 1) % n, 5).unwrap();
//! let mut got = [0u64];
//! let st = world.recv(&mut got, ANY_SOURCE, ANY_TAG).unwrap();
//! assert_eq!((got[0] as u32, st.source, st.tag), ((me + n - 1) % n, (me + n - 1) % n, 5));
//! let mut total = [0u64];
//! world.allreduce(&[1u64], &mut total, &Op::Sum).unwrap();
//! assert_eq!(total[0], n as u64);
//! ```

mod coll;
mod communicator;
mod element;
mod engine;
mod error;
mod idhash;
mod matching;
mod request;
mod rpc;

use std::sync::Arc;

pub use coll::CollRequest;
pub use communicator::{Communicator, Source, Tag, ANY_SOURCE, ANY_TAG};
pub use element::{as_bytes, as_bytes_mut, Element, Op, UserFn};
pub use error::{MsgError, RpcError};
pub use request::{wait_all, wait_any, Completion, Request, Status};
pub use rpc::RpcFn;

use spools_am::{Endpoint, Worker};

/// Starts messaging on this rank and returns the job's first communicator (all ranks,
/// context 0). Collective: it installs the engine's handlers on every rank. `endpoint`
/// becomes the engine's sending lane; `hosts[r]` says which host job rank `r` runs on
/// (equal values share a host).
///
/// # Errors
/// A dead rank during the handler exchange.
pub fn start(comm: &Worker, endpoint: Endpoint, hosts: Vec<u32>) -> Result<Communicator, MsgError> {
    let engine = engine::Engine::new(comm.clone(), endpoint, hosts)?;
    comm.sync_handlers()?;
    engine.resolve()?;
    let ranks = (0..comm.size()).collect();
    Communicator::from_parts(engine, 0, ranks).ok_or(MsgError::Protocol {
        peer: comm.rank(),
        what: "this rank is missing from the job".into(),
    })
}

/// A call in flight; [`RpcHandle::wait`] returns the function's result.
#[must_use = "an RPC handle must be waited for to see the result"]
#[derive(Debug)]
pub struct RpcHandle {
    reply: Request,
    call: Option<Request>,
    rank: u32,
    name: String,
}

impl RpcHandle {
    /// Waits for the result.
    ///
    /// # Errors
    /// [`RpcError::UnknownFunction`], [`RpcError::Remote`] (the function's own error),
    /// [`RpcError::Panicked`], a dead rank.
    pub fn wait(self) -> Result<Vec<u8>, RpcError> {
        if let Some(c) = self.call {
            c.wait()?;
        }
        let c = self.reply.wait()?;
        rpc::decode_reply(self.rank, &self.name, c.buf)
    }

    /// Whether the reply has arrived (without driving progress).
    pub fn is_complete(&self) -> bool {
        self.reply.is_complete()
    }
}

impl Communicator {
    /// Registers `f` as RPC function `name` on this rank. Register before other ranks
    /// call it (for instance before a barrier): a call to a name the target does not
    /// know fails with [`RpcError::UnknownFunction`]. The function runs on the thread
    /// that drives progress (a Spools call or the progress thread), like a handler: it
    /// must not block or call Spools.
    ///
    /// # Errors
    /// [`RpcError::BadName`] for an empty, too long (over 255 bytes) or repeated name.
    pub fn register_rpc(
        &self,
        name: &str,
        f: impl Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync + 'static,
    ) -> Result<(), RpcError> {
        self.inner.engine.rpc.register(name, Arc::new(f))
    }

    /// Calls function `name` on rank `rank` with `args` (any size: the call travels as a
    /// short, eager or rendezvous message by its size, and so does the result).
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// world.register_rpc("double", |a| Ok(a.iter().map(|x| x * 2).collect())).unwrap();
    /// world.barrier().unwrap();
    /// let out = world.rpc(world.rank(), "double", &[1, 2, 3]).unwrap().wait().unwrap();
    /// assert_eq!(out, [2, 4, 6]);
    /// ```
    ///
    /// # Errors
    /// [`RpcError::BadName`], [`MsgError::BadRank`]; the call's own errors come from
    /// [`RpcHandle::wait`].
    pub fn rpc(&self, rank: u32, name: &str, args: &[u8]) -> Result<RpcHandle, RpcError> {
        let body = rpc::encode_call(name, args)?;
        let job = self.inner.job_rank(rank)?;
        let e = &self.inner.engine;
        let call = (e.new_id() & 0x7FFF_FFFF) as u32;
        let pattern = matching::Pattern {
            ctx: engine::RPC_REPLY_CTX,
            src: Some(job),
            tag: Some(call),
        };
        let rid = e.post_recv(pattern, engine::RecvBuf::Alloc(Vec::new()));
        let reply = Request::recv(self.inner.clone(), rid);
        let len = body.len();
        let call_req = match e.start_send(job, engine::RPC_CTX, call, engine::Buf::owned(body))? {
            engine::Started::Sent(_) => None,
            engine::Started::Pending(id) => Some(Request::send(
                self.inner.clone(),
                Some(id),
                Vec::new(),
                rank,
                call as i32,
                len,
            )),
        };
        Ok(RpcHandle {
            reply,
            call: call_req,
            rank,
            name: name.to_string(),
        })
    }
}
