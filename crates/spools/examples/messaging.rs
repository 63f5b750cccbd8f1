//! Tagged messages, a collective, a sub-communicator and an RPC: the messaging example of
//! `docs/messaging.md`. Run with `spools run -n 4 -- target/release/examples/messaging`.

use spools::{Op, ANY_SOURCE, ANY_TAG};

/// Runs the example, printing a failure with `Display` (the error's own words, not its
/// `Debug` structure) and exiting with status 1.
fn main() -> std::process::ExitCode {
    match try_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("messaging: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn try_main() -> Result<(), Box<dyn std::error::Error>> {
    let world = spools::init()?;
    let (me, n) = (world.rank(), world.size());
    // Blocking send and receive with tags and wildcards; the status says who sent what.
    let r = world.irecv(vec![0u8; 1 << 20], ANY_SOURCE, ANY_TAG)?; // owns its buffer
    world.send(&vec![me as u8; 1 << 20], (me + 1) % n, 7)?; // rendezvous at this size
    let got = r.wait()?;
    assert_eq!((got.status.source, got.status.tag), ((me + n - 1) % n, 7));
    assert!(got.buf.iter().all(|&b| u32::from(b) == (me + n - 1) % n));
    // Collectives on typed slices; reductions take Sum, Prod, Min, Max or a user function.
    let mut total = [0.0f64];
    world.allreduce(&[1.5], &mut total, &Op::Sum)?;
    let rows = world
        .split(Some(me % 2), 0)?
        .ok_or("every rank has a color")?;
    rows.barrier()?;
    // RPC: a function registered by name runs on the target, any size in and out.
    world.register_rpc("len", |a| Ok((a.len() as u64).to_le_bytes().to_vec()))?;
    world.barrier()?;
    let answer = world.rpc((me + 1) % n, "len", b"hello")?.wait()?;
    println!(
        "rank {me}: got 1 MiB from rank {}, allreduce {}, rank {} of {} in my row, rpc said {}",
        got.status.source,
        total[0],
        rows.rank(),
        rows.size(),
        u64::from_le_bytes(answer[..8].try_into()?)
    );
    world.finalize()?;
    Ok(())
}
