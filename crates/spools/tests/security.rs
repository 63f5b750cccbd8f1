//! The job secret: a process without it can neither join the job nor inject a message;
//! shared-memory segments are private (mode 0600) and a segment whose secret-derived tag
//! is wrong is refused; the launcher removes a segment a rank left behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spools_boot::client::Connected;
use spools_boot::config::Config;
use spools_boot::identity::JobEnv;
use spools_boot::net::connect;
use spools_proto::am::{AmHeader, Short};
use spools_proto::auth::Secret;
use spools_proto::boot::{Endpoint, Frame, ToServer};
use spools_proto::handshake::{Identity, Purpose};
use spools_testkit::{e, rank_main, shm_leftovers, signal_file, tempdir, wait_for_file, Job};

/// Rank 0 publishes where it can be reached and the id of its handler `any`, then serves
/// messages until the test says it is done, counting every message that reaches `any`.
fn victim_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    e(w.worker().register("any", move |_| {
        g.fetch_add(1, Ordering::SeqCst);
    }))?;
    e(w.worker().sync_handlers())?;
    let any = e(w.worker().handler_id("any"))?;
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").map_err(|x| x.to_string())?);
    if w.rank() == 0 {
        let boot = std::env::var("SPOOLS_BOOTSTRAP").map_err(|x| x.to_string())?;
        let tcp = w.tcp().ok_or("no tcp")?.listen_addr();
        signal_file(
            &dir.join("addrs"),
            format!("{boot}\n{tcp}\n{}\n", any.0).as_bytes(),
        )?;
        // The test says `done` once it has written everything it injects (the deadline
        // only bounds the wait if the test died).
        let deadline = Instant::now() + Duration::from_secs(100);
        e(w.worker()
            .wait_for(|| dir.join("done").exists() || Instant::now() > deadline))?;
        // Handle whatever has arrived by now: poll until nothing more comes.
        while e(w.worker().poll())? > 0 {}
        println!(
            "rank 0: {} messages reached a handler",
            got.load(Ordering::SeqCst)
        );
    }
    e(w.barrier())?;
    e(w.finalize())
}

/// Whether the peer closed `s` (reads until end of file; false at a 20 s timeout).
fn closed_by_peer(mut s: TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut b = [0u8; 256];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(err) => {
                return err.kind() != std::io::ErrorKind::WouldBlock
                    && err.kind() != std::io::ErrorKind::TimedOut
            }
        }
    }
}

/// The attacks of [`without_the_secret_nobody_joins_or_injects`] on a running victim:
/// the failures found (empty when every attack was refused). Never panics, so that the
/// test always tells the job it is done and waits for it.
fn attack(dir: &Path) -> Result<Vec<String>, String> {
    wait_for_file(&dir.join("addrs"), Duration::from_secs(60))?;
    let text = std::fs::read_to_string(dir.join("addrs")).map_err(|x| x.to_string())?;
    let mut lines = text.lines();
    let mut next = |what: &str| {
        lines
            .next()
            .ok_or_else(|| format!("no {what} in {text:?}"))
            .map(str::to_owned)
    };
    let boot: SocketAddr = next("rendezvous")?.parse().map_err(|x| format!("{x}"))?;
    let data: SocketAddr = next("data address")?.parse().map_err(|x| format!("{x}"))?;
    let any: u32 = next("handler id")?.parse().map_err(|x| format!("{x}"))?;
    let wrong = Secret::from_bytes([0x42; 16]);
    let id = Identity {
        rank: 1,
        lane: 1,
        priority: 0,
    };
    let mut failures = Vec::new();

    // 1. Joining the rendezvous with a wrong secret fails at the handshake.
    match connect(
        boot,
        &wrong,
        None,
        Purpose::Bootstrap,
        id,
        Duration::from_secs(5),
    ) {
        Ok(_) => failures.push("joined the rendezvous without the secret".to_string()),
        Err(err) if !err.to_string().contains("could not prove") => {
            failures.push(format!("wrong error from the rendezvous: {err}"));
        }
        Err(_) => {}
    }

    // 2. A join frame sent without any handshake: the server closes the connection.
    let mut s = TcpStream::connect(boot).map_err(|x| x.to_string())?;
    let join = ToServer::Join {
        rank: 1,
        size: 2,
        endpoint: Endpoint::default(),
    };
    let _ = s.write_all(&join.encode());
    if !closed_by_peer(s) {
        failures.push("rendezvous kept a connection that skipped the handshake".into());
    }

    // 3. A data connection with a wrong secret fails.
    if connect(
        data,
        &wrong,
        None,
        Purpose::Data,
        id,
        Duration::from_secs(5),
    )
    .is_ok()
    {
        failures.push("opened a data connection without the secret".into());
    }

    // 4. Raw frames (length + a valid short active message for the victim's own handler
    //    `any`) without a handshake: none may reach the handler (rank 0 counts them).
    let mut s = TcpStream::connect(data).map_err(|x| x.to_string())?;
    let mut msg = Vec::new();
    AmHeader::Short(Short {
        handler: any,
        channel: 0,
        flags: 0,
        args: [1, 2, 3, 4],
    })
    .encode(&mut msg);
    let mut frame = (msg.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&msg);
    for _ in 0..100 {
        if s.write_all(&frame).is_err() {
            break;
        }
    }
    if !closed_by_peer(s) {
        failures.push("data port kept a connection that skipped the handshake".into());
    }
    // (A correct-looking handshake with the right structure but no secret is 3; a client
    // that knows the secret gets in: the job itself.)
    Ok(failures)
}

#[test]
fn without_the_secret_nobody_joins_or_injects() {
    rank_main(|_| victim_role());
    let dir = tempdir("secret");
    // Over TCP: with every rank on one host and shared memory, the data port is never read.
    let job = Job::new(2, "without_the_secret_nobody_joins_or_injects")
        .env("SPOOLS_TEST_DIR", &dir)
        .env("SPOOLS_TRANSPORT", "tcp")
        .timeout(Duration::from_secs(110));
    let running = job.start();
    let attacked = attack(&dir);
    signal_file(&dir.join("done"), b"").unwrap();
    let o = running.wait(job.wait_limit());
    spools_testkit::assert_ok(&o);
    let failures = attacked.unwrap_or_else(|x| panic!("the attack did not run: {x}: {o:?}"));
    // Every check is reported, not only the first that fails.
    let none_handled = o.stdout.contains("rank 0: 0 messages reached a handler");
    assert!(
        failures.is_empty() && none_handled,
        "{failures:?}; no injected message reached a handler: {none_handled}: {o:?}"
    );
}

/// The name of rank `rank`'s shared-memory segment in job `job` (as `shm_open` takes it).
fn segment(job: u64, rank: u32) -> String {
    format!("/spools-{job:016x}-{rank}")
}

// The segment header as `spools-fabric` lays it out (`#[repr(C)]`): the owner rank at
// byte 40, the 32-byte tag at 48, the ready flag at 80.
const OWNER: usize = 40;
const TAG: usize = 48;
const READY: usize = 80;
const HEADER: usize = 84;

/// Rank 1 of [`a_segment_tagged_with_another_secret_is_refused`]: instead of starting the
/// runtime it plays the bootstrap steps of `spools::init` by hand, and in the shared-memory
/// set-up publishes a segment it wrote itself, tagged with `secret` (the job's own in the
/// control run): a copy of rank 0's header with itself as owner. Rank 0's segment still
/// has its name then (names are removed only after the second set-up barrier), so rank 1
/// also reports its mode.
fn forger(wrong: bool) -> Result<(), String> {
    let cfg = e(Config::load())?;
    let env = e(JobEnv::from_env())?;
    let conn = e(Connected::connect(env, &cfg))?;
    let secret = if wrong {
        Secret::from_bytes([0x42; 16])
    } else {
        conn.secret().clone()
    };
    let job_secret = conn.secret().clone();
    let boot = e(conn.join(Endpoint {
        host: spools_boot::host::host_identity(),
        pid: std::process::id(),
        shm: String::new(),
        tcp: String::new(),
    }))?;
    let job = boot.job();
    println!("rank 1: job-id={job:016x}");
    // The settings every rank must agree on, as `init` checks them.
    let choice = spools::agreed_settings(&cfg);
    e(boot.allgather(choice.as_bytes()))?;
    // Rank 0's segment, once its header is complete.
    let theirs = PathBuf::from(format!("/dev/shm{}", segment(job, 0)));
    let deadline = Instant::now() + Duration::from_secs(60);
    let (header, len, mode) = loop {
        if let Ok(f) = std::fs::File::open(&theirs) {
            let meta = f.metadata().map_err(|x| x.to_string())?;
            let mut h = [0u8; HEADER];
            if f.read_exact_at(&mut h, 0).is_ok() && h[READY..READY + 4] == 1u32.to_le_bytes() {
                break (h, meta.len(), meta.permissions().mode() & 0o7777);
            }
        }
        if Instant::now() > deadline {
            return Err("rank 0's segment never became ready".into());
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    println!("rank 1: rank 0's segment has mode {mode:04o}");
    // The layout this forgery assumes: rank 0's tag where it expects it.
    let tag_of = |s: &Secret, rank: u32| {
        let mut ctx = b"shm segment ".to_vec();
        ctx.extend_from_slice(segment(job, rank).as_bytes());
        s.tag(&ctx)
    };
    if header[TAG..TAG + 32] != tag_of(&job_secret, 0) || header[OWNER..OWNER + 4] != [0; 4] {
        return Err(format!(
            "rank 0's segment header is not laid out as assumed: {header:?}"
        ));
    }
    let mut forged = header;
    forged[OWNER..OWNER + 4].copy_from_slice(&1u32.to_le_bytes());
    forged[TAG..TAG + 32].copy_from_slice(&tag_of(&secret, 1));
    let mine = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(format!("/dev/shm{}", segment(job, 1)))
        .map_err(|x| x.to_string())?;
    mine.set_len(len).map_err(|x| x.to_string())?;
    mine.write_all_at(&forged, 0).map_err(|x| x.to_string())?;
    drop(mine);
    // The two set-up barriers (created, attached); this rank's name stays for the
    // launcher to remove. Then the first collective of the layers above: rank 0 reaches
    // it only if it accepted the segment.
    e(boot.barrier())?;
    e(boot.barrier())?;
    match boot.allgather(b"") {
        Ok(_) => println!("rank 1: rank 0 passed the shared-memory set-up"),
        Err(err) => println!("rank 1: rank 0 did not pass the shared-memory set-up: {err}"),
    }
    // Leave without finalising: the job ends either way.
    std::process::exit(3)
}

fn forged_segment_role(wrong: bool) -> Result<(), String> {
    if std::env::var("SPOOLS_RANK").as_deref() == Ok("1") {
        return forger(wrong);
    }
    match spools::init() {
        Ok(w) => {
            // The forger never gets this far (it leaves after the shared-memory set-up).
            w.abort("rank 0 finished init beside a forged rank");
            std::process::exit(2)
        }
        Err(err) => {
            println!("rank 0: init failed: {err}");
            std::process::exit(2)
        }
    }
}

/// Runs the forgery job and returns its output and the job id; removes (after noting)
/// whatever of the job is left in /dev/shm.
fn forged_job(role: &str) -> (spools_testkit::Output, String, Vec<String>) {
    let o = Job::new(2, "a_segment_tagged_with_another_secret_is_refused")
        .role(role)
        .env("SPOOLS_TRANSPORT", "shm")
        .run();
    // (The line may follow the test harness's own "test ... " without a line break.)
    let job = o
        .stdout
        .split_once("job-id=")
        .and_then(|(_, id)| id.get(..16))
        .unwrap_or_else(|| panic!("{role}: no job id: {o:?}"))
        .to_string();
    let left = shm_leftovers(&job);
    for name in &left {
        let _ = std::fs::remove_file(Path::new("/dev/shm").join(name));
    }
    (o, job, left)
}

/// A segment stamped with a tag derived from another secret is refused when a rank maps
/// it (the control run, tagged with the job's secret, shows that nothing else about the
/// forged segment is refused); every segment is created with mode 0600; the launcher
/// removes a segment name a rank left behind.
#[test]
fn a_segment_tagged_with_another_secret_is_refused() {
    rank_main(|role| forged_segment_role(role == "wrong"));
    for role in ["wrong", "right"] {
        let (o, job, left) = forged_job(role);
        assert!(
            o.stdout.contains("rank 1: rank 0's segment has mode 0600"),
            "{role}: {o:?}"
        );
        assert!(
            left.is_empty(),
            "{role}: the launcher left {left:?} in /dev/shm: {o:?}"
        );
        let refused = format!(
            "rank 0: init failed: corrupt data from rank 1: shared memory /dev/shm{} belongs to another job",
            segment(u64::from_str_radix(&job, 16).unwrap(), 1)
        );
        let passed = o
            .stdout
            .contains("rank 1: rank 0 passed the shared-memory set-up");
        if role == "wrong" {
            assert!(o.stdout.contains(&refused) && !passed, "{role}: {o:?}");
        } else {
            assert!(passed && !o.stdout.contains(&refused), "{role}: {o:?}");
        }
        assert_ne!(o.code(), Some(0), "{role}: {o:?}");
    }
}
