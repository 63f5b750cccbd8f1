//! Ping-pong of large tagged messages between two ranks of one host, from ordinary
//! buffers (the rendezvous streams the data through the transport: two copies) and from
//! shared-heap buffers (`World::alloc`: the receiver copies from the sender's segment, one
//! copy), then puts into an ordinary region and into one in the shared heap
//! (`Worker::shared_region`). Prints the median time of each over alternating runs.
//! Run with `spools run -n 2 -- target/release/examples/heap_pingpong [MiB] [runs]`.

use std::time::Instant;

use spools::World;

/// Round trips per run.
const TRIPS: usize = 20;

/// One run of `TRIPS` round trips between `a` (rank 0's) and `b` (rank 1's); seconds per
/// round trip.
fn run(w: &World, buf: &mut [u8]) -> Result<f64, spools::MsgError> {
    w.barrier()?;
    let t0 = Instant::now();
    for _ in 0..TRIPS {
        if w.rank() == 0 {
            w.send(buf, 1, 1)?;
            w.recv(buf, 1, 2)?;
        } else {
            w.recv(buf, 0, 1)?;
            w.send(buf, 0, 2)?;
        }
    }
    Ok(t0.elapsed().as_secs_f64() / TRIPS as f64)
}

/// One run of `TRIPS` puts of `data` from rank 0 into region `key` of rank 1 (which
/// serves them from a barrier); seconds per put.
fn puts(w: &mut World, key: u32, data: &[u8]) -> Result<f64, Box<dyn std::error::Error>> {
    w.barrier()?;
    let t0 = Instant::now();
    if w.rank() == 0 {
        for _ in 0..TRIPS {
            w.endpoint().put(1, key, 0, data)?;
        }
    }
    let t = t0.elapsed().as_secs_f64() / TRIPS as f64;
    w.barrier()?;
    Ok(t)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the example, printing a failure with `Display` (the error's own words, not its
/// `Debug` structure) and exiting with status 1.
fn main() -> std::process::ExitCode {
    match try_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("heap_pingpong: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn try_main() -> Result<(), Box<dyn std::error::Error>> {
    let mut w = spools::init()?;
    let mut args = std::env::args().skip(1);
    let mib: usize = args.next().map_or(Ok(4), |a| a.parse())?;
    let runs: usize = args.next().map_or(Ok(7), |a| a.parse())?;
    let n = mib << 20;
    let mut plain = vec![7u8; n];
    let mut heap = w.alloc::<u8>(n)?;
    heap.fill(7);
    run(&w, &mut plain)?;
    run(&w, &mut heap)?;
    let (mut tp, mut th) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        tp.push(run(&w, &mut plain)?);
        th.push(run(&w, &mut heap)?);
    }
    // Puts into an ordinary region and into one in the shared heap.
    let regions = [w.worker().region(n)?, w.worker().shared_region(n)?];
    let keys = regions.each_ref().map(|r| r.key());
    let (mut rp, mut rh) = (Vec::new(), Vec::new());
    puts(&mut w, keys[0], &plain)?;
    puts(&mut w, keys[1], &plain)?;
    for _ in 0..runs {
        rp.push(puts(&mut w, keys[0], &plain)?);
        rh.push(puts(&mut w, keys[1], &plain)?);
    }
    if w.rank() == 0 {
        let (p, h) = (median(&mut rp), median(&mut rh));
        println!(
            "{mib} MiB puts, median of {runs} alternating runs of {TRIPS}: ordinary region \
             {:.3} ms, shared region {:.3} ms: {:.2}x",
            p * 1e3,
            h * 1e3,
            p / h
        );
    }
    if w.rank() == 0 {
        // The floor: the two copies of a round trip as memcpy within this process.
        let mut dst = vec![0u8; n];
        let mut tm: Vec<f64> = (0..runs)
            .map(|_| {
                let t0 = Instant::now();
                for _ in 0..TRIPS {
                    dst.copy_from_slice(&plain);
                    plain.copy_from_slice(&dst);
                }
                t0.elapsed().as_secs_f64() / TRIPS as f64
            })
            .collect();
        let m = median(&mut tm);
        let (p, h) = (median(&mut tp), median(&mut th));
        let gbs = |t: f64| 2.0 * n as f64 / t / 1e9;
        println!(
            "{mib} MiB ping-pong, median of {runs} alternating runs of {TRIPS} round trips: \
             ordinary {:.3} ms ({:.2} GB/s), shared heap {:.3} ms ({:.2} GB/s): {:.2}x; \
             2 memcpy {:.3} ms ({:.2} GB/s)",
            p * 1e3,
            gbs(p),
            h * 1e3,
            gbs(h),
            p / h,
            m * 1e3,
            gbs(m)
        );
    }
    Ok(())
}
