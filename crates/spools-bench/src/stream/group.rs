//! The `group` part of `spools bench stream`: the iWarp paper's stereo-vision "digital VCR"
//! scaled up. Four streams of RGB frames (`u8[H,W,3] block,*,* on P`), synchronised in one
//! lock-step group on one connection, go from every rank of the job to a receiver that
//! records the order in which it hands the ADUs out. Reported: frames per second of the
//! group (a frame is ADU n of all four streams) and the *skew*.
//!
//! The skew of one handed-out ADU n of stream s is `n - c`, where `c` is the fewest ADUs
//! any other stream of the group had handed out by then (0 when no stream is ever more
//! than the current frame ahead: every stream had frames `0..n` out before any stream's
//! frame n); the run's skew is the largest, and lock step means 0.
//!
//! The receiver is a [`spools_stream::Receiver`] on a thread of rank 0's process (its own
//! TCP port and sockets; the sink needs the order of hand-outs, which `spools recv` does not
//! print).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::Instant;

use serde::Serialize;
use spools::{Layout, StreamOptions, World};
use spools_stream::{Event, Limits, Receiver};

use super::common::{agree, receiver_addr, Timing};
use crate::dataset::{fill, parse_layout};
use crate::error::{ensure, BenchError};

/// Streams of the group (the paper's four cameras).
pub(super) const STREAMS: u32 = 4;

/// The lock-step group's id on the connection.
const GROUP: u32 = 1;

/// One run of the group.
#[derive(Debug, Clone, Copy, Serialize)]
pub(super) struct GroupRun {
    /// Seconds from the streams open on every rank to the receiver's end.
    #[serde(serialize_with = "crate::stats::rounded::<6, _>")]
    pub(super) seconds: f64,
    /// Whole ADUs the receiver handed out (frames times streams when nothing was lost).
    pub(super) adus: u64,
    /// Their bytes.
    pub(super) bytes: u64,
    /// The largest skew of the run (see the module's doc): 0 in lock step.
    pub(super) skew: u64,
}

/// The `group` part.
#[derive(Debug, Serialize)]
pub(super) struct GroupPart {
    /// Ranks holding each frame (`block,*,* on P`).
    pub(super) ranks: u32,
    /// Streams in the group.
    pub(super) streams: u32,
    /// Links of the connection.
    pub(super) links: u16,
    /// Bytes of one frame of one stream (H x W x 3).
    pub(super) frame_bytes: u64,
    /// Frames (ADUs per stream) of a run.
    pub(super) frames: u64,
    /// The runs.
    pub(super) timing: Timing<GroupRun>,
    /// Frames of the whole group per second, over the median run.
    #[serde(serialize_with = "crate::stats::rounded::<1, _>")]
    pub(super) frames_per_s: f64,
    /// The largest skew of every run: 0 in lock step.
    pub(super) skew: u64,
}

/// What the group part sends.
pub(super) struct GroupSizes {
    /// Frame height and width.
    pub(super) hw: (u64, u64),
    /// Frames per run.
    pub(super) frames: u64,
    /// Links of the connection.
    pub(super) links: u16,
    /// Bytes of a TU.
    pub(super) tu: u64,
}

/// The receiver's record: ADUs handed out per stream and the largest skew seen.
#[derive(Default)]
struct Order {
    out: HashMap<u32, u64>,
    adus: u64,
    bytes: u64,
    skew: u64,
    lost: Vec<String>,
}

impl Order {
    fn on(&mut self, members: &[u32], e: &Event) {
        match e {
            Event::Adu { stream, adu, data } => {
                let fewest = members
                    .iter()
                    .filter(|m| *m != stream)
                    .map(|m| self.out.get(m).copied().unwrap_or(0))
                    .min()
                    .unwrap_or(*adu);
                self.skew = self.skew.max(adu.saturating_sub(fewest));
                *self.out.entry(*stream).or_insert(0) += 1;
                self.adus += 1;
                self.bytes += data.len() as u64;
            }
            Event::Incomplete { stream, adu, .. } => {
                self.lost
                    .push(format!("stream {stream} ADU {adu} incomplete"));
            }
            Event::Missing { stream, from, to } => {
                self.lost
                    .push(format!("stream {stream} ADUs {from}..{to} missing"));
            }
            Event::Ended { .. } => {}
        }
    }
}

/// The receiver thread of one run, on rank 0.
fn start_receiver(
    members: Vec<u32>,
) -> Result<(SocketAddr, JoinHandle<Result<Order, String>>), BenchError> {
    let r = Receiver::bind("127.0.0.1:0", Limits::default())
        .map_err(BenchError::io("binding the group's receiver"))?;
    let addr = r
        .local_addr()
        .map_err(BenchError::io("the group receiver's address"))?;
    let t = std::thread::spawn(move || {
        let mut order = Order::default();
        let summary = r
            .serve(1, |d| {
                order.on(&members, &d.event);
                Ok(())
            })
            .map_err(|e| e.to_string())?;
        if let Some(b) = summary.broken.first() {
            return Err(format!("the receiver dropped a connection: {b}"));
        }
        Ok(order)
    });
    Ok((addr, t))
}

/// One run: every rank opens the connection and the group, sends `frames` frames of the
/// four streams, and closes; rank 0's receiver checks that every byte arrived.
fn group_run(
    w: &World,
    layout: &Layout,
    data: &[Vec<u8>],
    s: &GroupSizes,
) -> Result<GroupRun, BenchError> {
    // Stream ids are given in order from 1 on a new connection.
    let members: Vec<u32> = (1..=STREAMS).collect();
    let recv = if w.rank() == 0 {
        Some(start_receiver(members))
    } else {
        None
    };
    let dest = receiver_addr(
        w,
        recv.as_ref()
            .map(|r| r.as_ref().map(|(a, _)| *a).map_err(ToString::to_string)),
    )?;
    let mut conn = w.stream_connect(dest, s.links)?;
    let mut ids = Vec::new();
    for _ in 0..STREAMS {
        ids.push(conn.open_stream(StreamOptions {
            tu: s.tu,
            group: GROUP,
            ..StreamOptions::default()
        })?);
    }
    w.barrier()?;
    let t0 = Instant::now();
    for _ in 0..s.frames {
        let items: Vec<_> = ids
            .iter()
            .zip(data)
            .map(|(&id, d)| (id, d.as_slice(), layout))
            .collect();
        conn.send_group(GROUP, &items)?;
    }
    conn.close()?;
    let frame = layout.total_bytes().unwrap_or(0);
    let want = (
        s.frames * u64::from(STREAMS),
        s.frames * u64::from(STREAMS) * frame,
    );
    let done = match recv {
        Some(Ok((_, t))) => match t.join() {
            Ok(Ok(o)) => {
                if let Some(l) = o.lost.first() {
                    Err(BenchError::Invalid(format!("the receiver lost data: {l}")))
                } else if (o.adus, o.bytes) != want {
                    Err(BenchError::Invalid(format!(
                        "the receiver handed out {} ADUs of {} bytes, the job sent {} of {}",
                        o.adus, o.bytes, want.0, want.1
                    )))
                } else {
                    Ok(Some(o))
                }
            }
            Ok(Err(e)) => Err(BenchError::Invalid(e)),
            Err(_) => Err(BenchError::Invalid("the receiver thread panicked".into())),
        },
        _ => Ok(None),
    };
    let seconds = t0.elapsed().as_secs_f64();
    let (adus, bytes, skew) = done
        .as_ref()
        .ok()
        .and_then(Option::as_ref)
        .map_or((0, 0, 0), |o| (o.adus, o.bytes, o.skew));
    agree(w, done.map(|_| ()))?;
    Ok(GroupRun {
        seconds,
        adus,
        bytes,
        skew,
    })
}

/// The `group` part: `reps` runs, each frame of each stream held `block,*,* on P`.
pub(super) fn group_part(w: &World, reps: usize, s: &GroupSizes) -> Result<GroupPart, BenchError> {
    let p = w.size();
    let (h, wd) = s.hw;
    ensure!(
        h >= u64::from(p),
        "a frame of {h} rows cannot cover {p} ranks"
    );
    let layout = parse_layout("--frame", &format!("u8[{h},{wd},3] block,*,* on {p}x1x1"))?;
    let data = (0..u64::from(STREAMS))
        .map(|st| fill(&layout, w.rank(), st * 7919))
        .collect::<Result<Vec<_>, _>>()?;
    let mut timing = Timing::new();
    for _ in 0..reps {
        timing.runs.push(group_run(w, &layout, &data, s)?);
    }
    let frame_bytes = h * wd * 3;
    timing.summarise(|r| r.seconds, s.frames * frame_bytes * u64::from(STREAMS));
    let frames_per_s = s.frames as f64 / timing.median_s.max(1e-9);
    let skew = timing.runs.iter().map(|r| r.skew).max().unwrap_or(0);
    Ok(GroupPart {
        ranks: p,
        streams: STREAMS,
        links: s.links,
        frame_bytes,
        frames: s.frames,
        timing,
        frames_per_s,
        skew,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adu(stream: u32, adu: u64) -> Event {
        Event::Adu {
            stream,
            adu,
            data: vec![0; 3],
        }
    }

    #[test]
    fn skew_is_zero_in_lock_step_and_counts_a_stream_ahead() {
        let members = [1, 2];
        let mut o = Order::default();
        for e in [adu(2, 0), adu(1, 0), adu(1, 1), adu(2, 1)] {
            o.on(&members, &e);
        }
        assert_eq!((o.skew, o.adus, o.bytes), (0, 4, 12));
        // Stream 1 hands out frames 1 and 2 while stream 2 has frame 0 only out.
        let mut o = Order::default();
        for e in [adu(1, 0), adu(2, 0), adu(1, 1), adu(1, 2), adu(2, 1)] {
            o.on(&members, &e);
        }
        assert_eq!(o.skew, 1);
        o.on(
            &members,
            &Event::Missing {
                stream: 2,
                from: 2,
                to: 3,
            },
        );
        assert_eq!(o.lost.len(), 1);
    }
}
