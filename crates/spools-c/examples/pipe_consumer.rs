//! The Rust end of the C interface's pipe test (crates/spools-c/tests/test_c_api.py):
//! reads the records `tests/pipe_producer.c` writes into `pipe:NAME` (rows in blocks over
//! the producer's ranks) with the columns dealt cyclically over this job's ranks
//! (`f64[ROWS,COLS] *,cyclic on 1xP`), and checks every value: record k holds
//! `1000 k + i*COLS + j` at (i, j).
//!
//! `spools run -n P -- pipe_consumer NAME K ROWS COLS` prints on every rank
//! `read K records, N values, sum S, columns J0,J1,...` (S: the sum of every value this
//! rank received) and on rank 0 also `total T` (the sum over the ranks); it exits with an
//! error on the first wrong value or record count.

use spools::Op;
use spools_io::pipe::{PipeName, PipeReader};
use spools_map::Layout;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> Res<T> {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("usage: pipe_consumer NAME K ROWS COLS (bad {what})").into())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let name: String = arg(&args, 1, "NAME")?;
    let want_records: u64 = arg(&args, 2, "K")?;
    let rows: u64 = arg(&args, 3, "ROWS")?;
    let cols: u64 = arg(&args, 4, "COLS")?;

    let world = spools::init()?;
    let comm = world.io_communicator()?;
    let (me, p) = (u64::from(comm.rank()), u64::from(comm.size()));
    let layout: Layout = format!("f64[{rows},{cols}] *,cyclic on 1x{p}").parse()?;
    let my_cols: Vec<u64> = (me..cols).step_by(p as usize).collect();
    let bytes = layout.local_bytes(me)?;
    if bytes != rows * my_cols.len() as u64 * 8 {
        return Err(format!(
            "rank {me}: the layout gives {bytes} bytes for {} columns",
            my_cols.len()
        )
        .into());
    }

    let pipe: PipeName = format!("pipe:{name}").parse()?;
    let mut reader = PipeReader::open(comm, &pipe, &layout)?;
    let mut buf = vec![0u8; bytes as usize];
    let (mut k, mut values, mut sum) = (0u64, 0u64, 0f64);
    while reader.read(&mut buf)? {
        // This rank's share in local (C) order: row i, then its columns.
        for (n, chunk) in buf.chunks_exact(8).enumerate() {
            let v = f64::from_ne_bytes(chunk.try_into()?);
            let (i, j) = (n as u64 / my_cols.len() as u64, my_cols[n % my_cols.len()]);
            let want = (1000 * k + i * cols + j) as f64;
            if v != want {
                return Err(
                    format!("rank {me}: record {k} ({i}, {j}) is {v}, expected {want}").into(),
                );
            }
            sum += v;
            values += 1;
        }
        k += 1;
    }
    if k != want_records || reader.records() != k {
        return Err(format!(
            "rank {me}: {k} records ({} by the reader), expected {want_records}",
            reader.records()
        )
        .into());
    }
    drop(reader);
    let mut total = [0f64];
    comm.allreduce(&[sum], &mut total, &Op::Sum)?;
    let list: Vec<String> = my_cols.iter().map(u64::to_string).collect();
    println!(
        "read {k} records, {values} values, sum {sum}, columns {}",
        list.join(",")
    );
    if me == 0 {
        println!("total {}", total[0]);
    }
    world.finalize()?;
    Ok(())
}
