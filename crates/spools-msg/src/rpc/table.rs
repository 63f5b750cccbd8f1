//! The RPC function table, and the encodings of calls and replies. A call is a message in
//! the RPC context whose tag is the call id and whose body is the function name and the
//! arguments; the target's engine receives it by itself (any size: short, eager or
//! rendezvous, chosen by size like every message), runs the function on the thread that
//! progresses, and sends the result back the same way.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use crate::error::RpcError;

/// A registered function: the argument bytes in, result bytes or an error message out.
pub type RpcFn = Arc<dyn Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync>;

const OK: u8 = 0;
const FAILED: u8 = 1;
const UNKNOWN: u8 = 2;
const PANICKED: u8 = 3;
const MALFORMED: u8 = 4;

#[derive(Default)]
pub(crate) struct RpcTable {
    fns: RwLock<HashMap<String, RpcFn>>,
}

/// The body of a call: name length, name, arguments.
pub(crate) fn encode_call(name: &str, args: &[u8]) -> Result<Vec<u8>, RpcError> {
    let n = u8::try_from(name.len()).map_err(|_| RpcError::BadName(name.to_string()))?;
    if n == 0 {
        return Err(RpcError::BadName(name.to_string()));
    }
    let mut b = Vec::with_capacity(1 + name.len() + args.len());
    b.push(n);
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(args);
    Ok(b)
}

/// Turns a reply into the function's result.
pub(crate) fn decode_reply(rank: u32, name: &str, mut reply: Vec<u8>) -> Result<Vec<u8>, RpcError> {
    let Some(&code) = reply.first() else {
        return Err(RpcError::BadReply(rank));
    };
    reply.remove(0);
    match code {
        OK => Ok(reply),
        FAILED => Err(RpcError::Remote {
            rank,
            name: name.to_string(),
            message: String::from_utf8_lossy(&reply).into_owned(),
        }),
        UNKNOWN => Err(RpcError::UnknownFunction {
            rank,
            name: name.to_string(),
        }),
        PANICKED => Err(RpcError::Panicked {
            rank,
            name: name.to_string(),
        }),
        _ => Err(RpcError::BadReply(rank)),
    }
}

impl RpcTable {
    pub(crate) fn register(&self, name: &str, f: RpcFn) -> Result<(), RpcError> {
        if name.is_empty() || name.len() > 255 {
            return Err(RpcError::BadName(name.to_string()));
        }
        let mut fns = self.fns.write().unwrap_or_else(PoisonError::into_inner);
        if fns.contains_key(name) {
            return Err(RpcError::BadName(name.to_string()));
        }
        fns.insert(name.to_string(), f);
        Ok(())
    }

    /// Runs a call's body and returns the reply: a status byte, then the result or the
    /// error message.
    pub(crate) fn run(&self, body: &[u8]) -> Vec<u8> {
        let parsed = body.split_first().and_then(|(&n, rest)| {
            let n = usize::from(n);
            (rest.len() >= n).then(|| (&rest[..n], &rest[n..]))
        });
        let Some((name, args)) = parsed else {
            return vec![MALFORMED];
        };
        let f = self
            .fns
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(String::from_utf8_lossy(name).as_ref())
            .cloned();
        let Some(f) = f else {
            return vec![UNKNOWN];
        };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(args))) {
            Ok(Ok(mut out)) => {
                out.insert(0, OK);
                out
            }
            Ok(Err(msg)) => {
                let mut out = vec![FAILED];
                out.extend_from_slice(msg.as_bytes());
                out
            }
            Err(_) => vec![PANICKED],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_replies_round_trip() {
        let t = RpcTable::default();
        t.register("echo", Arc::new(|a: &[u8]| Ok(a.to_vec())))
            .unwrap_or_else(|e| unreachable!("{e}"));
        t.register("fail", Arc::new(|_: &[u8]| Err("no".to_string())))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert!(t.register("echo", Arc::new(|_: &[u8]| Ok(vec![]))).is_err());
        assert!(t.register("", Arc::new(|_: &[u8]| Ok(vec![]))).is_err());
        let call = |name: &str, args: &[u8]| {
            let body = encode_call(name, args).unwrap_or_else(|e| unreachable!("{e}"));
            decode_reply(3, name, t.run(&body))
        };
        assert_eq!(call("echo", b"abc").ok(), Some(b"abc".to_vec()));
        assert!(
            matches!(call("fail", b""), Err(RpcError::Remote { message, .. }) if message == "no")
        );
        assert!(matches!(
            call("nope", b""),
            Err(RpcError::UnknownFunction { rank: 3, .. })
        ));
        assert!(matches!(
            decode_reply(1, "x", t.run(&[9])),
            Err(RpcError::BadReply(1))
        ));
        assert!(matches!(
            decode_reply(1, "x", vec![]),
            Err(RpcError::BadReply(1))
        ));
        assert!(encode_call(&"x".repeat(256), b"").is_err());
    }
}
