//! Ping-pong of large tagged messages between two ranks of one host, from ordinary
//! buffers (the rendezvous streams the data through the transport: two copies) and from
//! shared-heap buffers (`World::alloc`: the receiver copies from the sender's segment, one
//! copy). Prints the median round-trip time of each over alternating runs.
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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let w = spools::init()?;
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
