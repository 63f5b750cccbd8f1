//! Parallel pipes between two separately launched jobs: a rank of either side that dies
//! is an error on the other, never a hang.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use spools::Layout;
use spools_io::pipe::{PipeName, PipeReader, PipeWriter};
use spools_testkit::{e, rank_main, tempdir, wait_bounded, Job};

const DIES: &str = "u8[200,200] block,* on 3x1";
const READS: &str = "u8[200,200] *,block on 1x2";

#[test]
fn a_rank_that_dies_on_either_side_of_a_pipe_is_an_error_on_the_other() {
    rank_main(|role| {
        let w = e(spools::init())?;
        let me = w.rank();
        let dir = std::env::var("SPOOLS_TEST_DIR").unwrap();
        std::env::set_var("SPOOLS_PIPE_DIR", &dir);
        let name: PipeName = e("pipe:dies".parse())?;
        let res = if role.starts_with("producer") {
            let l: Layout = e(DIES.parse())?;
            let mut out = e(PipeWriter::open(e(w.io_communicator())?, &name, &l))?;
            let part = vec![1u8; l.local_bytes(u64::from(me)).unwrap() as usize];
            (|| {
                for k in 0..1_000_000u64 {
                    if role == "producer-dies" && me == 1 && k == 3 {
                        std::process::abort();
                    }
                    out.write(&part)?;
                }
                out.close()
            })()
        } else {
            let l: Layout = e(READS.parse())?;
            let mut input = e(PipeReader::open(e(w.io_communicator())?, &name, &l))?;
            let mut part = vec![0u8; l.local_bytes(u64::from(me)).unwrap() as usize];
            (|| {
                let mut k = 0;
                while input.read(&mut part)? {
                    k += 1;
                    if role == "consumer-dies" && me == 1 && k == 3 {
                        std::process::abort();
                    }
                }
                Ok(())
            })()
        };
        match res {
            // The survivor reports the error and exits without finalising.
            Err(err) => {
                eprintln!("PIPE ERROR: {err}");
                std::process::exit(3)
            }
            Ok(()) => e(w.finalize()),
        }
    });
    let d = tempdir("dies");
    let job = |n: u32, role: &str| {
        Job::new(
            n,
            "a_rank_that_dies_on_either_side_of_a_pipe_is_an_error_on_the_other",
        )
        .role(role)
        .env("SPOOLS_TEST_DIR", &d)
        .timeout(Duration::from_secs(100))
        .spawn()
    };
    // A producer rank dies after 3 records: the consumer reports it (no hang).
    let p = job(3, "producer-dies");
    let c = job(2, "consumer");
    let (po, co) = (
        wait_bounded(p, Duration::from_secs(120)),
        wait_bounded(c, Duration::from_secs(120)),
    );
    assert!(!po.status.success(), "{}", po.stderr);
    assert!(!co.status.success());
    assert!(
        co.stderr.contains("PIPE ERROR: producer rank") && co.stderr.contains("went away"),
        "{}",
        co.stderr
    );
    // A consumer rank dies after 3 records: the producer reports it (no hang).
    let p = job(3, "producer");
    let c = job(2, "consumer-dies");
    let (po, co) = (
        wait_bounded(p, Duration::from_secs(120)),
        wait_bounded(c, Duration::from_secs(120)),
    );
    assert!(!co.status.success());
    assert!(!po.status.success());
    assert!(
        po.stderr.contains("PIPE ERROR: consumer rank") && po.stderr.contains("went away"),
        "{}",
        po.stderr
    );
}
