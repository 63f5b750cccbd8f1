//! A first multi-process Spools program: every rank greets every other rank with a short
//! active message, puts its name into its right neighbour's memory region, and prints
//! what it received.
//!
//! ```sh
//! cargo build --release -p spools --example hello
//! target/release/spools run -n 4 --tag-output -- target/release/examples/hello
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use spools::{Channel, Delivery};

/// Runs the example, printing a failure with `Display` (the error's own words, not its
/// `Debug` structure) and exiting with status 1.
fn main() -> std::process::ExitCode {
    match try_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hello: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn try_main() -> Result<(), Box<dyn std::error::Error>> {
    let mut world = spools::init()?;
    let (me, n) = (world.rank(), world.size());

    // Register a handler by name on every rank, then agree on global ids.
    let greetings = Arc::new(AtomicU64::new(0));
    let g = greetings.clone();
    world.worker().register("greet", move |m| {
        g.fetch_add(1, Ordering::SeqCst);
        println!(
            "got a greeting from rank {} (it says {})",
            m.from, m.args[0]
        );
    })?;
    world.worker().sync_handlers()?;
    let greet = world.worker().handler_id("greet")?;

    // A region the left neighbour will put into.
    let region = world.worker().region(64)?;
    let keys = world.allgather_bytes(&region.key().to_le_bytes())?;
    let right = (me + 1) % n;
    let right_key = u32::from_le_bytes(keys[right as usize][..4].try_into()?);

    for peer in (0..n).filter(|&p| p != me) {
        world.endpoint().send_short(
            peer,
            greet,
            [u64::from(me) * 100, 0, 0, 0],
            Channel::new(0),
            Delivery::Immediate,
        )?;
    }
    let text = format!("written by rank {me}");
    world.endpoint().put(right, right_key, 0, text.as_bytes())?;

    world
        .worker()
        .wait_for(|| greetings.load(Ordering::SeqCst) == u64::from(n - 1))?;
    world.barrier()?;
    let bytes = region.to_vec();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    println!(
        "rank {me} of {n}: {} greetings; my region says {:?}",
        greetings.load(Ordering::SeqCst),
        String::from_utf8_lossy(&bytes[..end])
    );
    world.finalize()?;
    Ok(())
}
