//! The engine: executes a [`Plan`] between the local buffers of the ranks.
//!
//! Each pair of ranks (A, B) forms one *stream*: the runs of every (source unit of A,
//! destination unit of B) pair, in increasing unit order, then in source order. Both ends
//! compute the same stream from the plan, so only data crosses the wire.
//!
//! Between two ranks of one host (see [`ExchangeOptions::single_copy`]), the source
//! sends a descriptor of the stream's source buffers: its process id, a cookie (a random
//! value at a fixed address of its process) and each buffer's place: in the shared heap
//! (`spools::World::alloc`), or an address. The destination then copies the runs straight
//! from there into its own buffers, one copy per run: a plain copy out of the peer's
//! heap segment mapped here, or `process_vm_readv` (up to 1024 runs per system call, after
//! reading the cookie to be sure it reads the right process). It answers "done", and the
//! source returns only after every puller answered. Buffers outside the heap are pulled
//! only when the stream's first runs are at least 2 KiB on average (the kernel pins
//! pages per run, more than packing short runs costs); otherwise the descriptor says that
//! transfer units follow. If the kernel refuses such reads, or the cookie does not match,
//! the destination answers "ring" and the stream goes through transfer units.
//!
//! Every other stream goes through *transfer units* (TUs) of at most
//! [`ExchangeOptions::transfer_unit`] bytes: the sender packs its runs into a TU,
//! optionally followed by the CRC32C of the payload computed while packing; the
//! receiver scatters each TU on arrival, checksumming while it copies. A window of TUs
//! per peer stays in flight (double buffering: two by default), so that packing, moving
//! and unpacking overlap (the iWarp execution module). Runs between units of one rank are
//! copied directly.

use crate::options::{ExchangeOptions, ExchangeStats};
use crate::owners::Owners;
use crate::pool;
use spools_map::Plan;
use spools_msg::{wait_any_at, Communicator, Op, Request};

use crate::descriptor::{Descriptor, Reply};
use crate::digest::Digest;
use crate::error::{ExchangeError, Side, Told};
use crate::local::copy_local;
use crate::owners::{check_buffers, position};
use crate::peer_runs::{peer_runs_for, PeerRuns};
use crate::pull::{describe, descriptor_capacity, negotiated, pull, Pulled};

/// Tag of the exchange engine's transfer units.
pub(crate) const TAG_TU: i32 = 0x0e_0001;
/// Tag of a single-copy descriptor (source to destination).
const TAG_DESC: i32 = 0x0e_0010;
/// Tag of a single-copy reply (destination to source).
const TAG_REPLY: i32 = 0x0e_0011;

/// Executes `plan` between the ranks of `comm`. Collective: every rank of `comm` calls
/// it, owning units or not. `src` lists this rank's source
/// units with their local storage, `dst` its destination units; each buffer must hold at
/// least the unit's share of the dataset ([`Layout::local_bytes`](spools_map::Layout::local_bytes)).
///
/// ```
/// use spools_exchange::{exchange, ExchangeOptions, Owners};
/// use spools_map::{Layout, Plan};
/// let world = spools::init()?;
/// // One rank: a 4x4 transpose between two layouts of the same unit.
/// let rows: Layout = "u8[4,4] block,* on 1x1".parse()?;
/// let cols: Layout = "u8[4,4] * ,block on 1x1 order=F".replace(" ,", ",").parse()?;
/// let plan = Plan::new(&rows, &cols)?;
/// let src: Vec<u8> = (0..16).collect();
/// let mut dst = vec![0u8; 16];
/// exchange(world.communicator(), &plan, &Owners::Identity, &Owners::Identity,
///          &[(0, &src)], &mut [(0, &mut dst)], &ExchangeOptions::default())?;
/// assert_eq!(dst[..4], [0, 4, 8, 12]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Single copy and failures
/// A pulled stream (see the module's text) is read by the destination out of this
/// rank's source buffers while this call runs: it returns only once every puller
/// answered, so the buffers cannot be dropped or changed while read. A puller that
/// fails (the source process died, its memory went away) returns
/// [`ExchangeError::Pull`] and tells the source, which returns
/// [`ExchangeError::Puller`]; a source that dies leaves its pullers with an error, not a
/// crash or a hang; a puller that dies leaves the source with the messaging error of a
/// dead peer. If this call fails with a messaging error, a peer may still be reading this
/// rank's buffers (it gets an error if they vanish, but may copy what replaced them), so
/// the job should end: that is what a failed exchange means for its data anyway.
///
/// # Errors
/// [`ExchangeError`]: inconsistent owners or buffers (found before anything moves), a
/// failed checksum or length, a dead peer, a failed single copy, a garbled protocol
/// message.
pub fn exchange(
    comm: &Communicator,
    plan: &Plan,
    src_owners: &Owners,
    dst_owners: &Owners,
    src: &[(u64, &[u8])],
    dst: &mut [(u64, &mut [u8])],
    opts: &ExchangeOptions,
) -> Result<ExchangeStats, ExchangeError> {
    let me = comm.rank();
    let size = comm.size();
    let src_lens: Vec<(u64, usize)> = src.iter().map(|(u, b)| (*u, b.len())).collect();
    let dst_lens: Vec<(u64, usize)> = dst.iter().map(|(u, b)| (*u, b.len())).collect();
    let checked = src_owners
        .check(Side::Source, plan.src(), size)
        .and_then(|()| dst_owners.check(Side::Destination, plan.dst(), size))
        .and_then(|()| check_buffers(Side::Source, plan.src(), src_owners, me, &src_lens))
        .and_then(|()| check_buffers(Side::Destination, plan.dst(), dst_owners, me, &dst_lens));
    // Every rank learns whether any rank refused, or passed another plan, before anything
    // moves, so that no rank waits for data that will never come.
    let digest = Digest::of(&(
        plan.src(),
        plan.dst(),
        plan.window_origin(),
        src_owners,
        dst_owners,
    ));
    open_exchange(comm, checked, digest, opts)?;
    let tu = opts.transfer_unit.max(1);
    let window = opts.window.max(1);

    // The streams: per destination rank (what this rank sends) and per source rank.
    let mut out: Vec<PeerRuns> = Vec::new();
    let mut inn: Vec<PeerRuns> = Vec::new();
    let mut local: Vec<(usize, usize, u64, u64)> = Vec::new();
    let mut src_order: Vec<usize> = (0..src.len()).collect();
    src_order.sort_by_key(|&i| src[i].0);
    for &si in &src_order {
        let s = src[si].0;
        for p in plan.sends(s)?.peers {
            let r = dst_owners.of(p.peer);
            if r == me {
                let di = position(&dst_lens, p.peer);
                local.push((si, di, s, p.peer));
            } else {
                peer_runs_for(&mut out, r).pairs.push((si, s, p.peer));
            }
        }
    }
    let mut dst_order: Vec<usize> = (0..dst.len()).collect();
    dst_order.sort_by_key(|&i| dst[i].0);
    for &di in &dst_order {
        let d = dst[di].0;
        for p in plan.receives(d)?.peers {
            let r = src_owners.of(p.peer);
            if r != me {
                peer_runs_for(&mut inn, r).pairs.push((di, p.peer, d));
            }
        }
    }
    // Receives go in (s, d) order, as the sender packs them.
    for st in &mut inn {
        st.pairs.sort_by_key(|&(_, s, d)| (s, d));
    }
    let negotiate = |st: &PeerRuns| negotiated(opts.single_copy, comm.same_host(st.peer));

    let mut stats = ExchangeStats::default();
    let mut fl = InFlight {
        reqs: Vec::new(),
        meta: Vec::new(),
    };
    for (i, st) in inn.iter_mut().enumerate() {
        if negotiate(st) {
            let cap = descriptor_capacity(st);
            fl.reqs.push(comm.irecv(vec![0u8; cap], st.peer, TAG_DESC)?);
            fl.meta.push(Slot::Desc(i));
        } else {
            post_receives(comm, plan, (st, i), (tu, window), opts.integrity, &mut fl)?;
        }
    }
    for (i, st) in out.iter_mut().enumerate() {
        if negotiate(st) {
            let desc = describe(comm.heaps().job(), st, plan, src)?;
            fl.reqs.push(comm.isend(desc.encode(), st.peer, TAG_DESC)?);
            fl.meta.push(Slot::Quiet);
            if desc.areas.is_some() {
                fl.reqs.push(comm.irecv(vec![0u8; 16], st.peer, TAG_REPLY)?);
                fl.meta.push(Slot::Reply(i));
                continue;
            }
        }
        {
            start_sends(comm, plan, src, st, i, opts, &mut stats, &mut fl)?;
        }
    }
    // Copies between this rank's own units overlap with the transfers just started.
    for &(si, di, s, d) in &local {
        copy_local(plan, s, src[si].1, d, dst[di].1, &mut stats)?;
    }
    let mut failed = None;
    while !fl.reqs.is_empty() {
        let (i, c) = match wait_any_at(&mut fl.reqs) {
            Ok(done) => done,
            Err((at, e)) => {
                if let Some(at) = at {
                    fl.meta.remove(at);
                }
                drain_replies(fl.reqs, &fl.meta);
                return Err(e.into());
            }
        };
        match fl.meta.remove(i) {
            Slot::Quiet => {}
            Slot::Send(k) => {
                let st = &mut out[k];
                if st.remaining > 0 {
                    let buf = st.pack(plan, src, c.buf, tu, opts.integrity, &mut stats)?;
                    fl.reqs.push(comm.isend(buf, st.peer, TAG_TU)?);
                    fl.meta.push(Slot::Send(k));
                } else {
                    pool::give(c.buf);
                }
            }
            Slot::Recv(k, seq) => {
                let st = &mut inn[k];
                // Receives complete in any order (a small eager TU can overtake a large
                // rendezvous one posted before it); they are unpacked in stream order.
                let len = c.status.len.min(c.buf.len());
                st.ready.push((seq, c.buf, len));
                while let Some(i) = st.ready.iter().position(|r| r.0 == st.done) {
                    let (_, buf, len) = st.ready.swap_remove(i);
                    // A bad transfer unit does not stop the others: every expected message
                    // is still received, so that no sender is left waiting.
                    if let Err(e) =
                        st.unpack(plan, dst, &buf[..len], tu, opts.integrity, &mut stats)
                    {
                        failed.get_or_insert(e);
                    }
                    if let Some(len) = st.next_len(tu, opts.integrity) {
                        let mut buf = buf;
                        buf.resize(len, 0);
                        fl.reqs.push(comm.irecv(buf, st.peer, TAG_TU)?);
                        fl.meta.push(Slot::Recv(k, st.posted - 1));
                    } else {
                        pool::give(buf);
                    }
                }
            }
            Slot::Desc(k) => {
                let st = &mut inn[k];
                let len = c.status.len.min(c.buf.len());
                let done = match Descriptor::decode(st.peer, &c.buf[..len]) {
                    Ok(Descriptor { areas: None, .. }) => {
                        post_receives(comm, plan, (st, k), (tu, window), opts.integrity, &mut fl)?;
                        continue;
                    }
                    Ok(desc) => {
                        let areas = desc.areas.as_deref().unwrap_or_default();
                        pull(comm.heaps(), st, plan, dst, &desc, areas, &mut stats)
                    }
                    Err(e) => Err(e),
                };
                let reply = match done {
                    Ok(Pulled::Done(bytes)) => Reply::Done(bytes),
                    Ok(Pulled::Refused) => {
                        post_receives(comm, plan, (st, k), (tu, window), opts.integrity, &mut fl)?;
                        Reply::Ring
                    }
                    Err(e) => {
                        failed.get_or_insert(e);
                        Reply::Failed
                    }
                };
                fl.reqs
                    .push(comm.isend(reply.encode(), st.peer, TAG_REPLY)?);
                fl.meta.push(Slot::Quiet);
            }
            Slot::Reply(k) => {
                let st = &mut out[k];
                let len = c.status.len.min(c.buf.len());
                match Reply::decode(st.peer, &c.buf[..len]) {
                    Ok(Reply::Done(bytes)) => stats.sent = stats.sent.saturating_add(bytes),
                    Ok(Reply::Ring) => {
                        start_sends(comm, plan, src, st, k, opts, &mut stats, &mut fl)?;
                    }
                    Ok(Reply::Failed) => {
                        failed.get_or_insert(ExchangeError::Puller { rank: st.peer });
                    }
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                }
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(stats),
    }
}

/// How many of the single-copy protocol's decoders accept `data` (for garbage tests).
#[doc(hidden)]
pub fn decode_any(data: &[u8]) -> usize {
    usize::from(Descriptor::decode(0, data).is_ok()) + usize::from(Reply::decode(0, data).is_ok())
}

/// What a pending request of the exchange is.
#[derive(Clone, Copy, Debug)]
enum Slot {
    /// A send of stream `.0`'s transfer unit.
    Send(usize),
    /// A receive of stream `.0`, its `.1`-th transfer unit.
    Recv(usize, u64),
    /// The descriptor of incoming stream `.0`.
    Desc(usize),
    /// The reply of the puller of outgoing stream `.0`.
    Reply(usize),
    /// A protocol message sent; nothing to do once it is out.
    Quiet,
}

/// After a failure (a dead peer): waits for the answers of the pullers still copying out
/// of this rank's buffers, so that the caller gets its buffers back only when no live peer
/// reads them any more (a dead one's wait fails at once), and no stale answer is left for
/// the next exchange. Every other request is dropped.
fn drain_replies(reqs: Vec<Request>, meta: &[Slot]) {
    for (r, m) in reqs.into_iter().zip(meta) {
        if matches!(m, Slot::Reply(_)) {
            let _ = r.wait();
        }
    }
}

/// The requests in flight and what each is for (the two lists kept in step).
struct InFlight {
    reqs: Vec<Request>,
    meta: Vec<Slot>,
}

/// Counts incoming stream `k` and posts its first `window` receives of transfer units of
/// at most `tu` bytes.
fn post_receives(
    comm: &Communicator,
    plan: &Plan,
    (st, k): (&mut PeerRuns, usize),
    (tu, window): (usize, usize),
    integrity: bool,
    fl: &mut InFlight,
) -> Result<(), ExchangeError> {
    let (reqs, meta) = (&mut fl.reqs, &mut fl.meta);
    st.count(plan)?;
    for _ in 0..window {
        if let Some(len) = st.next_len(tu, integrity) {
            reqs.push(comm.irecv(pool::take(len, len), st.peer, TAG_TU)?);
            meta.push(Slot::Recv(k, st.posted - 1));
        }
    }
    Ok(())
}

/// Counts outgoing stream `k`, packs and sends its first `window` transfer units.
#[allow(clippy::too_many_arguments)]
fn start_sends(
    comm: &Communicator,
    plan: &Plan,
    src: &[(u64, &[u8])],
    st: &mut PeerRuns,
    k: usize,
    opts: &ExchangeOptions,
    stats: &mut ExchangeStats,
    fl: &mut InFlight,
) -> Result<(), ExchangeError> {
    st.count(plan)?;
    let tu = opts.transfer_unit.max(1);
    for _ in 0..opts.window.max(1) {
        if st.remaining == 0 {
            break;
        }
        let buf = st.pack(plan, src, pool::take(0, tu + 4), tu, opts.integrity, stats)?;
        fl.reqs.push(comm.isend(buf, st.peer, TAG_TU)?);
        fl.meta.push(Slot::Send(k));
    }
    Ok(())
}

/// The collective opening of an exchange: the ends of a same-host stream agree on whether
/// it is negotiated (single copy), and every rank learns whether any rank refused its
/// part (`checked`, or a binding that declined it) or passed another plan or owners
/// (`digest`), before anything moves. A rank whose plan could not even be made opens with
/// its error, so that the others fail with its cause instead of waiting.
pub(crate) fn open_exchange<T>(
    comm: &Communicator,
    checked: Result<T, ExchangeError>,
    digest: Digest,
    opts: &ExchangeOptions,
) -> Result<T, ExchangeError> {
    // The ends of a same-host stream must agree on whether it is negotiated.
    let sc = u32::from(opts.single_copy);
    let mut both = [0u32; 2];
    comm.allreduce(&[sc, 1 - sc], &mut both, &Op::Min)?;
    let checked = if both == [0, 0] {
        checked.and_then(|_| Err(ExchangeError::MixedSingleCopy))
    } else {
        checked
    };
    let checked = match &opts.declined {
        Some(cause) => Err(ExchangeError::Declined(cause.clone())),
        None => checked,
    };
    // A declined part has no arguments to compare.
    let digest = opts.declined.is_none().then_some(digest);
    crate::collective::agree_on_call(
        comm,
        checked,
        digest,
        "layouts or owners",
        Told::cause,
        |rank, cause| ExchangeError::Remote { rank, cause },
    )
}
