//! What the stream tests over TCP share: a receiver served on a thread, test data.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::mpsc::channel;
use std::time::Duration;

use spools_proto::stream::{Open, NOT_SEQUENCED};
use spools_stream::{Delivery, Limits, Receiver, Summary};

/// The generous failure bound of every wait.
pub(crate) const BOUND: Duration = Duration::from_secs(120);

/// Serves `connections` connections on a thread; the result within a bounded wait.
pub(crate) fn serve(
    connections: usize,
) -> (
    std::net::SocketAddr,
    impl FnOnce() -> (Summary, Vec<Delivery>),
) {
    let r = Receiver::bind("127.0.0.1:0", Limits::default()).unwrap();
    serve_with(r, connections, |_| {})
}

/// Serves `connections` connections of `r` on a thread, calling `hook` on every delivery
/// before keeping it (a hook that blocks is a slow sink); the result within a bounded wait.
pub(crate) fn serve_with(
    r: Receiver,
    connections: usize,
    mut hook: impl FnMut(&Delivery) + Send + 'static,
) -> (
    std::net::SocketAddr,
    impl FnOnce() -> (Summary, Vec<Delivery>),
) {
    let addr = r.local_addr().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let s = r.serve(connections, |d| {
            hook(&d);
            got.push(d);
            Ok(())
        });
        let _ = tx.send((s.map_err(|e| e.to_string()), got));
    });
    (addr, move || {
        let (s, got) = rx.recv_timeout(BOUND).expect("the receiver ended");
        (s.unwrap(), got)
    })
}

/// `n` bytes of a pattern that differs with `seed`.
pub(crate) fn data(seed: u64, n: usize) -> Vec<u8> {
    (0..n as u64)
        .map(|i| (i.wrapping_mul(131).wrapping_add(seed) % 253) as u8)
        .collect()
}

/// A stream of fixed-size ADUs, not sequenced, in no group.
pub(crate) fn open(stream: u32, tu: u64, adu: u64) -> Open {
    Open {
        stream,
        group: 0,
        after: NOT_SEQUENCED,
        flags: 0,
        tu,
        adu,
    }
}
