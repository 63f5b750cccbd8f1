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

/// A pipe end whose other program never comes gives up after `SPOOLS_PIPE_TIMEOUT`
/// seconds with an error naming the side it waited for, by name and by TCP address.
#[test]
fn a_pipe_end_alone_times_out_naming_the_missing_side() {
    rank_main(|_| {
        let w = e(spools::init())?;
        let dir = std::env::var("SPOOLS_TEST_DIR").unwrap();
        std::env::set_var("SPOOLS_PIPE_DIR", &dir);
        let l: Layout = e(READS.parse())?;
        // Every rank names the same pipe (rank 0's free port): names that differ between
        // ranks are refused before any rank meets.
        let mut port = [u64::from(spools_testkit::free_port(11))];
        e(e(w.io_communicator())?.bcast(&mut port, 0))?;
        let port = port[0];
        let cases = [
            ("pipe:nobody-reads", true, "consumer"),
            ("pipe:nobody-writes", false, "producer"),
            (&*format!("tcp:127.0.0.1:{port}"), false, "producer"),
        ];
        for (name, producer, missing) in cases {
            let pn: PipeName = e(name.parse())?;
            let comm = e(w.io_communicator())?;
            let r = if producer {
                PipeWriter::open(comm, &pn, &l).map(|_| ())
            } else {
                PipeReader::open(comm, &pn, &l).map(|_| ())
            };
            // Rank 0 meets the other program; the others learn of its failure.
            match (w.rank(), r) {
                (0, Err(spools_io::PipeError::Timeout { side, secs: 1, .. }))
                    if side == missing => {}
                (1, Err(spools_io::PipeError::Remote { rank: 0, .. })) => {}
                (_, r) => return Err(format!("{name}: {r:?}")),
            }
        }
        e(w.finalize())
    });
    let d = tempdir("alone");
    let o = Job::new(2, "a_pipe_end_alone_times_out_naming_the_missing_side")
        .env("SPOOLS_TEST_DIR", &d)
        .env("SPOOLS_PIPE_TIMEOUT", "1")
        .run();
    spools_testkit::assert_ok(&o);
}

/// Bytes of one back-pressure record.
const RECORD: usize = 1 << 20;

/// Records enough to overflow the largest socket buffers TCP may grow to (sender's and
/// receiver's), with room to spare.
fn bp_records() -> u64 {
    let max = |f: &str| -> u64 {
        std::fs::read_to_string(f)
            .ok()
            .and_then(|t| t.split_whitespace().nth(2).and_then(|v| v.parse().ok()))
            .unwrap_or(64 << 20)
    };
    (max("/proc/sys/net/ipv4/tcp_wmem") + max("/proc/sys/net/ipv4/tcp_rmem")) / RECORD as u64 + 8
}

/// Whether thread `tid` of this process is asleep in a system call that writes to a
/// socket (from `/proc/self/task/TID/{stat,syscall}`, which a process may always read).
fn asleep_writing(tid: i32) -> bool {
    let base = format!("/proc/self/task/{tid}");
    let state = std::fs::read_to_string(format!("{base}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| r.trim_start().starts_with('S'))
        });
    let call = std::fs::read_to_string(format!("{base}/syscall"))
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|n| n.parse::<i64>().ok())
        });
    let writes = [
        libc::SYS_write,
        libc::SYS_sendto,
        libc::SYS_sendmsg,
        libc::SYS_writev,
    ];
    state == Some(true) && call.is_some_and(|c| writes.contains(&c))
}

/// A consumer that reads nothing makes the producer wait in its send (seen by the
/// producer itself, as the kernel's state of its writing thread) before it could have
/// written every record; then every record arrives intact.
#[test]
fn a_consumer_that_does_not_read_makes_the_producer_wait_and_loses_nothing() {
    rank_main(|role| {
        let w = e(spools::init())?;
        let dir = std::path::PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
        std::env::set_var("SPOOLS_PIPE_DIR", &dir);
        let name: PipeName = e("pipe:slow".parse())?;
        let l: Layout = e(format!("u8[{RECORD}] block on 1").parse())?;
        let n = bp_records();
        let blocked = dir.join("blocked");
        if role == "producer" {
            let mut out = e(PipeWriter::open(e(w.io_communicator())?, &name, &l))?;
            let done = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            let watch = {
                let (done, blocked) = (done.clone(), blocked.clone());
                std::thread::spawn(move || -> Result<(), String> {
                    let start = std::time::Instant::now();
                    while !asleep_writing(tid) {
                        if start.elapsed() > Duration::from_secs(100) {
                            return Err("the producer never waited in a send".into());
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    let k = done.load(std::sync::atomic::Ordering::SeqCst);
                    spools_testkit::signal_file(&blocked, k.to_string().as_bytes())
                })
            };
            for k in 0..n {
                let rec: Vec<u8> = (0..RECORD).map(|i| (i as u64 + k) as u8).collect();
                e(out.write(&rec))?;
                done.store(k + 1, std::sync::atomic::Ordering::SeqCst);
            }
            e(out.close())?;
            watch.join().map_err(|_| "watcher panicked".to_string())??;
        } else {
            let mut input = e(PipeReader::open(e(w.io_communicator())?, &name, &l))?;
            // Nothing read until the producer waits.
            spools_testkit::wait_for_file(&blocked, Duration::from_secs(110))?;
            let k: u64 = e(std::fs::read_to_string(&blocked))?.parse().unwrap();
            if k >= n {
                return Err(format!("the producer wrote all {n} records before waiting"));
            }
            let mut rec = vec![0u8; RECORD];
            let mut got = 0u64;
            while e(input.read(&mut rec))? {
                if let Some(i) = (0..RECORD).find(|&i| rec[i] != (i as u64 + got) as u8) {
                    return Err(format!("record {got} byte {i} is {}", rec[i]));
                }
                got += 1;
            }
            if got != n {
                return Err(format!("{got} records of {n}"));
            }
            println!("CONSUMED {got} records; the producer waited after {k}");
        }
        e(w.finalize())
    });
    let d = tempdir("slow");
    let job = |role: &str| {
        Job::new(
            1,
            "a_consumer_that_does_not_read_makes_the_producer_wait_and_loses_nothing",
        )
        .role(role)
        .env("SPOOLS_TEST_DIR", &d)
        .env("SPOOLS_PIPE_TIMEOUT", "100")
        .spawn()
    };
    let (p, c) = (job("producer"), job("consumer"));
    let (po, co) = (
        wait_bounded(p, Duration::from_secs(150)),
        wait_bounded(c, Duration::from_secs(150)),
    );
    spools_testkit::assert_ok_as(&po, "producer");
    spools_testkit::assert_ok_as(&co, "consumer");
    assert!(co.stdout.contains("CONSUMED"), "{}", co.stdout);
}

const SECRET_A: &str = "00112233445566778899aabbccddeeff";
const SECRET_B: &str = "ffeeddccbbaa99887766554433221100";

/// A `tcp:` meeting with a pipe secret (`SPOOLS_PIPE_SECRET`) on both sides: a producer
/// with another secret, and one with none, are turned away with `Unproven` and never
/// learn the consumer's token (the consumer keeps waiting); the producer with the same
/// secret then meets it, and its record arrives whole. Without the proof, the first
/// producer to reach the port was taken.
#[test]
fn a_tcp_pipe_meeting_with_a_secret_takes_only_a_producer_that_proves_it() {
    const LAYOUT: &str = "u8[64,64] block,* on 2x1";
    rank_main(|role| {
        let w = e(spools::init())?;
        let me = w.rank();
        let name: PipeName = e(std::env::var("SPOOLS_TEST_PIPE").unwrap().parse())?;
        let l: Layout = e(LAYOUT.parse())?;
        let n = l.local_bytes(u64::from(me)).unwrap() as usize;
        let res = if role == "producer" {
            PipeWriter::open(e(w.io_communicator())?, &name, &l).and_then(|mut out| {
                out.write(&vec![me as u8 + 7; n])?;
                out.close()
            })
        } else {
            PipeReader::open(e(w.io_communicator())?, &name, &l).and_then(|mut input| {
                let mut part = vec![0u8; n];
                assert!(input.read(&mut part)?, "no record");
                assert!(part.iter().all(|&b| b == me as u8 + 7), "record corrupt");
                assert!(!input.read(&mut part)?, "more than one record");
                Ok(())
            })
        };
        match res {
            Err(err) => {
                eprintln!("PIPE ERROR: {err}");
                std::process::exit(3)
            }
            Ok(()) => {
                println!("{role} ok rank {me}");
                e(w.finalize())
            }
        }
    });
    let d = tempdir("pipe-secret");
    let (a, b) = (d.join("a.key"), d.join("b.key"));
    std::fs::write(&a, SECRET_A).unwrap();
    std::fs::write(&b, SECRET_B).unwrap();
    let pipe = format!("tcp:127.0.0.1:{}", spools_testkit::free_port(23));
    let test = "a_tcp_pipe_meeting_with_a_secret_takes_only_a_producer_that_proves_it";
    let job = |role: &str, key: Option<&std::path::Path>| {
        let mut j = Job::new(2, test)
            .role(role)
            .env("SPOOLS_TEST_PIPE", &pipe)
            .env("SPOOLS_PIPE_TIMEOUT", "100")
            .timeout(Duration::from_secs(110));
        if let Some(k) = key {
            j = j.env("SPOOLS_PIPE_SECRET", k);
        }
        j
    };
    let consumer = job("consumer", Some(&a)).spawn();
    for (key, what, says) in [
        (Some(&*b), "another secret", "did not prove the pipe secret"),
        (None, "no secret", "closed the meeting unanswered"),
    ] {
        let o = job("producer", key).run();
        assert!(
            !o.status.success(),
            "a producer with {what} met the consumer: {o:?}"
        );
        assert!(o.stderr.contains(says), "{what}: {}", o.stderr);
    }
    let p = job("producer", Some(&a)).run();
    spools_testkit::assert_ok(&p);
    let c = wait_bounded(consumer, Duration::from_secs(120));
    assert!(c.status.success(), "{}", c.stderr);
    assert_eq!(c.stdout.matches("consumer ok").count(), 2, "{}", c.stdout);
    // A bad secret file is a clear error, not an unauthenticated meeting.
    let o = job("producer", Some(&d.join("missing.key"))).run();
    assert!(!o.status.success());
    assert!(o.stderr.contains("SPOOLS_PIPE_SECRET="), "{}", o.stderr);
}
