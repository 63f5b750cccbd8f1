//! The exchange engine: executes a [`Plan`] between the local buffers of the ranks.
//!
//! Each pair of ranks (A, B) forms one *stream*: the runs of every (source unit of A,
//! destination unit of B) pair, in increasing unit order, then in source order. Both ends
//! compute the same stream from the plan, so only data crosses the wire. The sender packs
//! the stream into *transfer units* (TUs) of at most [`ExchangeOptions::transfer_unit`]
//! bytes, optionally followed by the CRC32C of the payload computed while packing; the
//! receiver scatters each TU on arrival, checksumming while it copies. A window of TUs per
//! peer stays in flight (double buffering: two by default), so that packing, moving and
//! unpacking overlap (the iWarp execution module). Runs between units of one rank are
//! copied directly.

use spools_map::{Layout, Plan, Run};
use spools_msg::{wait_any, Communicator, Request};

use crate::crc::{copy_crc, extend_crc};
use crate::cursor::RunCursor;
use crate::error::{ExchangeError, Side};

/// Tag of the exchange engine's transfer units.
pub(crate) const TAG_TU: i32 = 0x0e_0001;

/// How an exchange runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExchangeOptions {
    /// Append a CRC32C to every transfer unit and check it on arrival.
    pub integrity: bool,
    /// Largest transfer unit in bytes (at least 1).
    pub transfer_unit: usize,
    /// Transfer units in flight per peer and direction (at least 1; 2 is double
    /// buffering).
    pub window: usize,
}

impl Default for ExchangeOptions {
    fn default() -> Self {
        ExchangeOptions {
            integrity: false,
            transfer_unit: 512 * 1024,
            window: 2,
        }
    }
}

/// What one rank's part of an exchange moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExchangeStats {
    /// Bytes sent to other ranks (payload only).
    pub sent: u64,
    /// Bytes received from other ranks (payload only).
    pub received: u64,
    /// Bytes copied between units of this rank.
    pub local: u64,
    /// Transfer units sent.
    pub messages: u64,
    /// Runs this rank packed or copied (a run split across TUs counts once per piece).
    pub runs: u64,
}

/// Which rank holds each unit of a layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owners {
    /// Unit `u` is held by rank `u`.
    Identity,
    /// Unit `u` is held by rank `list[u]`.
    List(Vec<u32>),
}

impl Owners {
    fn of(&self, u: u64) -> u32 {
        match self {
            Owners::Identity => u as u32,
            Owners::List(l) => l.get(u as usize).copied().unwrap_or(u32::MAX),
        }
    }

    fn check(&self, side: Side, layout: &Layout, size: u32) -> Result<(), ExchangeError> {
        let units = layout.units();
        match self {
            Owners::Identity => crate::collective::fit_ranks(layout, size, side),
            Owners::List(l) if l.len() as u64 != units => Err(ExchangeError::Owners {
                side,
                expected: units,
                got: l.len(),
            }),
            Owners::List(l) => match l.iter().position(|&r| r >= size) {
                Some(u) => Err(ExchangeError::OwnerOutOfRange {
                    side,
                    unit: u as u64,
                    rank: l[u],
                    size,
                }),
                None => Ok(()),
            },
        }
    }
}

/// Executes `plan` between the ranks of `comm`. Collective: every rank of `comm` calls
/// it, owning units or not. `src` lists this rank's source
/// units with their local storage, `dst` its destination units; each buffer must hold at
/// least the unit's share of the dataset ([`Layout::local_bytes`]).
///
/// ```
/// use spools_io::{exchange, ExchangeOptions, Owners};
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
/// # Errors
/// [`ExchangeError`]: inconsistent owners or buffers (found before anything moves), a
/// failed checksum or length, a dead peer.
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
    // Every rank learns whether any rank refused before anything moves, so that no rank
    // waits for data that will never come.
    crate::collective::agree_on_outcome(comm, checked, |rank| ExchangeError::Remote { rank })?;
    let tu = opts.transfer_unit.max(1);
    let window = opts.window.max(1);

    // The streams: per destination rank (what this rank sends) and per source rank.
    let mut out: Vec<Stream> = Vec::new();
    let mut inn: Vec<Stream> = Vec::new();
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
                stream_for(&mut out, r).pairs.push((si, s, p.peer));
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
                stream_for(&mut inn, r).pairs.push((di, p.peer, d));
            }
        }
    }
    // Receives go in (s, d) order, as the sender packs them.
    for st in &mut inn {
        st.pairs.sort_by_key(|&(_, s, d)| (s, d));
        st.total = st.bytes(plan)?;
        st.remaining = st.total;
    }
    for st in &mut out {
        st.total = st.bytes(plan)?;
        st.remaining = st.total;
    }

    let mut stats = ExchangeStats::default();
    let mut reqs: Vec<Request> = Vec::new();
    let mut meta: Vec<Slot> = Vec::new();
    for (i, st) in inn.iter_mut().enumerate() {
        for _ in 0..window {
            if let Some(len) = st.next_len(tu, opts.integrity) {
                reqs.push(comm.irecv(vec![0u8; len], st.peer, TAG_TU)?);
                meta.push(Slot::Recv(i, st.posted - 1));
            }
        }
    }
    for (i, st) in out.iter_mut().enumerate() {
        for _ in 0..window {
            if st.remaining == 0 {
                break;
            }
            let buf = st.pack(
                plan,
                src,
                Vec::with_capacity(tu + 4),
                tu,
                opts.integrity,
                &mut stats,
            )?;
            reqs.push(comm.isend(buf, st.peer, TAG_TU)?);
            meta.push(Slot::Send(i));
        }
    }
    // Copies between this rank's own units overlap with the transfers just started.
    for &(si, di, s, d) in &local {
        for run in plan.runs(s, d)? {
            let from = slice(Side::Source, s, src[si].1, run.src, run.len)?;
            let to = slice_mut(Side::Destination, d, dst[di].1, run.dst, run.len)?;
            to.copy_from_slice(from);
            stats.local += run.len;
            stats.runs += 1;
        }
    }
    let mut failed = None;
    while !reqs.is_empty() {
        let (i, c) = wait_any(&mut reqs)?;
        match meta.remove(i) {
            Slot::Send(k) => {
                let st = &mut out[k];
                if st.remaining > 0 {
                    let buf = st.pack(plan, src, c.buf, tu, opts.integrity, &mut stats)?;
                    reqs.push(comm.isend(buf, st.peer, TAG_TU)?);
                    meta.push(Slot::Send(k));
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
                        reqs.push(comm.irecv(buf, st.peer, TAG_TU)?);
                        meta.push(Slot::Recv(k, st.posted - 1));
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

#[derive(Clone, Copy, Debug)]
enum Slot {
    Send(usize),
    /// A receive of stream `.0`, its `.1`-th transfer unit.
    Recv(usize, u64),
}

fn position(lens: &[(u64, usize)], unit: u64) -> usize {
    lens.iter().position(|&(u, _)| u == unit).unwrap_or(0)
}

fn stream_for(list: &mut Vec<Stream>, peer: u32) -> &mut Stream {
    let i = match list.iter().position(|s| s.peer == peer) {
        Some(i) => i,
        None => {
            list.push(Stream::new(peer));
            list.len() - 1
        }
    };
    &mut list[i]
}

fn check_buffers(
    side: Side,
    layout: &Layout,
    owners: &Owners,
    me: u32,
    bufs: &[(u64, usize)],
) -> Result<(), ExchangeError> {
    for (i, &(u, len)) in bufs.iter().enumerate() {
        if u >= layout.units() || owners.of(u) != me {
            return Err(ExchangeError::Buffers {
                side,
                unit: u,
                what: "this rank does not own the unit",
            });
        }
        if bufs[..i].iter().any(|&(v, _)| v == u) {
            return Err(ExchangeError::Buffers {
                side,
                unit: u,
                what: "two buffers given for the unit",
            });
        }
        let need = layout.local_bytes(u)?;
        if (len as u64) < need {
            return Err(ExchangeError::BufferSize {
                side,
                unit: u,
                need,
                got: len as u64,
            });
        }
    }
    for u in 0..layout.units() {
        if owners.of(u) == me && layout.local_bytes(u)? > 0 && !bufs.iter().any(|&(v, _)| v == u) {
            return Err(ExchangeError::Buffers {
                side,
                unit: u,
                what: "this rank owns the unit but gave no buffer",
            });
        }
    }
    Ok(())
}

fn slice(side: Side, unit: u64, buf: &[u8], at: u64, len: u64) -> Result<&[u8], ExchangeError> {
    usize::try_from(at)
        .ok()
        .zip(usize::try_from(at + len).ok())
        .and_then(|(a, b)| buf.get(a..b))
        .ok_or(ExchangeError::BufferSize {
            side,
            unit,
            need: at + len,
            got: buf.len() as u64,
        })
}

fn slice_mut(
    side: Side,
    unit: u64,
    buf: &mut [u8],
    at: u64,
    len: u64,
) -> Result<&mut [u8], ExchangeError> {
    let got = buf.len() as u64;
    usize::try_from(at)
        .ok()
        .zip(usize::try_from(at + len).ok())
        .and_then(|(a, b)| buf.get_mut(a..b))
        .ok_or(ExchangeError::BufferSize {
            side,
            unit,
            need: at + len,
            got,
        })
}

/// The runs between this rank and one peer, consumed a transfer unit at a time.
struct Stream {
    peer: u32,
    /// (local buffer index, source unit, destination unit), in the stream's order.
    pairs: Vec<(usize, u64, u64)>,
    next_pair: usize,
    buf: usize,
    units: (u64, u64),
    runs: Option<RunCursor>,
    /// Payload bytes in the whole stream.
    total: u64,
    /// Payload bytes not yet packed or unpacked.
    remaining: u64,
    /// Receives posted.
    posted: u64,
    /// Transfer units unpacked.
    done: u64,
    /// Received transfer units waiting for their turn: (index, buffer, length).
    ready: Vec<(u64, Vec<u8>, usize)>,
}

impl Stream {
    fn new(peer: u32) -> Self {
        Stream {
            peer,
            pairs: Vec::new(),
            next_pair: 0,
            buf: 0,
            units: (0, 0),
            runs: None,
            total: 0,
            remaining: 0,
            posted: 0,
            done: 0,
            ready: Vec::new(),
        }
    }

    fn bytes(&self, plan: &Plan) -> Result<u64, ExchangeError> {
        let mut t = 0;
        for &(_, s, d) in &self.pairs {
            t += plan.runs(s, d)?.map(|r| r.len).sum::<u64>();
        }
        Ok(t)
    }

    /// The length of the next receive to post, if any remain.
    fn next_len(&mut self, tu: usize, integrity: bool) -> Option<usize> {
        let already = self.posted * tu as u64;
        if already >= self.total {
            return None;
        }
        self.posted += 1;
        let n = (self.total - already).min(tu as u64) as usize;
        Some(n + if integrity { 4 } else { 0 })
    }

    /// The next piece of at most `limit` bytes: (buffer index, run).
    fn take(&mut self, plan: &Plan, limit: u64) -> Result<Option<(usize, Run)>, ExchangeError> {
        loop {
            if let Some(c) = &mut self.runs {
                if let Some(r) = c.take(limit) {
                    return Ok(Some((self.buf, r)));
                }
                self.runs = None;
            }
            let Some(&(b, s, d)) = self.pairs.get(self.next_pair) else {
                return Ok(None);
            };
            self.next_pair += 1;
            self.buf = b;
            self.units = (s, d);
            self.runs = Some(RunCursor::new(plan.runs(s, d)?));
        }
    }

    /// Packs the next transfer unit into `out` (reused).
    fn pack(
        &mut self,
        plan: &Plan,
        src: &[(u64, &[u8])],
        mut out: Vec<u8>,
        tu: usize,
        integrity: bool,
        stats: &mut ExchangeStats,
    ) -> Result<Vec<u8>, ExchangeError> {
        out.clear();
        let mut crc = 0u32;
        while out.len() < tu {
            let Some((b, run)) = self.take(plan, (tu - out.len()) as u64)? else {
                break;
            };
            let from = slice(Side::Source, self.units.0, src[b].1, run.src, run.len)?;
            if integrity {
                crc = extend_crc(&mut out, from, crc);
            } else {
                out.extend_from_slice(from);
            }
            stats.runs += 1;
        }
        self.remaining -= out.len() as u64;
        stats.sent += out.len() as u64;
        stats.messages += 1;
        if integrity {
            out.extend_from_slice(&crc.to_le_bytes());
        }
        Ok(out)
    }

    /// Scatters one arrived transfer unit.
    fn unpack(
        &mut self,
        plan: &Plan,
        dst: &mut [(u64, &mut [u8])],
        data: &[u8],
        tu: usize,
        integrity: bool,
        stats: &mut ExchangeStats,
    ) -> Result<(), ExchangeError> {
        let index = self.done;
        self.done += 1;
        let expected = self.remaining.min(tu as u64) as usize;
        let (payload, sent) = if integrity {
            let Some((p, c)) = data.split_last_chunk::<4>() else {
                return Err(ExchangeError::Length {
                    from: self.peer,
                    index,
                    expected: 4,
                    got: data.len(),
                });
            };
            (p, Some(u32::from_le_bytes(*c)))
        } else {
            (data, None)
        };
        if payload.len() != expected {
            return Err(ExchangeError::Length {
                from: self.peer,
                index,
                expected,
                got: payload.len(),
            });
        }
        let mut at = 0usize;
        let mut crc = 0u32;
        while at < payload.len() {
            let Some((b, run)) = self.take(plan, (payload.len() - at) as u64)? else {
                break;
            };
            let n = run.len as usize;
            let to = slice_mut(Side::Destination, self.units.1, dst[b].1, run.dst, run.len)?;
            let from = &payload[at..at + n];
            if integrity {
                crc = copy_crc(to, from, crc);
            } else {
                to.copy_from_slice(from);
            }
            at += n;
        }
        self.remaining -= payload.len() as u64;
        stats.received += payload.len() as u64;
        if let Some(sent) = sent {
            if sent != crc {
                return Err(ExchangeError::Checksum {
                    from: self.peer,
                    index,
                    sent,
                    got: crc,
                });
            }
        }
        Ok(())
    }
}
