//! The raw limits of the machine, measured without any runtime in the way: a flag bounced
//! through one shared cache line, a bare single-producer ring, single-thread memcpy. Every
//! benchmark measures them at its start and end, so that its figures sit next to the
//! limits of the same window.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;
use spools::World;

use crate::error::BenchError;
use crate::shared_mapping::SharedMapping;
use crate::stats::{median, rounded};

/// Raw limits measured in one window (the `probe` and `probe_end` of a document).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RawLimits {
    /// One-way time of a 40-byte message through a bare single-producer ring (ns).
    #[serde(serialize_with = "rounded::<1, _>")]
    pub(crate) ring_floor_ns: f64,
    /// One-way time of a flag bounced through one shared cache line (ns).
    #[serde(serialize_with = "rounded::<1, _>")]
    pub(crate) flag_pingpong_ns: f64,
    /// Single-thread memcpy bandwidth (GB/s) by size in bytes (0 on rank 1).
    #[serde(rename = "memcpy_GBps")]
    pub(crate) memcpy_gbps: MemcpyGbps,
}

/// Single-thread memcpy bandwidth by size, serialised as `{"<bytes>": GB/s}` (2 decimal
/// places).
#[derive(Debug, Clone)]
pub(crate) struct MemcpyGbps(pub(crate) Vec<(usize, f64)>);

impl Serialize for MemcpyGbps {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m: BTreeMap<String, f64> = self
            .0
            .iter()
            .map(|(b, g)| (b.to_string(), crate::stats::round(*g, 2)))
            .collect();
        m.serialize(s)
    }
}

/// Single-thread memcpy bandwidth at `size` bytes (median of 5 timed batches).
fn memcpy_gbps(size: usize) -> f64 {
    let src = vec![1u8; size];
    let mut dst = vec![0u8; size];
    dst.copy_from_slice(&src);
    let reps = (256 << 20) / size.max(1);
    let reps = reps.clamp(2, 4096);
    let mut v = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..reps {
            dst.copy_from_slice(std::hint::black_box(&src));
        }
        v.push((size * reps) as f64 / t.elapsed().as_nanos().max(1) as f64);
    }
    median(&mut v)
}

/// Measures the raw limits between ranks 0 and 1 (when both share a host); other ranks
/// only take part in the collectives. Returns None on a single rank or across hosts.
pub(crate) fn measure(w: &World) -> Result<Option<RawLimits>, BenchError> {
    let me = w.rank();
    let ok = w.size() >= 2 && w.same_host(1) && w.same_host(0);
    let flag = w.allgather_bytes(&[u8::from(ok)])?;
    if flag.iter().any(|f| f.first() != Some(&1)) || w.size() < 2 {
        return Ok(None);
    }
    let name = format!("/spools-{:016x}-probe", w.job());
    let map = if me == 0 {
        Some(SharedMapping::open(&name, 8192, true)?)
    } else {
        None
    };
    w.barrier()?;
    let map = match (map, me) {
        (Some(m), _) => Some(m),
        (None, 1) => Some(SharedMapping::open(&name, 8192, false)?),
        _ => None,
    };
    w.barrier()?;
    if me == 0 {
        if let Some(m) = &map {
            m.unlink();
        }
    }
    let mut result = None;
    if let Some(m) = &map {
        let flag_ns = flag_pingpong(m, me);
        let ring_ns = raw_ring(m, me);
        let memcpy = [64usize << 10, 1 << 20, 16 << 20]
            .iter()
            .map(|&s| (s, if me == 0 { memcpy_gbps(s) } else { 0.0 }))
            .collect();
        result = Some(RawLimits {
            flag_pingpong_ns: flag_ns,
            ring_floor_ns: ring_ns,
            memcpy_gbps: MemcpyGbps(memcpy),
        });
    }
    w.barrier()?;
    Ok(result)
}

const ROUNDS: u64 = 200_000;

/// Longest batch of a probe: on a loaded machine a round trip may wait for a time slice,
/// and 200,000 of them would take minutes. Rank 0 ends a batch early (it tells rank 1
/// in the batch's own words) and the batch's time is divided by the round trips made.
const BATCH_BUDGET: Duration = Duration::from_millis(100);

/// What rank 0 writes instead of the next value to end a batch early; rank 1 answers
/// with `STOP - 1` (rank 0 must not begin the next batch before rank 1 saw the stop).
const STOP: u64 = u64::MAX;

/// Whether rank 0 ends the batch begun at `t` before round `i` (looks every 64 rounds:
/// when both ranks share a CPU each round may wait for a tick).
fn over_budget(i: u64, t: Instant) -> bool {
    i % 64 == 63 && t.elapsed() > BATCH_BUDGET
}

/// Rank 0 writes odd values, rank 1 answers with the next even one, in one cache line.
fn flag_pingpong(m: &SharedMapping, me: u32) -> f64 {
    let w = m.word(0);
    let mut v = Vec::new();
    for rep in 0..5u64 {
        let base = rep * 2 * ROUNDS;
        let t = Instant::now();
        let mut made = ROUNDS;
        'batch: for i in 0..ROUNDS {
            let (send, wait) = (base + 2 * i + 1, base + 2 * i + 2);
            if me == 0 {
                if over_budget(i, t) {
                    w.store(STOP, Ordering::Release);
                    while w.load(Ordering::Acquire) != STOP - 1 {
                        std::hint::spin_loop();
                    }
                    made = i;
                    break;
                }
                w.store(send, Ordering::Release);
                while w.load(Ordering::Acquire) != wait {
                    std::hint::spin_loop();
                }
            } else {
                loop {
                    match w.load(Ordering::Acquire) {
                        x if x == send => break,
                        STOP => {
                            w.store(STOP - 1, Ordering::Release);
                            made = i;
                            break 'batch;
                        }
                        _ => std::hint::spin_loop(),
                    }
                }
                w.store(wait, Ordering::Release);
            }
        }
        v.push(t.elapsed().as_nanos() as f64 / (2 * made.max(1)) as f64);
    }
    median(&mut v)
}

/// A bare ring per direction: 40-byte payload plus a stamp in one 64-byte cell of 16;
/// the consumer copies the payload out. One-way time of a ping-pong.
fn raw_ring(m: &SharedMapping, me: u32) -> f64 {
    // Cells of 8 words: word 0 the stamp, words 1..6 the payload. Direction 0->1 uses
    // cells at word 64.., 1->0 at word 512.. (separate pages).
    let cell = |dir: usize, i: u64| 64 + dir * 448 + (i % 16) as usize * 8;
    let send = |dir: usize, i: u64, payload: &[u64; 5]| {
        let c = cell(dir, i);
        for (k, p) in payload.iter().enumerate() {
            m.word(c + 1 + k).store(*p, Ordering::Relaxed);
        }
        m.word(c).store(i + 1, Ordering::Release);
    };
    let stop = [STOP; 5];
    let recv = |dir: usize, i: u64| -> [u64; 5] {
        let c = cell(dir, i);
        while m.word(c).load(Ordering::Acquire) != i + 1 {
            std::hint::spin_loop();
        }
        let mut out = [0u64; 5];
        for (k, o) in out.iter_mut().enumerate() {
            *o = m.word(c + 1 + k).load(Ordering::Relaxed);
        }
        out
    };
    let mut v = Vec::new();
    for rep in 0..5u64 {
        let base = rep * ROUNDS;
        let t = Instant::now();
        let mut made = ROUNDS;
        for i in base..base + ROUNDS {
            if me == 0 {
                if over_budget(i - base, t) {
                    // A whole round trip: rank 1 answers the stop before it leaves.
                    send(0, i, &stop);
                    std::hint::black_box(recv(1, i));
                    made = i - base;
                    break;
                }
                send(0, i, &[i, 1, 2, 3, 4]);
                std::hint::black_box(recv(1, i));
            } else {
                let p = recv(0, i);
                send(1, i, &p);
                if p == stop {
                    made = i - base;
                    break;
                }
            }
        }
        v.push(t.elapsed().as_nanos() as f64 / (2 * made.max(1)) as f64);
    }
    median(&mut v)
}

/// Raw TCP limits measured in one window between ranks 0 and 1 over loopback, without
/// any runtime in the way (what `--transport tcp` is compared with).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RawTcp {
    /// One-way time of an 8-byte ping-pong between two busy-polling non-blocking
    /// sockets with `TCP_NODELAY` (us, median of 5 batches).
    #[serde(serialize_with = "rounded::<3, _>")]
    pub(crate) pingpong_us: f64,
    /// A plain socket stream of 1 MiB writes into 1 MiB reads (MB/s, median of 5 runs).
    #[serde(rename = "stream_MBps", serialize_with = "rounded::<1, _>")]
    pub(crate) stream_mbps: f64,
}

/// Round trips per batch of the raw TCP ping-pong.
const TCP_ROUNDS: u64 = 10_000;
/// 1 MiB chunks per run of the raw TCP stream.
const STREAM_CHUNKS: usize = 256;
const STREAM_CHUNK: usize = 1 << 20;

/// Measures [`RawTcp`] between ranks 0 and 1 (when both share a host) through a fresh
/// loopback connection; other ranks only take part in the collectives. Returns None on a
/// single rank or across hosts.
pub(crate) fn measure_tcp(w: &World) -> Result<Option<RawTcp>, BenchError> {
    use std::net::{Ipv4Addr, TcpListener, TcpStream};
    let me = w.rank();
    let ok = w.size() >= 2 && w.same_host(1) && w.same_host(0);
    let flag = w.allgather_bytes(&[u8::from(ok)])?;
    if flag.iter().any(|f| f.first() != Some(&1)) || w.size() < 2 {
        return Ok(None);
    }
    let io = || BenchError::io("raw tcp probe");
    let listener = if me == 0 {
        Some(TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(io())?)
    } else {
        None
    };
    let port = match &listener {
        Some(l) => l.local_addr().map_err(io())?.port(),
        None => 0,
    };
    let ports = w.allgather_bytes(&port.to_le_bytes())?;
    let port = u16::from_le_bytes([ports[0][0], ports[0][1]]);
    let stream = match (me, &listener) {
        (0, Some(l)) => Some(l.accept().map_err(io())?.0),
        (1, _) => Some(TcpStream::connect((Ipv4Addr::LOCALHOST, port)).map_err(io())?),
        _ => None,
    };
    let mut result = None;
    if let Some(mut s) = stream {
        s.set_nodelay(true).map_err(io())?;
        s.set_nonblocking(true).map_err(io())?;
        let pingpong_us = tcp_pingpong(&mut s, me).map_err(io())?;
        s.set_nonblocking(false).map_err(io())?;
        let stream_mbps = tcp_stream(&mut s, me).map_err(io())?;
        result = Some(RawTcp {
            pingpong_us,
            stream_mbps,
        });
    }
    w.barrier()?;
    Ok(result)
}

/// Reads exactly `buf.len()` bytes, busy-polling a non-blocking socket (or blocking on
/// a blocking one).
fn read_exact_spin(s: &mut std::net::TcpStream, buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::{ErrorKind, Read};
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                std::hint::spin_loop();
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes all of `buf`, busy-retrying while a non-blocking socket is full.
fn write_all_spin(s: &mut std::net::TcpStream, buf: &[u8]) -> std::io::Result<()> {
    use std::io::{ErrorKind, Write};
    let mut sent = 0;
    while sent < buf.len() {
        match s.write(&buf[sent..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => sent += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// 8-byte ping-pong, rank 0 sends first; one-way time in microseconds.
fn tcp_pingpong(s: &mut std::net::TcpStream, me: u32) -> std::io::Result<f64> {
    let mut v = Vec::new();
    for rep in 0..=5u64 {
        let t = Instant::now();
        for i in 0..TCP_ROUNDS {
            let mut b = [0u8; 8];
            if me == 0 {
                write_all_spin(s, &i.to_le_bytes())?;
                read_exact_spin(s, &mut b)?;
                if u64::from_le_bytes(b) != i {
                    return Err(std::io::ErrorKind::InvalidData.into());
                }
            } else {
                read_exact_spin(s, &mut b)?;
                write_all_spin(s, &b)?;
            }
        }
        // The first batch warms up.
        if rep > 0 {
            v.push(t.elapsed().as_nanos() as f64 / 1e3 / (2 * TCP_ROUNDS) as f64);
        }
    }
    Ok(median(&mut v))
}

/// Rank 1 streams `STREAM_CHUNKS` MiB in 1 MiB writes, rank 0 reads them in 1 MiB reads
/// and answers one byte; rank 0's rate in MB/s (rank 1 returns 0).
fn tcp_stream(s: &mut std::net::TcpStream, me: u32) -> std::io::Result<f64> {
    use std::io::{Read, Write};
    let mut buf = vec![0x5au8; STREAM_CHUNK];
    let mut v = Vec::new();
    for rep in 0..=5 {
        let t = Instant::now();
        if me == 1 {
            for _ in 0..STREAM_CHUNKS {
                s.write_all(&buf)?;
            }
            s.read_exact(&mut buf[..1])?;
        } else {
            let total = STREAM_CHUNKS * STREAM_CHUNK;
            let mut got = 0;
            while got < total {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                got += n;
            }
            s.write_all(&[1])?;
            if rep > 0 {
                v.push(total as f64 / t.elapsed().as_nanos().max(1) as f64 * 1e3);
            }
        }
    }
    Ok(if me == 0 { median(&mut v) } else { 0.0 })
}
