//! Partitioned point-to-point communication (`MPI_Psend_init`, `MPI_Precv_init`,
//! `MPI_Pready(_range/_list)`, `MPI_Parrived`): a persistent send whose buffer the
//! program fills in partitions, marking each ready, and the persistent receive that
//! matches it.
//!
//! Each start carries one message: the send goes out when its last partition is marked
//! ready; a partition has arrived when the whole message has (MPI lets a partition be
//! reported later than it came). The messages travel in the communicator's partitioned
//! context (`Communicator::partitioned`), so that no point-to-point receive takes them.
//! MPI matches a partitioned send and receive once, by the order of their init calls
//! (each request has a number among those made on its communicator for its direction,
//! peer and tag), whatever the order they are started in: a message's tag in that
//! context is a 31-bit mix of the program's tag and the send request's number, so a
//! receive takes only the message of its own send request, and the message carries both
//! (its header). Two requests active at once whose mixes coincide (a chance of 2^-31
//! per pair) and are started out of order are refused (`MPI_ERR_REQUEST`): a receive
//! never takes another request's data.

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use spools::{Communicator, Source, Tag};

use crate::abi::*;
use crate::comm::comm;
use crate::datatype::{buffer, bytes_of, committed, count as ccount, TypeObj};
use crate::env::errhandler::{on_comm, on_self};
use crate::env::error::MpiError;
use crate::out::out;
use crate::p2p::request::{deliver, empty_status, give_persistent, CollOp, Op};
use crate::p2p::{data, dest, send_tag};

/// What a partitioned request sends or receives, and its state at this start.
struct Part {
    /// The communicator's partitioned context.
    comm: Communicator,
    /// The peer (`None`: `MPI_PROC_NULL`).
    peer: Option<u32>,
    tag: i32,
    /// The program's buffer: `n` elements of `t`.
    addr: usize,
    n: usize,
    t: Arc<TypeObj>,
    /// How many partitions the program marks (a send) or asks about (a receive).
    parts: usize,
    send: bool,
    /// Its number among the partitioned requests made on the communicator for this
    /// direction, peer and tag (`CommObj::next_part_init`): each message carries it,
    /// and a receive refuses one of another number (requests started out of the order
    /// they were made) rather than take another request's data.
    init: u64,
    state: Mutex<State>,
}

/// A partitioned request's state at its current start.
#[derive(Default)]
struct State {
    /// Started and not yet completed by a wait or test.
    active: bool,
    /// For a send: which partitions the program marked ready.
    marked: Vec<bool>,
    /// For a send: how many are still to be marked.
    left: usize,
    /// The message in flight.
    req: Option<spools::Request>,
    /// The status it completed with (a receive's data already delivered).
    done: Option<MPI_Status>,
    /// Why the send could not be posted at its last `MPI_Pready` (given to the wait).
    failed: Option<MpiError>,
}

/// The bytes before a partitioned message's data: the number of its send request
/// (`Part::init`) and the program's tag.
const HEADER: usize = 12;

/// The tag of the messages of the request numbered `init` for the program's tag `tag`
/// (non-negative): a mix of the two (splitmix64's finaliser), so that requests of one
/// tag and peer started out of the order they were made each meet their own match.
fn wire_tag(tag: i32, init: u64) -> i32 {
    let mut x = (u64::from(tag as u32) << 32 ^ init).wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x & 0x7fff_ffff) as i32
}

/// The partitioned requests, by handle, for `MPI_Pready` and `MPI_Parrived` (which may
/// come from another thread while one waits for the request). Weak: a freed request's
/// entry dies with it, and a handle given anew replaces its entry.
static PARTS: Mutex<Vec<(MPI_Request, Weak<Part>)>> = Mutex::new(Vec::new());

impl Part {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new start: the receive is posted, a send waits for its partitions (one of no
    /// partitions, or to `MPI_PROC_NULL`, goes at once).
    fn start(&self) -> Result<(), MpiError> {
        let mut s = self.state();
        *s = State {
            active: true,
            marked: vec![false; self.parts],
            left: self.parts,
            req: None,
            done: None,
            failed: None,
        };
        if self.peer.is_none() {
            s.done = Some(if self.send {
                empty_status()
            } else {
                crate::p2p::request::proc_null_status()
            });
            return Ok(());
        }
        if !self.send || self.parts == 0 {
            self.post(&mut s)?;
        }
        Ok(())
    }

    /// Puts the message on the wire: the send of the whole buffer, or the receive.
    fn post(&self, s: &mut State) -> Result<(), MpiError> {
        let Some(peer) = self.peer else {
            return Ok(());
        };
        s.req = Some(if self.send {
            // SAFETY: MPI's contract: the buffer holds `n` elements while the request
            // is active, and every partition is ready now.
            let bytes = unsafe { data(self.addr as *const c_void, self.n, &self.t) };
            let mut msg = Vec::with_capacity(HEADER + bytes.len());
            msg.extend_from_slice(&self.init.to_le_bytes());
            msg.extend_from_slice(&self.tag.to_le_bytes());
            msg.extend_from_slice(&bytes);
            self.comm.isend(msg, peer, wire_tag(self.tag, self.init))?
        } else {
            let len = bytes_of(self.n, &self.t, "MPI_Precv_init")?;
            self.comm.irecv(
                vec![0u8; HEADER + len],
                Source::Rank(peer),
                Tag::Is(wire_tag(self.tag, self.init)),
            )?
        });
        Ok(())
    }

    /// Drives the message once; whether it completed (a receive's data is then in the
    /// program's buffer).
    fn advance(&self, s: &mut State) -> Result<bool, MpiError> {
        if let Some(e) = s.failed.take() {
            s.active = false;
            s.done = Some(empty_status());
            return Err(e);
        }
        if s.done.is_some() {
            return Ok(true);
        }
        let Some(r) = s.req.as_mut() else {
            return Ok(false);
        };
        if !r.test()? {
            return Ok(false);
        }
        if let Some(r) = s.req.take() {
            self.settle(s, r)?;
        }
        Ok(true)
    }

    /// Waits for the message `r` and records how it ended: its status, or (after an
    /// error, reported once) an empty one.
    fn settle(&self, s: &mut State, r: spools::Request) -> Result<(), MpiError> {
        match r
            .wait()
            .map_err(MpiError::from)
            .and_then(|c| self.completed(c))
        {
            Ok(st) => {
                s.done = Some(st);
                Ok(())
            }
            Err(e) => {
                s.done = Some(empty_status());
                Err(e)
            }
        }
    }

    /// The status of the completed message `c`; a receive's data delivered to the
    /// program's buffer.
    fn completed(&self, mut c: spools::Completion) -> Result<MPI_Status, MpiError> {
        if self.send {
            return Ok(empty_status());
        }
        let init = c
            .buf
            .get(..8)
            .and_then(|h| h.try_into().ok())
            .map(u64::from_le_bytes);
        let tag = c
            .buf
            .get(8..HEADER)
            .and_then(|h| h.try_into().ok())
            .map(i32::from_le_bytes);
        if c.status.len < HEADER || init != Some(self.init) || tag != Some(self.tag) {
            return Err(MpiError::invalid(
                MPI_ERR_REQUEST,
                format!(
                    "a partitioned receive (request {} made for its peer and tag {}) met the \
                     message of send request {init:?} of tag {tag:?}: their messages' tags \
                     coincide (a chance of 2^-31), and they were started out of the order \
                     they were made",
                    self.init, self.tag
                ),
            ));
        }
        c.buf.drain(..HEADER);
        c.status.len -= HEADER;
        c.status.tag = self.tag;
        // SAFETY: the program's buffer holds `n` elements of `t` while the request is
        // active (MPI's contract); the message fitted it.
        Ok(unsafe { deliver(c, self.addr, &self.t) })
    }

    /// `MPI_Pready` of partition `i`.
    fn ready(&self, i: c_int, call: &'static str) -> Result<(), MpiError> {
        let mut s = self.state();
        if !self.send || !s.active {
            return Err(MpiError::invalid(
                MPI_ERR_REQUEST,
                format!("{call}: not an active partitioned send (start it first)"),
            ));
        }
        let k = usize::try_from(i)
            .ok()
            .filter(|&k| k < self.parts)
            .ok_or_else(|| {
                MpiError::invalid(
                    MPI_ERR_ARG,
                    format!("{call}: partition {i} is not in 0..{}", self.parts),
                )
            })?;
        if std::mem::replace(&mut s.marked[k], true) {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: partition {i} is already marked ready at this start"),
            ));
        }
        s.left -= 1;
        if s.left == 0 {
            if let Err(e) = self.post(&mut s) {
                // The wait reports it too (it would otherwise wait for a send that
                // never went).
                let again = MpiError::invalid(e.class(), e.to_string());
                s.failed = Some(e);
                return Err(again);
            }
        }
        Ok(())
    }

    /// `MPI_Parrived` of partition `i`.
    fn arrived(&self, i: c_int) -> Result<bool, MpiError> {
        let mut s = self.state();
        if self.send || (!s.active && s.done.is_none()) {
            return Err(MpiError::invalid(
                MPI_ERR_REQUEST,
                "MPI_Parrived: not an active partitioned receive (start it first)",
            ));
        }
        if usize::try_from(i).map_or(true, |k| k >= self.parts) {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("MPI_Parrived: partition {i} is not in 0..{}", self.parts),
            ));
        }
        self.advance(&mut s)
    }
}

/// One start of a partitioned request, as the request table holds it.
struct Run(Arc<Part>);

impl CollOp for Run {
    fn poll(&mut self) -> Result<bool, MpiError> {
        let mut s = self.0.state();
        self.0.advance(&mut s)
    }

    fn finish(self: Box<Self>) -> Result<(), MpiError> {
        self.finish_status().map(drop)
    }

    fn finish_status(self: Box<Self>) -> Result<MPI_Status, MpiError> {
        loop {
            let mut s = self.0.state();
            if self.0.advance(&mut s)? {
                s.active = false;
                return Ok(s.done.unwrap_or_else(empty_status));
            }
            let waiting = s.req.is_none();
            drop(s);
            if waiting {
                // The program's other threads still mark partitions ready.
                std::thread::yield_now();
            } else {
                let mut s = self.0.state();
                if let Some(r) = s.req.take() {
                    if let Err(e) = self.0.settle(&mut s, r) {
                        s.active = false;
                        return Err(e);
                    }
                }
            }
        }
    }
}

/// The partitioned request `h`.
fn find(h: MPI_Request, call: &'static str) -> Result<Arc<Part>, MpiError> {
    PARTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .find(|(k, _)| *k == h)
        .and_then(|(_, w)| w.upgrade())
        .ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_REQUEST,
                format!("{call}: request {h:#x} is not a partitioned request"),
            )
        })
}

/// Makes a partitioned request.
///
/// # Safety
/// `request` is writable.
unsafe fn init(
    buf: usize,
    partitions: c_int,
    count: MPI_Count,
    datatype: MPI_Datatype,
    peer: c_int,
    tag: c_int,
    comm_h: MPI_Comm,
    request: *mut MPI_Request,
    send: bool,
) -> c_int {
    let call = if send {
        "MPI_Psend_init"
    } else {
        "MPI_Precv_init"
    };
    let r = (|| {
        let c = comm(comm_h, call)?;
        let t = committed(datatype, call)?;
        let parts = usize::try_from(partitions).map_err(|_| {
            MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: {partitions} partitions (must be non-negative)"),
            )
        })?;
        let per = ccount(count, call)?;
        let n = per.checked_mul(parts).ok_or_else(|| {
            MpiError::invalid(MPI_ERR_COUNT, format!("{call}: the buffer is too large"))
        })?;
        bytes_of(n, &t, call)?;
        buffer(buf, n, &t, call, "buf")?;
        if peer == MPI_ANY_SOURCE || tag == MPI_ANY_TAG {
            return Err(MpiError::invalid(
                if peer == MPI_ANY_SOURCE {
                    MPI_ERR_RANK
                } else {
                    MPI_ERR_TAG
                },
                format!("{call}: partitioned requests name their peer and tag (no wildcards)"),
            ));
        }
        let to = dest(&c, peer, call)?;
        let tag = send_tag(tag, call)?;
        let part = Arc::new(Part {
            comm: c.comm.partitioned()?,
            peer: to,
            tag,
            init: to.map_or(0, |p| c.next_part_init(send, p, tag)),
            addr: buf,
            n,
            t,
            parts,
            send,
            state: Mutex::new(State::default()),
        });
        let mut table = PARTS.lock().unwrap_or_else(PoisonError::into_inner);
        let p = part.clone();
        let h = give_persistent(
            Box::new(move || {
                p.start()?;
                Ok(Op::Coll(Box::new(Run(p.clone()))))
            }),
            comm_h,
        )?;
        table.retain(|(k, w)| *k != h && w.strong_count() > 0);
        table.push((h, Arc::downgrade(&part)));
        drop(table);
        // SAFETY: the caller's contract.
        unsafe { out(request, h, call) }
    })();
    on_comm(comm_h, r)
}

/// `MPI_Psend_init`: a partitioned send of `partitions` partitions of `count` elements.
#[no_mangle]
pub unsafe extern "C" fn MPI_Psend_init(
    buf: *const c_void,
    partitions: c_int,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info;
    // SAFETY: the caller's contract.
    unsafe {
        init(
            buf as usize,
            partitions,
            count,
            datatype,
            dest,
            tag,
            comm,
            request,
            true,
        )
    }
}

/// `MPI_Precv_init`: a partitioned receive of `partitions` partitions of `count`
/// elements.
#[no_mangle]
pub unsafe extern "C" fn MPI_Precv_init(
    buf: *mut c_void,
    partitions: c_int,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info;
    // SAFETY: the caller's contract.
    unsafe {
        init(
            buf as usize,
            partitions,
            count,
            datatype,
            dest,
            tag,
            comm,
            request,
            false,
        )
    }
}

/// Marks partitions ready on request `h`.
fn mark(h: MPI_Request, parts: impl Iterator<Item = c_int>, call: &'static str) -> c_int {
    on_self((|| {
        let p = find(h, call)?;
        parts.into_iter().try_for_each(|i| p.ready(i, call))
    })())
}

/// `MPI_Pready`: partition `partition` of the send buffer is ready.
#[no_mangle]
pub unsafe extern "C" fn MPI_Pready(partition: c_int, request: MPI_Request) -> c_int {
    mark(request, std::iter::once(partition), "MPI_Pready")
}

/// `MPI_Pready_range`: partitions `partition_low` to `partition_high` are ready.
#[no_mangle]
pub unsafe extern "C" fn MPI_Pready_range(
    partition_low: c_int,
    partition_high: c_int,
    request: MPI_Request,
) -> c_int {
    mark(request, partition_low..=partition_high, "MPI_Pready_range")
}

/// `MPI_Pready_list`: the `length` partitions listed are ready.
#[no_mangle]
pub unsafe extern "C" fn MPI_Pready_list(
    length: c_int,
    array_of_partitions: *const c_int,
    request: MPI_Request,
) -> c_int {
    let list: &[c_int] = match usize::try_from(length) {
        Ok(0) => &[],
        Ok(n) if !array_of_partitions.is_null() => {
            // SAFETY: `length` partitions (the caller's contract).
            unsafe { std::slice::from_raw_parts(array_of_partitions, n) }
        }
        _ => {
            return on_self(Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("MPI_Pready_list: {length} partitions, or a NULL list"),
            )))
        }
    };
    mark(request, list.iter().copied(), "MPI_Pready_list")
}

/// `MPI_Parrived`: whether partition `partition` of the receive has arrived.
#[no_mangle]
pub unsafe extern "C" fn MPI_Parrived(
    request: MPI_Request,
    partition: c_int,
    flag: *mut c_int,
) -> c_int {
    on_self((|| {
        let got = find(request, "MPI_Parrived")?.arrived(partition)?;
        // SAFETY: the caller's contract.
        unsafe { out(flag, c_int::from(got), "MPI_Parrived") }
    })())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_handle_that_is_no_partitioned_request_is_refused() {
        let e = super::find(0x1234, "MPI_Pready").err();
        assert!(e.is_some_and(|e| e.to_string().contains("not a partitioned request")));
    }
}
