//! `spools bench grim channels|burst|bulk`: the experiments of the GRIM paper's section 6
//! (Myrinet, 2000) with active messages, 2 ranks.
//!
//! - `channels`: one-way latency of a short ping-pong while traffic is pending on every
//!   one of C logical channels: before each ping, rank 0 sends `--backlog` short messages
//!   spread round-robin over channels 0..C, then the ping on channel i mod C. The backlog
//!   is the same for every C, so only the spreading differs: a receiver that searched its
//!   channels for pending work (GRIM's NI did) would slow down as C grows.
//! - `burst`: bursts of N short messages answered by one acknowledgement once all have
//!   arrived; the gap is the time each message after the first adds,
//!   (T(N) - T(1)) / (N - 1), and the sender's own time per send is reported beside it.
//! - `bulk`: bandwidth of a round trip of S bytes moved as bulk messages of at most the
//!   bulk limit each. Cut-through: sent from the user's buffer piece by piece and each piece
//!   copied into the destination by its handler as it arrives, so the sender's copies
//!   overlap the receiver's. Store-and-forward (the paper's other injection mode): the
//!   sender first stages the whole message (one copy), and the receiver delivers it to the
//!   destination only once the last piece is in (one more copy), so nothing overlaps.
//!   Bandwidth is S over half the round trip.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde::Serialize;
use spools::{Channel, Delivery, HandlerId, World};

use crate::args::GrimArgs;
use crate::error::{bail, ensure, BenchError};
use crate::output::print_json;
use crate::plot::{self, Line};
use crate::session::{need_two, start, transport_name};
use crate::sizes::parse_sizes;
use crate::stats::{median, rounded};

/// Channel counts of `channels` by default.
const CHANNELS: [u16; 7] = [1, 2, 4, 8, 16, 32, 64];
/// Burst lengths of `burst` by default.
const BURSTS: [u64; 10] = [10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000];
/// Sizes of `bulk` by default: 4 KiB to 16 MiB by powers of 4.
const BULK_SIZES: [usize; 7] = [
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
];

/// One point of `channels`.
#[derive(Debug, Serialize)]
struct ChannelPoint {
    /// Logical channels with traffic pending.
    channels: u16,
    /// Median one-way latency of the ping (half the round trip, backlog included), us.
    #[serde(serialize_with = "rounded::<4, _>")]
    latency_us: f64,
    /// This latency over the one with 1 channel.
    #[serde(serialize_with = "rounded::<3, _>")]
    ratio_to_one: f64,
}

/// One point of `burst`.
#[derive(Debug, Serialize)]
struct BurstPoint {
    /// Messages in a burst.
    burst: u64,
    /// Median time from the first send to the acknowledgement of the last, us.
    #[serde(serialize_with = "rounded::<3, _>")]
    burst_us: f64,
    /// Time each message after the first adds, (T(N) - T(1)) / (N - 1), us.
    #[serde(serialize_with = "rounded::<4, _>")]
    gap_us: f64,
    /// The sender's time per send call, us.
    #[serde(serialize_with = "rounded::<4, _>")]
    send_gap_us: f64,
}

/// One point of `bulk`.
#[derive(Debug, Serialize)]
struct BulkPoint {
    /// Message size, bytes.
    bytes: usize,
    /// Cut-through bandwidth, MB/s.
    #[serde(rename = "cut_through_MBps", serialize_with = "rounded::<1, _>")]
    cut_through: f64,
    /// Store-and-forward bandwidth, MB/s.
    #[serde(rename = "store_and_forward_MBps", serialize_with = "rounded::<1, _>")]
    store_and_forward: f64,
}

/// The document of `spools bench grim EXPERIMENT --json`: one of the three lists is set.
#[derive(Debug, Serialize)]
struct GrimReport<'a> {
    /// Always `grim`.
    benchmark: &'static str,
    /// `channels`, `burst` or `bulk`.
    experiment: &'a str,
    /// `shm`, `tcp` or `self`.
    transport: &'static str,
    /// Messages pending ahead of each ping (`channels`).
    #[serde(skip_serializing_if = "Option::is_none")]
    backlog: Option<u32>,
    /// Pieces of a bulk transfer, bytes (`bulk`).
    #[serde(skip_serializing_if = "Option::is_none")]
    piece: Option<usize>,
    /// The points of `channels`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    channels: Vec<ChannelPoint>,
    /// The points of `burst`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    bursts: Vec<BurstPoint>,
    /// The points of `bulk`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    bulk: Vec<BulkPoint>,
}

/// A handler counting the messages it runs; returns its id and the counter.
fn counter(w: &World, name: &str) -> Result<(HandlerId, Arc<AtomicU64>), BenchError> {
    let c = Arc::new(AtomicU64::new(0));
    let c2 = c.clone();
    w.worker()
        .register(name, move |_| {
            c2.fetch_add(1, Ordering::Release);
        })
        .map_err(BenchError::Register)?;
    w.worker().sync_handlers()?;
    Ok((w.worker().handler_id(name)?, c))
}

/// Waits until `c` reaches `n`.
fn wait_count(w: &World, c: &AtomicU64, n: u64) -> Result<(), BenchError> {
    w.worker().wait_for(|| c.load(Ordering::Acquire) >= n)?;
    Ok(())
}

/// `channels`: the latency of a ping behind a backlog spread over C channels.
fn channels(w: &mut World, a: &GrimArgs) -> Result<Vec<ChannelPoint>, BenchError> {
    let counts = a.channels.clone().unwrap_or_else(|| CHANNELS.to_vec());
    ensure!(
        counts.iter().all(|&c| c >= 1),
        "--channels: every count must be at least 1"
    );
    let (h_bg, bg) = counter(w, "grim.bg")?;
    let (h_ping, pings) = counter(w, "grim.ping")?;
    let me = w.rank();
    let peer = 1 - me;
    let reps = a.common.reps.max(1);
    let n = a.iterations.max(1);
    let mut got = 0u64;
    let mut points = Vec::new();
    for &c in &counts {
        let mut v = Vec::new();
        for rep in 0..=reps {
            w.barrier()?;
            let t = Instant::now();
            for i in 0..n {
                let ch = Channel::new((i % u64::from(c)) as u16);
                if me == 0 {
                    let ep = w.endpoint();
                    for j in 0..a.backlog {
                        let bch = Channel::new((j % u32::from(c)) as u16);
                        ep.send_short(
                            peer,
                            h_bg,
                            [u64::from(j), 0, 0, 0],
                            bch,
                            Delivery::Immediate,
                        )?;
                    }
                    ep.send_short(peer, h_ping, [i, 0, 0, 0], ch, Delivery::Immediate)?;
                    wait_count(w, &pings, got + i + 1)?;
                } else {
                    wait_count(w, &pings, got + i + 1)?;
                    w.endpoint()
                        .send_short(peer, h_ping, [i, 0, 0, 0], ch, Delivery::Immediate)?;
                }
            }
            got += n;
            if rep > 0 {
                v.push(t.elapsed().as_secs_f64() * 1e6 / (2 * n) as f64);
            }
        }
        points.push((c, median(&mut v)));
    }
    // Every background message arrived, on the receiving rank.
    w.barrier()?;
    if me == 1 {
        let want = counts.len() as u64 * (reps as u64 + 1) * n * u64::from(a.backlog);
        wait_count(w, &bg, want)?;
    }
    let one = points.first().map_or(1.0, |p| p.1).max(1e-12);
    Ok(points
        .into_iter()
        .map(|(channels, latency_us)| ChannelPoint {
            channels,
            latency_us,
            ratio_to_one: latency_us / one,
        })
        .collect())
}

/// `burst`: the time of a burst of N shorts until its acknowledgement.
fn burst(w: &mut World, a: &GrimArgs) -> Result<Vec<BurstPoint>, BenchError> {
    let lengths = a.bursts.clone().unwrap_or_else(|| BURSTS.to_vec());
    ensure!(
        lengths.iter().all(|&n| n >= 2),
        "--bursts: every burst must have at least 2 messages"
    );
    let (h_msg, msgs) = counter(w, "grim.burst")?;
    let (h_ack, acks) = counter(w, "grim.ack")?;
    let me = w.rank();
    let peer = 1 - me;
    let reps = a.common.reps.max(1);
    let (mut got_msgs, mut got_acks) = (0u64, 0u64);
    // Times one burst of `len`, `rounds` times per repetition: (burst us, send us per msg).
    let mut time = |w: &mut World, len: u64| -> Result<(f64, f64), BenchError> {
        let rounds = (a.iterations * 10 / len).clamp(3, a.iterations.max(3));
        let (mut tb, mut ts) = (Vec::new(), Vec::new());
        for rep in 0..=reps {
            w.barrier()?;
            let t = Instant::now();
            let mut sending = 0.0;
            for _ in 0..rounds {
                if me == 0 {
                    let t0 = Instant::now();
                    let ep = w.endpoint();
                    for k in 0..len {
                        ep.send_short(
                            peer,
                            h_msg,
                            [k, 0, 0, 0],
                            Channel::new(0),
                            Delivery::Immediate,
                        )?;
                    }
                    sending += t0.elapsed().as_secs_f64();
                    got_acks += 1;
                    wait_count(w, &acks, got_acks)?;
                } else {
                    got_msgs += len;
                    wait_count(w, &msgs, got_msgs)?;
                    w.endpoint().send_short(
                        peer,
                        h_ack,
                        [0; 4],
                        Channel::new(0),
                        Delivery::Immediate,
                    )?;
                }
            }
            if rep > 0 {
                tb.push(t.elapsed().as_secs_f64() * 1e6 / rounds as f64);
                ts.push(sending * 1e6 / (rounds * len) as f64);
            }
        }
        Ok((median(&mut tb), median(&mut ts)))
    };
    let (single, _) = time(w, 1)?;
    let mut points = Vec::new();
    for &len in &lengths {
        let (burst_us, send_gap_us) = time(w, len)?;
        points.push(BurstPoint {
            burst: len,
            burst_us,
            gap_us: ((burst_us - single) / (len - 1) as f64).max(0.0),
            send_gap_us,
        });
    }
    Ok(points)
}

/// The receiving side of `bulk`: where pieces go, and how many bytes have arrived.
struct Sink {
    /// The destination (cut-through) or the staging buffer (store-and-forward).
    buf: Mutex<Vec<u8>>,
    /// Bytes received so far.
    bytes: AtomicU64,
}

/// Sends `msg` as pieces of at most `piece` bytes (args: offset).
fn send_pieces(
    w: &mut World,
    peer: u32,
    h: HandlerId,
    msg: &[u8],
    piece: usize,
) -> Result<(), BenchError> {
    let ep = w.endpoint();
    for (k, p) in msg.chunks(piece).enumerate() {
        ep.send_bulk(peer, h, [(k * piece) as u64, 0, 0, 0], p, Channel::new(0))?;
    }
    Ok(())
}

/// `bulk`: cut-through against store-and-forward bandwidth by size.
fn bulk(w: &mut World, a: &GrimArgs) -> Result<(Vec<BulkPoint>, usize), BenchError> {
    let sizes = match &a.sizes {
        Some(s) => parse_sizes(s)?,
        None => BULK_SIZES.to_vec(),
    };
    ensure!(
        sizes.iter().all(|&s| s > 0),
        "--sizes: sizes must be positive"
    );
    let max = sizes.iter().copied().max().unwrap_or(1);
    let piece = w.worker().config().bulk_limit as usize;
    let sink = Arc::new(Sink {
        buf: Mutex::new(vec![0u8; max]),
        bytes: AtomicU64::new(0),
    });
    let s2 = sink.clone();
    w.worker()
        .register("grim.piece", move |m| {
            let off = m.args[0] as usize;
            let mut b = s2.buf.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(dst) = b.get_mut(off..off + m.payload.len()) {
                dst.copy_from_slice(m.payload);
            }
            drop(b);
            s2.bytes
                .fetch_add(m.payload.len() as u64, Ordering::Release);
        })
        .map_err(BenchError::Register)?;
    w.worker().sync_handlers()?;
    let h = w.worker().handler_id("grim.piece")?;
    let me = w.rank();
    let peer = 1 - me;
    let reps = a.common.reps.max(1);
    let user: Vec<u8> = (0..max).map(|i| (i * 13 + me as usize) as u8).collect();
    let mut stage = vec![0u8; max];
    let mut dest = vec![0u8; max];
    let mut got = 0u64;
    let mut points = Vec::new();
    for &s in &sizes {
        let rounds = ((64usize << 20) / s).clamp(3, 200) as u64;
        let mut bw = [0.0f64; 2];
        for (mode, out) in bw.iter_mut().enumerate() {
            let store = mode == 1;
            let mut v = Vec::new();
            // Repetition 0 is the warm-up and the checked one.
            for rep in 0..=reps {
                w.barrier()?;
                let t = Instant::now();
                for _ in 0..rounds {
                    let send = |w: &mut World, stage: &mut Vec<u8>| -> Result<(), BenchError> {
                        if store {
                            stage[..s].copy_from_slice(&user[..s]);
                            send_pieces(w, peer, h, &stage[..s], piece)
                        } else {
                            send_pieces(w, peer, h, &user[..s], piece)
                        }
                    };
                    let recv = |w: &mut World, got: &mut u64, dest: &mut Vec<u8>| {
                        *got += s as u64;
                        wait_count(w, &sink.bytes, *got)?;
                        if store {
                            let b = sink.buf.lock().unwrap_or_else(PoisonError::into_inner);
                            dest[..s].copy_from_slice(&b[..s]);
                        }
                        Ok::<(), BenchError>(())
                    };
                    if me == 0 {
                        send(w, &mut stage)?;
                        recv(w, &mut got, &mut dest)?;
                    } else {
                        recv(w, &mut got, &mut dest)?;
                        send(w, &mut stage)?;
                    }
                }
                if rep == 0 {
                    let arrived = if store {
                        dest[..s].to_vec()
                    } else {
                        sink.buf.lock().unwrap_or_else(PoisonError::into_inner)[..s].to_vec()
                    };
                    ensure!(
                        arrived
                            .iter()
                            .enumerate()
                            .all(|(i, &x)| x == (i * 13 + peer as usize) as u8),
                        "bulk: {s} B arrived corrupt"
                    );
                } else {
                    v.push(t.elapsed().as_secs_f64() * 1e6 / (2 * rounds) as f64);
                }
            }
            *out = s as f64 / median(&mut v).max(1e-9);
        }
        points.push(BulkPoint {
            bytes: s,
            cut_through: bw[0],
            store_and_forward: bw[1],
        });
    }
    Ok((points, piece))
}

/// Runs `spools bench grim EXPERIMENT`.
pub(crate) fn run(a: &GrimArgs) -> Result<(), BenchError> {
    let mut w = start(&a.common)?;
    need_two(&w, &format!("grim {}", a.experiment))?;
    let mut doc = GrimReport {
        benchmark: "grim",
        experiment: &a.experiment,
        transport: transport_name(&w, 1 - w.rank()),
        backlog: None,
        piece: None,
        channels: Vec::new(),
        bursts: Vec::new(),
        bulk: Vec::new(),
    };
    match a.experiment.as_str() {
        "channels" => {
            doc.channels = channels(&mut w, a)?;
            doc.backlog = Some(a.backlog);
        }
        "burst" => doc.bursts = burst(&mut w, a)?,
        "bulk" => {
            let (points, piece) = bulk(&mut w, a)?;
            doc.bulk = points;
            doc.piece = Some(piece);
        }
        other => bail!("unknown GRIM experiment {other:?} (channels, burst, bulk)"),
    }
    w.barrier()?;
    if w.rank() == 0 {
        if a.common.json {
            print_json(&doc)?;
        } else {
            print_table(&doc, a.common.reps);
        }
        if let Some(file) = &a.plot {
            write_plot(file, &doc)?;
        }
    }
    w.finalize()?;
    Ok(())
}

fn print_table(d: &GrimReport<'_>, reps: usize) {
    let t = d.transport;
    match d.experiment {
        "channels" => {
            println!(
                "# GRIM 6.1 over {t}: one-way short latency with {} messages pending, spread over C channels (medians of {reps})",
                d.backlog.unwrap_or(0)
            );
            println!("{:>9} {:>12} {:>10}", "channels", "latency_us", "x_of_1");
            for p in &d.channels {
                println!(
                    "{:>9} {:>12.3} {:>10.3}",
                    p.channels, p.latency_us, p.ratio_to_one
                );
            }
        }
        "burst" => {
            println!("# GRIM 6.1 over {t}: gap between successive short messages by burst length (medians of {reps})");
            println!(
                "{:>9} {:>12} {:>10} {:>12}",
                "burst", "burst_us", "gap_us", "send_gap_us"
            );
            for p in &d.bursts {
                println!(
                    "{:>9} {:>12.2} {:>10.4} {:>12.4}",
                    p.burst, p.burst_us, p.gap_us, p.send_gap_us
                );
            }
        }
        _ => {
            println!(
                "# GRIM 6.2 over {t}: round-trip bandwidth, pieces of {} B (medians of {reps})",
                d.piece.unwrap_or(0)
            );
            println!(
                "{:>10} {:>16} {:>20}",
                "bytes", "cut_through_MB/s", "store_forward_MB/s"
            );
            for p in &d.bulk {
                println!(
                    "{:>10} {:>16.1} {:>20.1}",
                    p.bytes, p.cut_through, p.store_and_forward
                );
            }
        }
    }
}

fn write_plot(file: &std::path::Path, d: &GrimReport<'_>) -> Result<(), BenchError> {
    let t = d.transport;
    match d.experiment {
        "channels" => plot::write_xy(
            file,
            &format!("GRIM channels over {t}: latency (us)"),
            "logical channels with traffic pending",
            &[Line {
                name: "one-way latency",
                points: d
                    .channels
                    .iter()
                    .map(|p| (f64::from(p.channels), p.latency_us))
                    .collect(),
            }],
        ),
        "burst" => plot::write_xy(
            file,
            &format!("GRIM burst over {t}: gap (us)"),
            "messages in the burst",
            &[
                Line {
                    name: "gap (delivered)",
                    points: d
                        .bursts
                        .iter()
                        .map(|p| (p.burst as f64, p.gap_us))
                        .collect(),
                },
                Line {
                    name: "send call",
                    points: d
                        .bursts
                        .iter()
                        .map(|p| (p.burst as f64, p.send_gap_us))
                        .collect(),
                },
            ],
        ),
        _ => plot::write_xy(
            file,
            &format!("GRIM bulk over {t}: bandwidth (MB/s)"),
            "message size (bytes)",
            &[
                Line {
                    name: "cut-through",
                    points: d
                        .bulk
                        .iter()
                        .map(|p| (p.bytes as f64, p.cut_through))
                        .collect(),
                },
                Line {
                    name: "store-and-forward",
                    points: d
                        .bulk
                        .iter()
                        .map(|p| (p.bytes as f64, p.store_and_forward))
                        .collect(),
                },
            ],
        ),
    }
}
