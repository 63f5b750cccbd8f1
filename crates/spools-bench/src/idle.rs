//! `spools bench idle`: how much CPU a rank uses while blocked in a receive, and how soon
//! a sleeping receiver is woken, next to a plain pipe's wake-up between the same two
//! processes.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use spools::{Channel, Delivery};

use crate::args::CommonArgs;
use crate::error::BenchError;
use crate::output::print_json;
use crate::session::{f64_of, need_two, start, transport_name};
use crate::stats::{median, rounded};

/// The document of `spools bench idle --json`.
#[derive(Debug, Serialize)]
struct IdleReport {
    /// Always `idle`.
    benchmark: &'static str,
    /// `shm`, `tcp` or `self`.
    transport: &'static str,
    /// CPU of a rank blocked 2 s in a receive, percent of one core.
    #[serde(serialize_with = "rounded::<3, _>")]
    idle_cpu_percent: f64,
    /// Wake-up of a sleeping receiver and its reply, microseconds (median).
    #[serde(serialize_with = "rounded::<2, _>")]
    wake_us: f64,
    /// The same through plain pipes (FIFOs), microseconds (median).
    #[serde(serialize_with = "rounded::<2, _>")]
    pipe_wake_us: f64,
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into ts.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Runs the idle-receiver benchmark.
pub(crate) fn run(a: &CommonArgs) -> Result<(), BenchError> {
    let mut w = start(a)?;
    need_two(&w, "idle")?;
    let me = w.rank();
    let arrived = Arc::new(AtomicU64::new(0));
    let ar = arrived.clone();
    w.worker().register("idle.ping", move |_| {
        ar.fetch_add(1, Ordering::Release);
    })?;
    w.worker().sync_handlers()?;
    let h = w.worker().handler_id("idle.ping")?;
    let reps = a.reps.max(1);

    // 1. CPU used by rank 1 while it waits 2 s for one message.
    w.barrier()?;
    let mut cpu_pct = 0.0;
    if me == 0 {
        std::thread::sleep(Duration::from_secs(2));
        w.endpoint().send_short(
            1,
            h,
            [now_ns(), 0, 0, 0],
            Channel::new(0),
            Delivery::Immediate,
        )?;
    } else {
        let (c0, t0) = (cpu_ns(), now_ns());
        w.worker()
            .wait_for(|| arrived.load(Ordering::Acquire) >= 1)?;
        cpu_pct = 100.0 * (cpu_ns() - c0) as f64 / (now_ns() - t0) as f64;
    }

    // 2. Wake-up latency of a receiver asleep in Spools. Clocks of different CPUs of a
    //    virtual machine may disagree, so rank 0 measures a round trip on its own clock:
    //    it sends while rank 1 sleeps, rank 1 answers at once, rank 0 waits for the
    //    answer (the reply's one-way time is included).
    let replies = Arc::new(AtomicU64::new(0));
    let rp = replies.clone();
    w.worker().register("idle.pong", move |_| {
        rp.fetch_add(1, Ordering::Release);
    })?;
    w.worker().sync_handlers()?;
    let h_pong = w.worker().handler_id("idle.pong")?;
    let mut wake = Vec::new();
    for i in 0..reps as u64 {
        w.barrier()?;
        if me == 0 {
            std::thread::sleep(Duration::from_millis(100));
            let t0 = now_ns();
            w.endpoint()
                .send_short(1, h, [t0, 0, 0, 0], Channel::new(0), Delivery::Immediate)?;
            // Wait as any Spools program waits (spin, then sleep), as the pipe
            // measurement below blocks in a read.
            w.worker()
                .wait_for(|| replies.load(Ordering::Acquire) > i)?;
            wake.push((now_ns() - t0) as f64 / 1e3);
        } else {
            w.worker()
                .wait_for(|| arrived.load(Ordering::Acquire) >= 2 + i)?;
            w.endpoint()
                .send_short(0, h_pong, [0; 4], Channel::new(0), Delivery::Immediate)?;
        }
    }

    // 3. The same through plain pipes (FIFOs) between the two processes: rank 1 blocks in
    //    a read, rank 0 writes, rank 1 answers through a second pipe that rank 0 polls.
    let fifo =
        |k: &str| std::env::temp_dir().join(format!("spools-{:016x}-wake-{k}.fifo", w.job()));
    if me == 0 {
        for k in ["ping", "pong"] {
            rustix::fs::mkfifoat(
                rustix::fs::CWD,
                fifo(k),
                rustix::fs::Mode::from_raw_mode(0o600),
            )
            .map_err(|e| BenchError::io("mkfifo")(e.into()))?;
        }
    }
    w.barrier()?;
    let opening = || BenchError::io("opening the fifo");
    let pipe_io = || BenchError::io("wake-up through a fifo");
    let mut pipe = Vec::new();
    if me == 0 {
        let mut ping = std::fs::OpenOptions::new()
            .write(true)
            .open(fifo("ping"))
            .map_err(opening())?;
        let mut pong = std::fs::File::open(fifo("pong")).map_err(opening())?;
        for _ in 0..reps {
            std::thread::sleep(Duration::from_millis(100));
            let t0 = now_ns();
            ping.write_all(&[1]).map_err(pipe_io())?;
            let mut b = [0u8; 1];
            pong.read_exact(&mut b).map_err(pipe_io())?;
            pipe.push((now_ns() - t0) as f64 / 1e3);
        }
    } else {
        let mut ping = std::fs::File::open(fifo("ping")).map_err(opening())?;
        let mut pong = std::fs::OpenOptions::new()
            .write(true)
            .open(fifo("pong"))
            .map_err(opening())?;
        for _ in 0..reps {
            let mut b = [0u8; 1];
            ping.read_exact(&mut b).map_err(pipe_io())?;
            pong.write_all(&b).map_err(pipe_io())?;
        }
    }
    w.barrier()?;
    if me == 0 {
        let _ = std::fs::remove_file(fifo("ping"));
        let _ = std::fs::remove_file(fifo("pong"));
    }
    let cpu = w.allgather_bytes(&cpu_pct.to_le_bytes())?;
    if me == 0 {
        let r = IdleReport {
            benchmark: "idle",
            transport: transport_name(&w, 1),
            idle_cpu_percent: f64_of(&cpu, 1),
            wake_us: median(&mut wake),
            pipe_wake_us: median(&mut pipe),
        };
        if a.json {
            print_json(&r)?;
        } else {
            println!("# idle receiver over {}", r.transport);
            println!(
                "CPU of a rank blocked 2 s in a receive: {:.3} %",
                r.idle_cpu_percent
            );
            println!("wake-up of a sleeping receiver and its reply: {:.1} us (median of {reps}); the same through plain pipes: {:.1} us", r.wake_us, r.pipe_wake_us);
        }
    }
    w.finalize()?;
    Ok(())
}
