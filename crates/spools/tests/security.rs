//! The job secret: a process without it can neither join the job nor inject a message.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spools_boot::net::connect;
use spools_proto::am::{AmHeader, Short};
use spools_proto::auth::Secret;
use spools_proto::boot::{Endpoint, Frame, ToServer};
use spools_proto::handshake::{Identity, Purpose};
use spools_testkit::{e, rank_main, tempdir, wait_bounded, wait_for_file, Job};

/// Rank 0 publishes where it can be reached, then serves messages until the test says it
/// is done, counting every message that reaches a handler.
fn victim_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    e(w.worker().register("any", move |_| {
        g.fetch_add(1, Ordering::SeqCst);
    }))?;
    e(w.worker().sync_handlers())?;
    let dir =
        std::path::PathBuf::from(std::env::var("SPOOLS_TEST_DIR").map_err(|x| x.to_string())?);
    if w.rank() == 0 {
        let boot = std::env::var("SPOOLS_BOOTSTRAP").map_err(|x| x.to_string())?;
        let tcp = w.tcp().ok_or("no tcp")?.listen_addr();
        std::fs::write(dir.join("addrs.tmp"), format!("{boot}\n{tcp}\n"))
            .map_err(|x| x.to_string())?;
        std::fs::rename(dir.join("addrs.tmp"), dir.join("addrs")).map_err(|x| x.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(60);
        e(w.worker()
            .wait_for(|| dir.join("done").exists() || Instant::now() > deadline))?;
        // Anything injected would have been handled by now: give it a last poll.
        e(w.worker().poll())?;
        println!(
            "rank 0: {} messages reached a handler",
            got.load(Ordering::SeqCst)
        );
    }
    e(w.barrier())?;
    e(w.finalize())
}

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

#[test]
fn without_the_secret_nobody_joins_or_injects() {
    rank_main(|_| victim_role());
    let dir = tempdir("secret");
    let job = Job::new(2, "without_the_secret_nobody_joins_or_injects")
        .env("SPOOLS_TEST_DIR", &dir)
        .timeout(Duration::from_secs(90));
    let child = job.spawn();
    wait_for_file(&dir.join("addrs"), Duration::from_secs(60)).unwrap();
    let text = std::fs::read_to_string(dir.join("addrs")).expect("victim published its addresses");
    let mut lines = text.lines();
    let boot: SocketAddr = lines.next().unwrap().parse().unwrap();
    let data: SocketAddr = lines.next().unwrap().parse().unwrap();
    let wrong = Secret::from_bytes([0x42; 16]);
    let id = Identity {
        rank: 1,
        lane: 1,
        priority: 0,
    };

    // 1. Joining the rendezvous with a wrong secret fails at the handshake.
    let r = connect(boot, &wrong, Purpose::Bootstrap, id, Duration::from_secs(5));
    assert!(r.is_err(), "joined the rendezvous without the secret");
    assert!(
        r.unwrap_err().to_string().contains("could not prove"),
        "wrong error"
    );

    // 2. A join frame sent without any handshake: the server closes the connection.
    let mut s = TcpStream::connect(boot).unwrap();
    let join = ToServer::Join {
        rank: 1,
        size: 2,
        endpoint: Endpoint::default(),
    };
    let _ = s.write_all(&join.encode());
    assert!(
        closed_by_peer(s),
        "rendezvous kept a connection that skipped the handshake"
    );

    // 3. A data connection with a wrong secret fails.
    let r = connect(data, &wrong, Purpose::Data, id, Duration::from_secs(5));
    assert!(r.is_err(), "opened a data connection without the secret");

    // 4. Raw frames (length + a valid short active message) without a handshake.
    let mut s = TcpStream::connect(data).unwrap();
    let mut msg = Vec::new();
    AmHeader::Short(Short {
        handler: 0,
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
    assert!(
        closed_by_peer(s),
        "data port kept a connection that skipped the handshake"
    );

    // 5. A correct-looking handshake replayed with the right structure but no secret:
    //    covered by 3; a client that knows the secret gets in (the job itself).
    std::fs::write(dir.join("done"), b"").unwrap();
    let o = wait_bounded(child, job.wait_limit());
    spools_testkit::assert_ok(&o);
    assert!(
        o.stdout.contains("rank 0: 0 messages reached a handler"),
        "{o:?}"
    );
}
