//! Streams from a job to a receiver that requires the job secret's proof, with real
//! processes and sockets: a job of 2 ranks started as another launcher would (the test
//! gives it its secret in `SPOOLS_SECRET`) streams to a receiver requiring that secret
//! (every ADU arrives byte-exact), while a receiver requiring another secret, or the same
//! one from links that prove nothing, gets a typed error on every rank, not a hang.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::mpsc::{channel, Receiver as Rx};
use std::time::Duration;

use spools::StreamFormat;
use spools_io::stream::StreamWriter;
use spools_io::StreamError;
use spools_proto::auth::Secret;
use spools_stream::{Delivery, Event, Limits, Receiver, Sender, Summary};
use spools_testkit::{e, foreign_rank, rank_main, wait_bounded};

const RANKS: u32 = 2;
/// Links of every connection: each rank owns one or two.
const LINKS: u16 = 3;
/// The ADUs' layout: 310 bytes, rank `r` holding bytes `155 r .. 155 (r + 1)`.
const LAYOUT: &str = "u8[10,31] block,* on 2x1";
const ADUS: u64 = 2;

fn secret(b: u8) -> Secret {
    Secret::from_bytes([b; 16])
}

/// The byte at canonical offset `g` of ADU `a`.
fn byte(a: u64, g: u64) -> u8 {
    (g.wrapping_mul(31) ^ (g >> 5) ^ a.wrapping_mul(77)) as u8
}

fn format() -> StreamFormat {
    StreamFormat {
        links: LINKS,
        tu: 7 * u64::from(LINKS),
        ..Default::default()
    }
}

/// `Ok` with the error when `r` fails with [`StreamError::Unproven`].
fn unproven<T>(what: &str, r: Result<T, StreamError>) -> Result<StreamError, String> {
    match r {
        Err(e @ StreamError::Unproven { .. }) => Ok(e),
        Err(other) => Err(format!("{what}: want Unproven, got {other}")),
        Ok(_) => Err(format!("{what}: accepted")),
    }
}

fn rank() -> Result<(), String> {
    let w = e(spools::init())?;
    let var = |k| std::env::var(k).unwrap().parse().unwrap();
    let (dest, other) = (var("STREAM_DEST"), var("STREAM_OTHER"));
    let me = w.rank();
    // A receiver requiring another secret than the job's.
    let err = unproven("another secret", w.stream_open(other, format()))?;
    println!("rank {me}: another secret: {err}");
    // The job's receiver, from links that prove nothing.
    let err = unproven(
        "no proof",
        StreamWriter::open(e(w.io_communicator())?, dest, format()),
    )?;
    println!("rank {me}: no proof: {err}");
    // The job's receiver, proving the job's secret.
    let layout = LAYOUT.parse().unwrap();
    let mut s = e(w.stream_open(dest, format()))?;
    let from = 155 * u64::from(me);
    for a in 0..ADUS {
        let mine: Vec<u8> = (from..from + 155).map(|g| byte(a, g)).collect();
        e(s.send_adu(&mine, &layout))?;
    }
    e(s.close())?;
    println!("rank {me}: streamed");
    e(w.finalize())
}

/// Serves `connections` connections on `r` in a thread: what it received.
fn serve(r: Receiver) -> Rx<(Result<Summary, String>, Vec<Delivery>)> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let s = r.serve(1, |d| {
            got.push(d);
            Ok(())
        });
        let _ = tx.send((s.map_err(|e| e.to_string()), got));
    });
    rx
}

#[test]
fn a_job_proves_its_secret_to_a_receiver_that_requires_it() {
    rank_main(|_| rank());
    let bind = |s| {
        Receiver::bind("127.0.0.1:0", Limits::default())
            .unwrap()
            .require_proof(s)
    };
    let (mine, theirs) = (bind(secret(5)), bind(secret(6)));
    let (dest, other) = (mine.local_addr().unwrap(), theirs.local_addr().unwrap());
    let (mine, theirs) = (serve(mine), serve(theirs));

    let dir = spools_testkit::tempdir("stream-auth");
    let env = [
        (
            "SPOOLS_BOOTSTRAP",
            format!("file:{}", dir.join("rdv").display()),
        ),
        ("SPOOLS_SECRET", secret(5).to_hex()),
        ("STREAM_DEST", dest.to_string()),
        ("STREAM_OTHER", other.to_string()),
    ];
    let waits: Vec<_> = (0..RANKS)
        .map(|r| {
            let c = foreign_rank(
                "a_job_proves_its_secret_to_a_receiver_that_requires_it",
                r,
                RANKS,
                &env,
            );
            std::thread::spawn(move || wait_bounded(c, Duration::from_secs(60)))
        })
        .collect();
    let outs: Vec<_> = waits.into_iter().map(|t| t.join().unwrap()).collect();
    for (r, o) in outs.iter().enumerate() {
        assert_eq!(o.code(), Some(0), "rank {r}: {o:?}");
        for what in [
            "another secret: the destination requires the job secret's proof; link",
            "no proof: the destination requires the job secret's proof; link",
            "streamed",
        ] {
            assert!(o.stdout.contains(&format!("rank {r}: {what}")), "{o:?}");
        }
        assert!(
            o.stdout.contains("secret handshake with the receiver"),
            "{o:?}"
        );
        assert!(
            o.stdout.contains("requires the job secret's proof (give"),
            "{o:?}"
        );
    }

    // The job's receiver: both ADUs byte-exact, the links that proved nothing refused.
    let (summary, got) = mine
        .recv_timeout(Duration::from_secs(60))
        .expect("the receiver ended");
    let summary = summary.unwrap();
    assert!(summary.broken.is_empty(), "{summary:?}");
    refused_every_rank(&summary);
    let adus: Vec<_> = got
        .iter()
        .filter_map(|d| match &d.event {
            Event::Adu { adu, data, .. } => Some((*adu, data.clone())),
            _ => None,
        })
        .collect();
    let want: Vec<_> = (0..ADUS)
        .map(|a| (a, (0..310).map(|g| byte(a, g)).collect::<Vec<u8>>()))
        .collect();
    assert_eq!(adus, want);

    // The other receiver refused every link of the job, and still serves its own senders.
    let s = Sender::connect_proving(other, 1, &secret(6)).unwrap();
    s.finish().unwrap();
    let (summary, _) = theirs
        .recv_timeout(Duration::from_secs(60))
        .expect("the other receiver ended");
    let summary = summary.unwrap();
    assert_eq!(summary.connections, 1, "{summary:?}");
    refused_every_rank(&summary);
}

/// Checks that `summary` names the first link of every rank (link `r` of rank `r`; a rank
/// whose link is refused opens no other) among the refused, and nothing else.
fn refused_every_rank(summary: &Summary) {
    assert_eq!(summary.refused.len(), RANKS as usize, "{summary:?}");
    for r in 0..RANKS {
        assert!(
            summary
                .refused
                .iter()
                .any(|x| x.contains(&format!("link {r} of connection"))),
            "{summary:?}"
        );
    }
}
