//! Remote procedure calls (StarT-X JAM RPC) over tagged messages: a call is a message in
//! the RPC context whose tag is the call id and whose body is the function name and the
//! arguments; the target's engine receives it by itself (any size: short, eager or
//! rendezvous, chosen by size like every message), runs the function on the thread that
//! progresses, and sends the result back the same way. `table` holds the registered
//! functions and the call and reply encodings; this file the caller's side.

pub(crate) mod table;

use std::sync::Arc;

use crate::buffer::{Buf, RecvBuf};
use crate::communicator::Communicator;
use crate::engine::SendStart;
use crate::error::RpcError;
use crate::protocol::wire::{RPC_CTX, RPC_REPLY_CTX};
use crate::protocol::Pattern;
use crate::request::Request;

pub use table::RpcFn;

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
        table::decode_reply(self.rank, &self.name, c.buf)
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
        self.core.engine.rpc.register(name, Arc::new(f))
    }

    /// Calls function `name` on rank `rank` with `args` (any size: the call travels as a
    /// short, eager or rendezvous message by its size, and so does the result).
    ///
    /// ```
    /// use spools::RpcError;
    /// let world = spools::init().unwrap();
    /// let (me, n) = (world.rank(), world.size());
    /// // Each rank's function scales the bytes by its rank plus one.
    /// let k = me as u8 + 1;
    /// world
    ///     .register_rpc("scale", move |a| Ok(a.iter().map(|x| x * k).collect()))
    ///     .unwrap();
    /// world.register_rpc("refuse", |_| Err("not today".into())).unwrap();
    /// world.barrier().unwrap(); // every rank has registered
    /// let next = (me + 1) % n;
    /// let out = world.rpc(next, "scale", &[1, 2, 3]).unwrap().wait().unwrap();
    /// let k = next as u8 + 1;
    /// assert_eq!(out, [k, 2 * k, 3 * k]);
    /// // The function's own error comes back, naming the rank.
    /// match world.rpc(next, "refuse", b"").unwrap().wait() {
    ///     Err(RpcError::Remote { rank, message, .. }) => {
    ///         assert_eq!((rank, message.as_str()), (next, "not today"))
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// ```
    ///
    /// # Errors
    /// [`RpcError::BadName`], [`crate::MsgError::BadRank`]; the call's own errors come
    /// from [`RpcHandle::wait`].
    pub fn rpc(&self, rank: u32, name: &str, args: &[u8]) -> Result<RpcHandle, RpcError> {
        let body = table::encode_call(name, args)?;
        let job = self.core.job_rank(rank)?;
        let e = &self.core.engine;
        let call = e.new_rpc_call_id();
        let pattern = Pattern {
            ctx: RPC_REPLY_CTX,
            src: Some(job),
            tag: Some(call),
        };
        let reply_id = e.post_recv(pattern, RecvBuf::Alloc(Vec::new()));
        let reply = Request::recv(self.core.clone(), reply_id);
        let len = body.len();
        let call_req = match e.start_send(job, RPC_CTX, call, Buf::owned(body))? {
            SendStart::Complete(_) => None,
            SendStart::Rendezvous(id) => Some(Request::send(
                self.core.clone(),
                Some(id),
                Vec::new(),
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
