//! The single-copy protocol between two ranks of one host: the source describes where
//! its buffers are ([`Descriptor`]), the destination copies the stream's runs straight
//! from there into its own buffers and answers ([`Reply`]); the source returns only
//! after that answer.

use spools_map::Plan;

use crate::bounds::slice_mut;
use crate::cma::{cookie, refused, CmaError, CmaReader};
use spools_heap::{lookup, HeapError, HeapName, PeerBytes, PeerHeaps};

use crate::descriptor::{area, Area, Descriptor, Place};
use crate::error::{ExchangeError, Side};
use crate::options::ExchangeStats;
use crate::peer_runs::PeerRuns;
use crate::short_copy::span;

/// Streams out of process memory whose mean piece (a run, or runs one after the other at
/// the source, read as one: [`CmaReader::push_spread`]) is shorter than this go through
/// transfer units: the kernel pins each remote iovec's pages, which costs more than
/// packing short runs.
/// Measured (`spools bench redist`, f64[2048,2048] order=F, 32 MiB, 2 cores, 3-4 runs
/// each) once transfer units were packed by progression from buffers kept between
/// exchanges, process_vm_readv against transfer units: 4 ranks, block,* to cyclic(k),*:
/// 46 / 32 ms for 512-byte runs, 27 / 21 ms for 1 KiB, 10.0 / 8.0 ms for 2 KiB; 8 ranks,
/// block,* to *,block (2 KiB runs): 10.3 / 11.6 ms; 4 ranks, 4 KiB runs: 16 / 20 ms. (With
/// a buffer allocated per transfer unit and runs packed one by one, the crossover was
/// 512 B.)
const MIN_RUN: u64 = 2048;

/// The shortest runs read as one piece of the peer when they lie one after the other
/// there ([`CmaReader::push_spread`]: one remote iovec, a local one per run). Measured
/// (`spools bench redist --from "u8[8388608] cyclic(k) on 4" --to "u8[8388608] block on
/// 4"`, 2 cores, 15 repetitions, against transfer units): 1.0 / 2.1 GB/s for k = 32, 2.9
/// / 2.3 for 128, 4.7 / 2.5 for 512.
const MIN_SPREAD_RUN: u64 = 128;

/// Runs of a stream whose mean decides between process memory and transfer units.
const SAMPLE_RUNS: usize = 64;

/// Whether the stream with a peer is negotiated with a descriptor (both ends decide the
/// same); the source's descriptor then says whether it is pulled.
pub(super) fn negotiated(single_copy: bool, same_host: bool) -> bool {
    single_copy && same_host
}

/// The descriptor of stream `st` of this rank's `src` (blocks of job `job`'s shared heap named as such): pulled from the shared heap
/// whatever its runs; from process memory if its first runs are long enough on average
/// and this process was not refused such reads; else through transfer units.
///
/// # Errors
/// [`ExchangeError::Plan`] if the plan has no runs for a pair of the stream.
pub(super) fn describe(
    job: u64,
    st: &PeerRuns,
    plan: &Plan,
    src: &[(u64, &[u8])],
) -> Result<Descriptor, ExchangeError> {
    let mut areas: Vec<Area> = Vec::new();
    for &(b, s, _) in &st.pairs {
        if !areas.iter().any(|a| a.unit == s) {
            let buf = src[b].1;
            // A block of another job's heap (a buffer of another world of this process)
            // is process memory to this job's peers, whose caches refuse its name.
            let place = match lookup(buf.as_ptr(), buf.len()) {
                Some(r) if r.name.job() == job => Place::Heap(r),
                _ => Place::Process(buf.as_ptr() as u64),
            };
            areas.push(Area {
                unit: s,
                len: buf.len() as u64,
                place,
            });
        }
    }
    let by_process = areas.iter().any(|a| matches!(a.place, Place::Process(_)));
    let pulled = !by_process
        || (!refused() && st.sample_mean_piece(plan, SAMPLE_RUNS, MIN_SPREAD_RUN)? >= MIN_RUN);
    Ok(Descriptor {
        pid: std::process::id(),
        cookie: cookie(),
        areas: pulled.then_some(areas),
    })
}

/// Bytes of the largest descriptor `st`'s source can send.
pub(super) fn descriptor_capacity(st: &PeerRuns) -> usize {
    let mut units: Vec<u64> = st.pairs.iter().map(|p| p.1).collect();
    units.sort_unstable();
    units.dedup();
    Descriptor::capacity(units.len())
}

/// What pulling one stream came to.
pub(super) enum Pulled {
    /// Every run was copied (this many bytes).
    Done(u64),
    /// This process may not read the peer's memory: the stream must go through the
    /// rings.
    Refused,
}

/// A source buffer opened for copying.
enum Source {
    Process(u64),
    Heap(PeerBytes, HeapName),
}

/// Copies every run of stream `st` (received from `st.peer`) from the buffers that
/// `desc` lists into `dst`. Buffers in process memory are read only once the process
/// `desc` names proved to be the sender (it holds the cookie); if it is not, or cannot be
/// read at all, the stream goes through the rings.
///
/// # Errors
/// [`ExchangeError::Descriptor`] for a list that does not cover the stream,
/// [`ExchangeError::Pull`] for a failed read of process memory, [`ExchangeError::Heap`]
/// for a shared-heap buffer that cannot be mapped or was freed during the copy,
/// [`ExchangeError::BufferSize`].
pub(super) fn pull(
    heaps: &PeerHeaps,
    st: &PeerRuns,
    plan: &Plan,
    dst: &mut [(u64, &mut [u8])],
    desc: &Descriptor,
    areas: &[Area],
    stats: &mut ExchangeStats,
) -> Result<Pulled, ExchangeError> {
    let from = st.peer;
    let heap_err = |source| ExchangeError::Heap { from, source };
    let mut reader = CmaReader::new(desc.pid);
    if areas.iter().any(|a| matches!(a.place, Place::Process(_)))
        && (refused() || !reader.is_the_sender(&desc.cookie))
    {
        return Ok(Pulled::Refused);
    }
    let fail = |e: CmaError| match e {
        CmaError::Refused => Ok(Pulled::Refused),
        CmaError::Failed(source) => Err(ExchangeError::Pull { from, source }),
    };
    let mut opened: Vec<(u64, u64, Source)> = Vec::new();
    let (mut runs, mut bytes) = (0, 0);
    for &(b, s, d) in &st.pairs {
        let a = area(areas, from, s)?;
        let k = match opened.iter().position(|o| o.0 == s) {
            Some(k) => k,
            None => {
                let src = match a.place {
                    Place::Process(addr) => Source::Process(addr),
                    Place::Heap(r) => {
                        let len =
                            usize::try_from(a.len).map_err(|_| ExchangeError::Descriptor {
                                from,
                                what: "a buffer larger than this machine's memory",
                            })?;
                        let bytes = heaps.bytes(&r, len);
                        Source::Heap(bytes.map_err(heap_err)?, r.name)
                    }
                };
                opened.push((s, a.len, src));
                opened.len() - 1
            }
        };
        let (_, len, src) = &opened[k];
        for p in plan.runs(s, d)?.strided().filter(|p| p.len > 0) {
            let src_span = span(p.len, p.count, p.src_stride);
            if p.src.checked_add(src_span).is_none_or(|end| end > *len) {
                return Err(ExchangeError::Descriptor {
                    from,
                    what: "a run lies beyond the source buffer",
                });
            }
            let dst_span = span(p.len, p.count, p.dst_stride);
            let to = slice_mut(Side::Destination, d, dst[b].1, p.dst, dst_span)?;
            let (ss, ds, n) = (p.src_stride as usize, p.dst_stride as usize, p.len as usize);
            match src {
                // Runs one after the other there, spread here: one piece of the peer.
                Source::Process(addr)
                    if p.count > 1 && p.src_stride == p.len && p.len >= MIN_SPREAD_RUN =>
                {
                    if let Err(e) = reader.push_spread(to, (ds, n, p.count as usize), addr + p.src)
                    {
                        return fail(e);
                    }
                }
                Source::Process(addr) => {
                    for (i, r) in p.runs().enumerate() {
                        if let Err(e) = reader.push(&mut to[i * ds..i * ds + n], addr + r.src) {
                            return fail(e);
                        }
                    }
                }
                // The runs lie in the buffer (checked above), so this cannot fail.
                Source::Heap(h, _) => h
                    .copy_strided_to(p.src as usize, ss, n, p.count as usize, to, ds)
                    .map_err(heap_err)?,
            }
            runs += p.count;
            bytes += p.bytes();
        }
    }
    if let Err(e) = reader.flush() {
        return fail(e);
    }
    for (_, _, src) in &opened {
        if let Source::Heap(p, name) = src {
            if p.freed() {
                return Err(heap_err(HeapError::Freed { name: *name }));
            }
        }
    }
    stats.received += bytes;
    stats.pulled += bytes;
    stats.runs += runs;
    Ok(Pulled::Done(bytes))
}
