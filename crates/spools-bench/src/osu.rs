//! `spools bench osu TEST`: the OSU micro-benchmarks' measurements through the tagged API,
//! printed in their format so the tables can be put beside an MPI's.
//!
//! Each test measures what the OSU program of the same name measures, with its defaults:
//! - `latency`: blocking send/recv ping-pong, one-way time (half the round trip); sizes
//!   0 and 1 B to 4 MiB; 10,000 timed iterations after 100 warm-up ones up to 8 KiB,
//!   1,000 after 10 above.
//! - `bw`: a window of 64 non-blocking sends answered by a 4-byte reply, MB/s (10^6 B/s);
//!   `bibw`: both ranks send a window of 64 to each other at once; 100 windows after 10 up
//!   to 8 KiB, 20 after 2 above; sizes 1 B to 4 MiB.
//! - `allreduce` (f32 sum, 4 B up), `bcast` (from rank 0), `alltoall` (bytes per pair),
//!   1 B to 1 MiB, and `barrier`: each call timed alone and followed by a barrier; 1,000
//!   timed calls after 200 up to 8 KiB, 100 after 10 above; the average over ranks of each
//!   rank's mean time per call.
//!
//! Every size starts with one verified exchange, so a wrong answer fails the run instead of
//! being timed.

use std::time::Instant;

use serde::Serialize;
use spools::{wait_all, Op, Request, World};

use crate::args::OsuArgs;
use crate::error::{ensure, BenchError};
use crate::output::print_json;
use crate::session::{need_two, start};
use crate::sizes::parse_size;
use crate::stats::rounded;

/// Messages above this size use the large-message iteration counts.
const LARGE: usize = 8192;
/// Messages in flight in `bw` and `bibw`.
const WINDOW: usize = 64;
/// Largest point-to-point size by default.
const P2P_MAX: usize = 4 << 20;
/// Largest collective size by default.
const COLL_MAX: usize = 1 << 20;
/// Tags of the data and the replies.
const TAG_DATA: i32 = 100;
const TAG_REPLY: i32 = 101;

/// The tests, by their OSU names.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Test {
    Latency,
    Bw,
    Bibw,
    Allreduce,
    Bcast,
    Barrier,
    Alltoall,
}

impl Test {
    /// The test of a command-line name.
    pub(crate) fn parse(s: &str) -> Option<Test> {
        Some(match s {
            "latency" => Test::Latency,
            "bw" => Test::Bw,
            "bibw" => Test::Bibw,
            "allreduce" => Test::Allreduce,
            "bcast" => Test::Bcast,
            "barrier" => Test::Barrier,
            "alltoall" => Test::Alltoall,
            _ => return None,
        })
    }

    /// The first line of the table, as the OSU program names its test.
    fn title(self) -> &'static str {
        match self {
            Test::Latency => "OSU MPI Latency Test",
            Test::Bw => "OSU MPI Bandwidth Test",
            Test::Bibw => "OSU MPI Bi-Directional Bandwidth Test",
            Test::Allreduce => "OSU MPI Allreduce Latency Test",
            Test::Bcast => "OSU MPI Broadcast Latency Test",
            Test::Barrier => "OSU MPI Barrier Latency Test",
            Test::Alltoall => "OSU MPI All-to-All Personalized Exchange Latency Test",
        }
    }

    /// The value's column header and its unit in documents.
    fn column(self) -> (&'static str, &'static str) {
        match self {
            Test::Latency => ("Latency (us)", "us"),
            Test::Bw | Test::Bibw => ("Bandwidth (MB/s)", "MB/s"),
            _ => ("Avg Latency(us)", "us"),
        }
    }

    fn point_to_point(self) -> bool {
        matches!(self, Test::Latency | Test::Bw | Test::Bibw)
    }
}

/// One row of a table.
#[derive(Debug, Serialize)]
struct OsuPoint {
    /// Message size in bytes (0 for barrier).
    bytes: usize,
    /// Latency in microseconds or bandwidth in MB/s, as the test's unit says.
    #[serde(serialize_with = "rounded::<3, _>")]
    value: f64,
    /// Timed iterations (windows for bw and bibw).
    iterations: u64,
}

/// The document of `spools bench osu TEST --json`.
#[derive(Debug, Serialize)]
struct OsuReport<'a> {
    /// Always `osu`.
    benchmark: &'static str,
    /// The test.
    test: Test,
    /// Always `spools` (the MPI peer's tables are parsed from its text).
    #[serde(rename = "impl")]
    implementation: &'static str,
    /// Ranks of the job.
    ranks: u32,
    /// `us` or `MB/s`.
    unit: &'static str,
    /// By size.
    points: &'a [OsuPoint],
}

/// Timed and warm-up iterations for a size: OSU's, unless given.
fn counts(a: &OsuArgs, test: Test, size: usize) -> (u64, u64) {
    let large = size > LARGE;
    let (iters, skip) = match (test, large) {
        (Test::Latency, false) => (10_000, 100),
        (Test::Latency, true) => (1_000, 10),
        (Test::Bw | Test::Bibw, false) => (100, 10),
        (Test::Bw | Test::Bibw, true) => (20, 2),
        (_, false) => (1_000, 200),
        (_, true) => (100, 10),
    };
    (
        a.iterations.unwrap_or(iters).max(1),
        a.warmup.unwrap_or(skip),
    )
}

/// The sizes of a test: powers of two from its smallest to `--max-size` (0 first for
/// `latency`, one point of 0 for `barrier`).
fn sizes(a: &OsuArgs, test: Test) -> Result<Vec<usize>, BenchError> {
    if test == Test::Barrier {
        return Ok(vec![0]);
    }
    let max = match &a.max_size {
        Some(s) => parse_size(s)?,
        None if test.point_to_point() => P2P_MAX,
        None => COLL_MAX,
    };
    let min = if test == Test::Allreduce { 4 } else { 1 };
    ensure!(
        max >= min,
        "--max-size {max}: the smallest size of osu {test:?} is {min} B"
    );
    let mut v = if test == Test::Latency {
        vec![0]
    } else {
        vec![]
    };
    let mut s = min;
    while s <= max {
        v.push(s);
        s *= 2;
    }
    Ok(v)
}

/// The byte every rank's buffer holds at `i` for a size (checked on arrival).
fn byte(rank: u32, i: usize, size: usize) -> u8 {
    (rank as usize * 31 + i * 7 + size) as u8
}

fn pattern(rank: u32, size: usize) -> Vec<u8> {
    (0..size).map(|i| byte(rank, i, size)).collect()
}

/// `latency`: one verified round trip, then the timed ping-pong (rank 0's clock).
fn latency(w: &World, size: usize, iters: u64, skip: u64) -> Result<f64, BenchError> {
    let me = w.rank();
    let peer = 1 - me;
    let out = pattern(me, size);
    let mut inb = vec![0u8; size];
    if me == 0 {
        w.send(&out, peer, TAG_DATA)?;
        w.recv(&mut inb, peer, TAG_DATA)?;
    } else {
        w.recv(&mut inb, peer, TAG_DATA)?;
        w.send(&out, peer, TAG_DATA)?;
    }
    ensure!(
        inb == pattern(peer, size),
        "latency: {size} B arrived corrupt"
    );
    w.barrier()?;
    let mut t = Instant::now();
    for i in 0..iters + skip {
        if i == skip {
            t = Instant::now();
        }
        if me == 0 {
            w.send(&out, peer, TAG_DATA)?;
            w.recv(&mut inb, peer, TAG_DATA)?;
        } else {
            w.recv(&mut inb, peer, TAG_DATA)?;
            w.send(&out, peer, TAG_DATA)?;
        }
    }
    Ok(t.elapsed().as_secs_f64() * 1e6 / (2 * iters) as f64)
}

/// Buffers of a window, reused from window to window (each request owns one while it
/// is in flight).
struct Window {
    send: Vec<Vec<u8>>,
    recv: Vec<Vec<u8>>,
}

impl Window {
    fn new(me: u32, size: usize) -> Window {
        Window {
            send: (0..WINDOW).map(|_| pattern(me, size)).collect(),
            recv: (0..WINDOW).map(|_| vec![0u8; size]).collect(),
        }
    }

    fn post_sends(&mut self, w: &World, peer: u32) -> Result<Vec<Request>, BenchError> {
        let mut reqs = Vec::with_capacity(WINDOW);
        for buf in self.send.drain(..) {
            reqs.push(w.isend(buf, peer, TAG_DATA)?);
        }
        Ok(reqs)
    }

    fn post_recvs(&mut self, w: &World, peer: u32) -> Result<Vec<Request>, BenchError> {
        let mut reqs = Vec::with_capacity(WINDOW);
        for buf in self.recv.drain(..) {
            reqs.push(w.irecv(buf, peer, TAG_DATA)?);
        }
        Ok(reqs)
    }

    /// Waits for sends and takes their buffers back.
    fn finish_sends(&mut self, reqs: Vec<Request>) -> Result<(), BenchError> {
        self.send = wait_all(reqs)?.into_iter().map(|c| c.buf).collect();
        Ok(())
    }

    /// Waits for receives, takes their buffers back, and checks them if asked.
    fn finish_recvs(
        &mut self,
        reqs: Vec<Request>,
        check: Option<(u32, usize)>,
    ) -> Result<(), BenchError> {
        self.recv = wait_all(reqs)?.into_iter().map(|c| c.buf).collect();
        if let Some((from, size)) = check {
            let want = pattern(from, size);
            ensure!(
                self.recv.iter().all(|b| *b == want),
                "bandwidth: a {size} B message from rank {from} arrived corrupt"
            );
        }
        Ok(())
    }
}

/// `bw` and `bibw`: windows of 64 messages, each window closed by a 4-byte reply (`bw`)
/// or by both windows completing (`bibw`). The first window is checked.
fn bandwidth(
    w: &World,
    size: usize,
    iters: u64,
    skip: u64,
    bidirectional: bool,
) -> Result<f64, BenchError> {
    let me = w.rank();
    let peer = 1 - me;
    let mut win = Window::new(me, size);
    let mut reply = [0u8; 4];
    w.barrier()?;
    let mut t = Instant::now();
    for i in 0..=iters + skip {
        // Window 0 is the verified one, outside warm-up and timing.
        if i == skip + 1 {
            t = Instant::now();
        }
        let check = (i == 0).then_some((peer, size));
        if bidirectional {
            let r = win.post_recvs(w, peer)?;
            let s = win.post_sends(w, peer)?;
            win.finish_sends(s)?;
            win.finish_recvs(r, check)?;
        } else if me == 0 {
            let s = win.post_sends(w, peer)?;
            win.finish_sends(s)?;
            w.recv(&mut reply, peer, TAG_REPLY)?;
        } else {
            let r = win.post_recvs(w, peer)?;
            win.finish_recvs(r, check)?;
            w.send(&reply, peer, TAG_REPLY)?;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let dirs = if bidirectional { 2.0 } else { 1.0 };
    Ok(size as f64 / 1e6 * (iters * WINDOW as u64) as f64 * dirs / secs.max(1e-12))
}

/// Buffers of the collectives.
struct CollBufs {
    bytes: Vec<u8>,
    out: Vec<u8>,
    f: Vec<f32>,
    fout: Vec<f32>,
}

/// One call of a collective (untimed setup excluded).
fn coll_call(w: &World, test: Test, size: usize, b: &mut CollBufs) -> Result<(), BenchError> {
    let n = w.size() as usize;
    match test {
        Test::Barrier => w.barrier()?,
        Test::Bcast => w.bcast(&mut b.bytes[..size], 0)?,
        Test::Allreduce => {
            let k = size / 4;
            w.allreduce(&b.f[..k], &mut b.fout[..k], &Op::Sum)?;
        }
        Test::Alltoall => w.alltoall(&b.bytes[..size * n], &mut b.out[..size * n])?,
        Test::Latency | Test::Bw | Test::Bibw => {}
    }
    Ok(())
}

/// One checked call of a collective.
fn coll_verified(w: &World, test: Test, size: usize, b: &mut CollBufs) -> Result<(), BenchError> {
    let (me, n) = (w.rank(), w.size() as usize);
    match test {
        Test::Barrier => w.barrier()?,
        Test::Bcast => {
            let want = pattern(0, size);
            if me == 0 {
                b.bytes[..size].copy_from_slice(&want);
            } else {
                b.bytes[..size].fill(0);
            }
            w.bcast(&mut b.bytes[..size], 0)?;
            ensure!(b.bytes[..size] == want[..], "bcast of {size} B corrupt");
        }
        Test::Allreduce => {
            let k = size / 4;
            for (i, x) in b.f[..k].iter_mut().enumerate() {
                *x = (me as usize + i % 64) as f32;
            }
            w.allreduce(&b.f[..k], &mut b.fout[..k], &Op::Sum)?;
            let base = (n * (n - 1) / 2) as f32;
            ensure!(
                b.fout[..k]
                    .iter()
                    .enumerate()
                    .all(|(i, &x)| x == base + (n * (i % 64)) as f32),
                "allreduce of {size} B wrong"
            );
            b.f[..k].fill(1.0);
        }
        Test::Alltoall => {
            for j in 0..n {
                b.bytes[j * size..(j + 1) * size].fill((me as usize * 16 + j) as u8);
            }
            w.alltoall(&b.bytes[..size * n], &mut b.out[..size * n])?;
            for i in 0..n {
                ensure!(
                    b.out[i * size..(i + 1) * size]
                        .iter()
                        .all(|&x| x == (i * 16 + me as usize) as u8),
                    "alltoall block of {size} B from rank {i} wrong"
                );
            }
        }
        Test::Latency | Test::Bw | Test::Bibw => {}
    }
    Ok(())
}

/// A collective as OSU times it: each call alone, a barrier after each; the average over
/// ranks of each rank's mean (on rank 0; the others get 0).
fn collective(
    w: &World,
    test: Test,
    size: usize,
    iters: u64,
    skip: u64,
    b: &mut CollBufs,
) -> Result<f64, BenchError> {
    coll_verified(w, test, size, b)?;
    w.barrier()?;
    let mut total = 0.0f64;
    for i in 0..iters + skip {
        let t = Instant::now();
        coll_call(w, test, size, b)?;
        if i >= skip {
            total += t.elapsed().as_secs_f64();
        }
        if test != Test::Barrier {
            w.barrier()?;
        }
    }
    let mine = total * 1e6 / iters as f64;
    let mut sum = [0.0f64];
    w.reduce(&[mine], &mut sum, &Op::Sum, 0)?;
    Ok(sum[0] / f64::from(w.size()))
}

/// Prints the table as the OSU program does (`%-10d%20.2f`).
fn print_table(test: Test, points: &[OsuPoint]) {
    let (col, _) = test.column();
    if !test.point_to_point() {
        println!();
    }
    println!("# {} (Spools)", test.title());
    if test == Test::Barrier {
        println!("# Avg Latency(us)");
        for p in points {
            println!("{:>17.2}", p.value);
        }
        return;
    }
    println!("{:<10}{:>20}", "# Size", col);
    for p in points {
        println!("{:<10}{:>20.2}", p.bytes, p.value);
    }
}

/// Runs `spools bench osu TEST`.
pub(crate) fn run(a: &OsuArgs) -> Result<(), BenchError> {
    let w = start(&a.common)?;
    let Some(test) = Test::parse(&a.test) else {
        crate::error::bail!(
            "unknown OSU test {:?} (latency, bw, bibw, allreduce, bcast, barrier, alltoall)",
            a.test
        );
    };
    if test.point_to_point() {
        need_two(&w, &format!("osu {}", a.test))?;
    } else {
        ensure!(
            w.size() >= 2,
            "`spools bench osu {}` needs at least 2 ranks",
            a.test
        );
    }
    let sizes = sizes(a, test)?;
    let max = sizes.iter().copied().max().unwrap_or(0);
    let n = w.size() as usize;
    let mut bufs = (!test.point_to_point()).then(|| CollBufs {
        bytes: vec![0; max.max(1) * n],
        out: vec![0; max.max(1) * n],
        f: vec![1.0; max / 4 + 1],
        fout: vec![0.0; max / 4 + 1],
    });
    let mut points = Vec::with_capacity(sizes.len());
    for &size in &sizes {
        let (iters, skip) = counts(a, test, size);
        let value = match (test, bufs.as_mut()) {
            (Test::Latency, _) => latency(&w, size, iters, skip)?,
            (Test::Bw, _) => bandwidth(&w, size, iters, skip, false)?,
            (Test::Bibw, _) => bandwidth(&w, size, iters, skip, true)?,
            (_, Some(b)) => collective(&w, test, size, iters, skip, b)?,
            (_, None) => 0.0,
        };
        points.push(OsuPoint {
            bytes: size,
            value,
            iterations: iters,
        });
        w.barrier()?;
    }
    if w.rank() == 0 {
        if a.common.json {
            print_json(&OsuReport {
                benchmark: "osu",
                test,
                implementation: "spools",
                ranks: w.size(),
                unit: test.column().1,
                points: &points,
            })?;
        } else {
            print_table(test, &points);
        }
    }
    w.finalize()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::CommonArgs;

    fn args(test: &str, max: Option<&str>) -> OsuArgs {
        OsuArgs {
            test: test.into(),
            common: CommonArgs {
                transport: None,
                json: false,
                reps: 1,
            },
            max_size: max.map(Into::into),
            iterations: None,
            warmup: None,
        }
    }

    #[test]
    fn sizes_are_osus() {
        let lat = sizes(&args("latency", None), Test::Latency).unwrap();
        assert_eq!(lat.len(), 24);
        assert_eq!((lat[0], lat[1], lat[23]), (0, 1, 4 << 20));
        let bw = sizes(&args("bw", Some("64")), Test::Bw).unwrap();
        assert_eq!(bw, vec![1, 2, 4, 8, 16, 32, 64]);
        let ar = sizes(&args("allreduce", None), Test::Allreduce).unwrap();
        assert_eq!((ar[0], *ar.last().unwrap()), (4, 1 << 20));
        assert_eq!(
            sizes(&args("barrier", Some("1M")), Test::Barrier).unwrap(),
            vec![0]
        );
        assert!(sizes(&args("allreduce", Some("2")), Test::Allreduce).is_err());
        assert!(sizes(&args("bw", Some("x")), Test::Bw).is_err());
    }

    #[test]
    fn counts_switch_above_8_kib_and_obey_the_options() {
        let a = args("latency", None);
        assert_eq!(counts(&a, Test::Latency, 8192), (10_000, 100));
        assert_eq!(counts(&a, Test::Latency, 16384), (1_000, 10));
        assert_eq!(counts(&a, Test::Bw, 8), (100, 10));
        assert_eq!(counts(&a, Test::Bibw, 1 << 20), (20, 2));
        assert_eq!(counts(&a, Test::Bcast, 4), (1_000, 200));
        assert_eq!(counts(&a, Test::Alltoall, 1 << 20), (100, 10));
        let mut b = args("latency", None);
        b.iterations = Some(0);
        b.warmup = Some(3);
        assert_eq!(counts(&b, Test::Latency, 8), (1, 3));
    }

    #[test]
    fn every_test_name_parses_and_others_do_not() {
        for t in [
            "latency",
            "bw",
            "bibw",
            "allreduce",
            "bcast",
            "barrier",
            "alltoall",
        ] {
            assert!(Test::parse(t).is_some(), "{t}");
        }
        assert!(Test::parse("put").is_none());
    }
}
