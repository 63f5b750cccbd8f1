//! The Rust twin of `bench/peers/spools_pingpong.c` (itself `pingpong.c` on the C
//! interface): the same program on the Rust API, so that `bench/peers/c_api.sh` measures
//! what the C interface adds and nothing else. One verified round trip per size, a
//! warm-up of about 8 MiB (at most 0.1 s) that sizes the batches, then N timed batches
//! of about MS milliseconds each; the latency is the median batch's half round trip.
//!
//! `spools run -n 2 -- pingpong_rs [--batches N] [--batch-ms MS] [SIZE...]` prints one
//! JSON line like the C and MPI programs (sizes in bytes, with K or M suffixes).

use std::time::Instant;

use spools::{World, ANY_TAG};

const TAG_PING: i32 = 1;
const TAG_PONG: i32 = 2;
const TAG_LAST_WARMUP: i32 = 3;
const WARMUP_SECONDS: f64 = 0.1;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn parse_size(s: &str) -> Option<usize> {
    let (num, shift) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 10),
        b'M' | b'm' => (&s[..s.len() - 1], 20),
        _ => (s, 0),
    };
    num.parse::<usize>()
        .ok()
        .filter(|&v| v > 0)
        .map(|v| v << shift)
}

fn pattern_byte(i: usize, size: usize) -> u8 {
    (i.wrapping_mul(131).wrapping_add(size * 7 + 1) & 0xff) as u8
}

fn round_trips(w: &World, iters: i64, sbuf: &[u8], rbuf: &mut [u8]) -> Res<f64> {
    let t0 = Instant::now();
    if w.rank() == 0 {
        for _ in 0..iters {
            w.send(sbuf, 1, TAG_PING)?;
            w.recv(rbuf, 1, TAG_PONG)?;
        }
    } else {
        for _ in 0..iters {
            w.recv(rbuf, 0, TAG_PING)?;
            w.send(rbuf, 0, TAG_PONG)?;
        }
    }
    Ok(t0.elapsed().as_secs_f64())
}

fn warm_up(w: &World, size: usize, sbuf: &[u8], rbuf: &mut [u8]) -> Res<f64> {
    let want = ((8usize << 20) / size).clamp(1, 10_000);
    if w.rank() != 0 {
        loop {
            let st = w.recv(rbuf, 0, ANY_TAG)?;
            w.send(rbuf, 0, TAG_PONG)?;
            if st.tag == TAG_LAST_WARMUP {
                return Ok(0.0);
            }
        }
    }
    let t0 = Instant::now();
    let (mut done, mut elapsed) = (0usize, 0.0);
    loop {
        let last = done + 1 >= want || elapsed >= WARMUP_SECONDS;
        w.send(sbuf, 1, if last { TAG_LAST_WARMUP } else { TAG_PING })?;
        w.recv(rbuf, 1, TAG_PONG)?;
        done += 1;
        elapsed = t0.elapsed().as_secs_f64();
        if last {
            return Ok(elapsed / done as f64);
        }
    }
}

fn main() -> Res<()> {
    let w = spools::init()?;
    let (mut batches, mut batch_ms) = (5usize, 30.0f64);
    let mut sizes = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--batches" => {
                batches = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--batches N")?
            }
            "--batch-ms" => {
                batch_ms = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--batch-ms MS")?
            }
            s => sizes.push(parse_size(s).ok_or_else(|| format!("bad size {s}"))?),
        }
    }
    if sizes.is_empty() {
        sizes = vec![8, 64, 512, 4096, 16384, 65536, 262_144, 1 << 20, 4 << 20];
    }
    if w.size() != 2 {
        return Err(format!("needs exactly 2 ranks, got {}", w.size()).into());
    }
    let max = sizes.iter().copied().max().unwrap_or(8);
    let mut sbuf = vec![0u8; max];
    let mut rbuf = vec![0u8; max];
    let mut lat_us = Vec::new();
    for &size in &sizes {
        if w.rank() == 0 {
            for (i, b) in sbuf[..size].iter_mut().enumerate() {
                *b = pattern_byte(i, size);
            }
            w.send(&sbuf[..size], 1, TAG_PING)?;
            w.recv(&mut rbuf[..size], 1, TAG_PONG)?;
        } else {
            w.recv(&mut rbuf[..size], 0, TAG_PING)?;
            w.send(&rbuf[..size], 0, TAG_PONG)?;
        }
        if (0..size).any(|i| rbuf[i] != pattern_byte(i, size)) {
            return Err(format!("rank {}: {size} B arrived corrupt", w.rank()).into());
        }
        let per_rt = warm_up(&w, size, &sbuf[..size], &mut rbuf[..size])?;
        let mut iters = [1i64];
        if w.rank() == 0 {
            let want = batch_ms * 1e-3 / if per_rt > 0.0 { per_rt } else { 1e-9 };
            iters[0] = want.clamp(1.0, 1e7) as i64;
        }
        w.bcast(&mut iters, 0)?;
        let mut v = Vec::with_capacity(batches);
        for _ in 0..batches {
            let s = round_trips(&w, iters[0], &sbuf[..size], &mut rbuf[..size])?;
            v.push(s / iters[0] as f64 / 2.0 * 1e6);
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        lat_us.push(if n % 2 == 1 {
            v[n / 2]
        } else {
            0.5 * (v[n / 2 - 1] + v[n / 2])
        });
    }
    if w.rank() == 0 {
        let pts: Vec<String> = sizes
            .iter()
            .zip(&lat_us)
            .map(|(&s, &l)| {
                format!(
                    "{{\"bytes\":{s},\"latency_us\":{l:.4},\"bandwidth_MBps\":{:.2}}}",
                    s as f64 / l
                )
            })
            .collect();
        println!(
            "{{\"benchmark\":\"pingpong\",\"transport\":\"spools-rust\",\"series\":[{{\"path\":\"spools-rust\",\"points\":[{}]}}]}}",
            pts.join(",")
        );
    }
    w.finalize()?;
    Ok(())
}
