//! Known-answer vectors for the I/O layer's formats: the parallel pipe's hello and frames
//! (`pipe/frame.rs`) and a striped file's manifest and unit files (`file/manifest.rs`).
//!
//! The expected bytes are literals written by hand from the formats' documentation:
//!
//! ```text
//! hello := "SPPH" token[16] rank:u32 ranks:u32                                (28 bytes)
//! frame := "SPPF" kind:u8 0 0 0 record:u64 len:u32 crc32c:u32 payload[len]    (24 + len)
//! ```
//!
//! (integers little-endian; kind 0 data, 1 end) and the manifest's fields (a JSON document,
//! written pretty-printed). The pipe's encoder and decoder are private, so the bytes are
//! taken from, and fed to, the real `PipeWriter` and `PipeReader` of a one-rank job, with
//! this test playing the other program by hand over TCP. The CRC32C values are the
//! published check values (RFC 3720 B.4: 32 bytes of 0x00, of 0xff, ascending and
//! descending), not computed by the code under test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use spools_boot::config::Config;
use spools_boot::identity::JobEnv;
use spools_io::file::{self, Manifest, Striping, UnitEntry, WriteOptions};
use spools_io::pipe::{decode_any, pipe_dir, PipeName, PipeReader, PipeWriter};
use spools_io::FrameError;
use spools_testkit::tempdir;

#[path = "../../spools-proto/tests/common/hex.rs"]
mod hex;

use hex::hx;

/// The four 32-byte blocks of RFC 3720 B.4 and their CRC32C as stored little-endian.
fn blocks() -> [(Vec<u8>, &'static str); 4] {
    [
        (vec![0u8; 32], "aa36918a"),
        (vec![0xffu8; 32], "43aba862"),
        ((0..32u8).collect(), "4e79dd46"),
        ((0..32u8).rev().collect(), "5cdb3f11"),
    ]
}

#[test]
fn the_check_values_are_what_the_crc_gives() {
    // Guards the literals above (and the CRC the formats use) against each other.
    for (data, le) in blocks() {
        assert_eq!(spools_io::crc32c(&data).to_le_bytes().to_vec(), hx(le));
    }
    assert_eq!(spools_io::crc32c(b"123456789"), 0xe306_9283);
}

// ---------------------------------------------------------------------------------------
// Pipe frames, decoded from literals (the public decoder of the whole stream)
// ---------------------------------------------------------------------------------------

const TOKEN: &str = "000102030405060708090a0b0c0d0e0f";

#[test]
fn literal_pipe_streams_decode() {
    // A hello from rank 1 of 2, a data frame of record 5 with 3 bytes, an end frame.
    let stream = hx(&format!(
        "'SPPH' {TOKEN} 01000000 02000000
         'SPPF' 00 000000 0500000000000000 03000000 00000000 'abc'
         'SPPF' 01 000000 0600000000000000 00000000 00000000"
    ));
    assert_eq!(decode_any(&stream), Ok(2));
    // Each field where the documentation puts it: a length read from another place, or
    // in the other byte order, would not fit the stream.
    let frames = |s: &str| decode_any(&hx(&format!("'SPPH' {TOKEN} 01000000 02000000 {s}")));
    // The length is bytes 16..20: 3 here, so two bytes of payload are too few.
    assert_eq!(
        frames("'SPPF' 00 000000 0500000000000000 03000000 00000000 'ab'"),
        Err(FrameError::Short)
    );
    // A length above 1 MiB is refused, and 1 MiB exactly is taken as the length (the
    // stream then lacks the payload).
    assert!(matches!(
        frames("'SPPF' 00 000000 0000000000000000 01001000 00000000"),
        Err(FrameError::TooLong {
            len: 0x0010_0001,
            ..
        })
    ));
    assert_eq!(
        frames("'SPPF' 00 000000 0000000000000000 00001000 00000000"),
        Err(FrameError::Short)
    );
    // Kind is byte 4; bytes 5..8 are reserved and zero.
    assert_eq!(
        frames("'SPPF' 02 000000 0000000000000000 00000000 00000000"),
        Err(FrameError::Kind(2))
    );
    assert_eq!(
        frames("'SPPF' 00 000100 0000000000000000 00000000 00000000"),
        Err(FrameError::Reserved)
    );
    // An end frame carries no payload.
    assert_eq!(
        frames("'SPPF' 01 000000 0000000000000000 01000000 00000000 'x'"),
        Err(FrameError::EndWithPayload)
    );
    // The hello's rank (bytes 20..24) is below its rank count (bytes 24..28).
    assert_eq!(
        decode_any(&hx(&format!("'SPPH' {TOKEN} 02000000 01000000"))),
        Err(FrameError::HelloRank { rank: 2, ranks: 1 })
    );
    assert_eq!(
        decode_any(&hx(&format!("'SPPH' {TOKEN} 00000001 01000000"))),
        Err(FrameError::HelloRank {
            rank: 0x0100_0000,
            ranks: 1
        })
    );
}

// ---------------------------------------------------------------------------------------
// Manifests, parsed from a literal
// ---------------------------------------------------------------------------------------

/// The manifest of `f` after its first write (version 1, slot 1): 128 bytes striped RAID-0
/// over two units of 32-byte blocks, so unit 0 holds blocks 0 and 2 and unit 1 blocks 1
/// and 3, each block's CRC32C as 8 hex digits.
const MANIFEST: &str = r#"{
  "format": "spools-parallel-file",
  "version": 1,
  "slot": 1,
  "size": 128,
  "layout": "stripe(unit=32B,count=2)",
  "dataset": "u8[128] block on 1",
  "node_local": false,
  "units": [
    {
      "path": "f.u0.s1",
      "bytes": 64,
      "crc32c": "8a9136aa46dd794e"
    },
    {
      "path": "f.u1.s1",
      "bytes": 64,
      "crc32c": "62a8ab43113fdb5c"
    }
  ]
}"#;

fn manifest_value() -> Manifest {
    Manifest {
        format: "spools-parallel-file".into(),
        version: 1,
        slot: 1,
        size: 128,
        layout: "stripe(unit=32B,count=2)".into(),
        dataset: "u8[128] block on 1".into(),
        node_local: false,
        units: vec![
            UnitEntry {
                path: "f.u0.s1".into(),
                bytes: 64,
                crc32c: "8a9136aa46dd794e".into(),
                host: None,
            },
            UnitEntry {
                path: "f.u1.s1".into(),
                bytes: 64,
                crc32c: "62a8ab43113fdb5c".into(),
                host: None,
            },
        ],
    }
}

#[test]
fn a_node_local_manifest_records_each_units_host() {
    let text = MANIFEST
        .replace("\"node_local\": false", "\"node_local\": true")
        .replace(
            "\"bytes\": 64,",
            "\"bytes\": 64,\n      \"host\": \"node7\",",
        );
    let m = Manifest::parse(Path::new("dir/f"), text.as_bytes()).unwrap();
    assert!(m.node_local);
    let hosts: Vec<_> = m.units.iter().map(|u| u.host.as_deref()).collect();
    assert_eq!(hosts, [Some("node7"), Some("node7")]);
}

#[test]
fn literal_manifest_parses() {
    let m = Manifest::parse(Path::new("dir/f"), MANIFEST.as_bytes()).unwrap();
    assert_eq!(m, manifest_value());
    assert_eq!(
        m.unit_paths(Path::new("dir/f")),
        vec![Path::new("dir/f.u0.s1"), Path::new("dir/f.u1.s1")]
    );
}

// ---------------------------------------------------------------------------------------
// What the real writers put on the wire and on disk, and what the real reader takes
// ---------------------------------------------------------------------------------------

const DEADLINE: Duration = Duration::from_secs(60);

/// Accepts one connection within the deadline.
fn accept(l: &TcpListener) -> TcpStream {
    l.set_nonblocking(true).unwrap();
    let until = Instant::now() + DEADLINE;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(DEADLINE)).unwrap();
                s.set_write_timeout(Some(DEADLINE)).unwrap();
                return s;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < until, "no connection within {DEADLINE:?}");
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Reads a meeting description: `u32` little-endian length, then JSON.
fn read_description(s: &mut TcpStream) -> serde_json::Value {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut text = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut text).unwrap();
    serde_json::from_slice(&text).unwrap()
}

/// A description as the other program's rank 0 would publish it.
fn description(layout: &str, addrs: &[String], token: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "layout": layout,
        "ranks": 1,
        "addrs": addrs,
        "token": token,
        "pid": std::process::id(),
    }))
    .unwrap()
}

/// Removes a pipe's meeting files when dropped (also when the test fails).
struct MeetingFiles(String);

impl Drop for MeetingFiles {
    fn drop(&mut self) {
        if let Ok(dir) = pipe_dir() {
            for side in ["producer", "consumer"] {
                let _ = std::fs::remove_file(dir.join(format!("{}.{side}", self.0)));
            }
        }
    }
}

const PIPE_LAYOUT: &str = "u8[32] block on 1";

/// The producer's bytes: the real `PipeWriter` writes three records to a consumer played
/// by this test, which records everything on its data connection.
fn pipe_writer_bytes(comm: &spools_msg::Communicator) {
    let meeting = TcpListener::bind("127.0.0.1:0").unwrap();
    let data = TcpListener::bind("127.0.0.1:0").unwrap();
    let name: PipeName = format!("tcp:{}", meeting.local_addr().unwrap())
        .parse()
        .unwrap();
    let data_addr = data.local_addr().unwrap().to_string();
    let consumer = std::thread::spawn(move || {
        let mut m = accept(&meeting);
        let producer = read_description(&mut m);
        let text = description(PIPE_LAYOUT, &[data_addr], TOKEN);
        m.write_all(&(text.len() as u32).to_le_bytes()).unwrap();
        m.write_all(&text).unwrap();
        let mut s = accept(&data);
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        // Closing our end lets the writer's close return.
        drop(s);
        (producer, got)
    });
    let layout = PIPE_LAYOUT.parse().unwrap();
    let mut w = PipeWriter::open(comm, &name, &layout).unwrap();
    for (block, _) in &blocks()[..3] {
        w.write(block).unwrap();
    }
    w.close().unwrap();
    let (producer, got) = consumer.join().unwrap();
    assert_eq!(producer["layout"], PIPE_LAYOUT);
    assert_eq!(producer["ranks"], 1);
    assert_eq!(producer["token"], "");
    let [(zeros, _), (ones, _), (up, _), _] = blocks();
    let want = [
        hx(&format!("'SPPH' {TOKEN} 00000000 01000000")),
        hx("'SPPF' 00 000000 0000000000000000 20000000 aa36918a"),
        zeros,
        hx("'SPPF' 00 000000 0100000000000000 20000000 43aba862"),
        ones,
        hx("'SPPF' 00 000000 0200000000000000 20000000 4e79dd46"),
        up,
        hx("'SPPF' 01 000000 0300000000000000 00000000 00000000"),
    ]
    .concat();
    assert_eq!(got, want);
}

/// The consumer's side: literal bytes sent by this test, playing the producer, to the
/// real `PipeReader`, which must deliver the records they carry.
fn pipe_reader_takes(comm: &spools_msg::Communicator) {
    let name = format!("wire-vectors-{}", std::process::id());
    let _files = MeetingFiles(name.clone());
    let dir = pipe_dir().unwrap();
    std::fs::write(
        dir.join(format!("{name}.producer")),
        description(PIPE_LAYOUT, &[], ""),
    )
    .unwrap();
    let theirs = dir.join(format!("{name}.consumer"));
    let producer = std::thread::spawn(move || {
        let until = Instant::now() + DEADLINE;
        let consumer: serde_json::Value = loop {
            if let Some(v) = std::fs::read(&theirs)
                .ok()
                .and_then(|t| serde_json::from_slice(&t).ok())
            {
                break v;
            }
            assert!(Instant::now() < until, "no consumer description");
            std::thread::sleep(Duration::from_millis(5));
        };
        let addr = consumer["addrs"][0].as_str().unwrap().to_string();
        let token = consumer["token"].as_str().unwrap().to_string();
        assert_eq!(token.len(), 32, "{consumer}");
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let [(zeros, _), _, _, (down, _)] = blocks();
        let stream = [
            hx(&format!("'SPPH' {token} 00000000 01000000")),
            hx("'SPPF' 00 000000 0000000000000000 20000000 5cdb3f11"),
            down,
            hx("'SPPF' 00 000000 0100000000000000 20000000 aa36918a"),
            zeros,
            hx("'SPPF' 01 000000 0200000000000000 00000000 00000000"),
        ]
        .concat();
        s.write_all(&stream).unwrap();
        let _ = s.shutdown(Shutdown::Write);
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    });
    let layout = PIPE_LAYOUT.parse().unwrap();
    let pipe: PipeName = format!("pipe:{name}").parse().unwrap();
    let mut r = PipeReader::open(comm, &pipe, &layout).unwrap();
    let mut buf = [0x55u8; 32];
    let mut records = Vec::new();
    while r.read(&mut buf).unwrap() {
        records.push(buf.to_vec());
        assert!(records.len() <= 2, "more records than sent");
    }
    drop(r);
    producer.join().unwrap();
    let [(zeros, _), _, _, (down, _)] = blocks();
    assert_eq!(records, vec![down, zeros]);
}

/// A striped file written by the real writer: the manifest is the literal above, the
/// unit files hold the literal blocks.
fn striped_file_bytes(comm: &spools_msg::Communicator) {
    let dir = tempdir("wire-vectors");
    let path = dir.path().join("f");
    let layout = "u8[128] block on 1".parse().unwrap();
    let data: Vec<u8> = blocks().into_iter().flat_map(|(b, _)| b).collect();
    let opts = WriteOptions {
        format: file::Format::Striped(Striping {
            layout: "stripe(unit=32B,count=2)".parse().unwrap(),
            dirs: Vec::new(),
            node_local: false,
        }),
        ..WriteOptions::default()
    };
    file::write(comm, &path, &data, &layout, &opts).unwrap();
    let text = String::from_utf8(std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(text.trim_end(), MANIFEST);
    let [(zeros, _), (ones, _), (up, _), (down, _)] = blocks();
    assert_eq!(
        std::fs::read(dir.path().join("f.u0.s1")).unwrap(),
        [zeros, up].concat()
    );
    assert_eq!(
        std::fs::read(dir.path().join("f.u1.s1")).unwrap(),
        [ones, down].concat()
    );
}

/// One test for everything that needs a job: a process holds one `World`.
#[test]
fn a_one_rank_job_writes_and_reads_the_literal_bytes() {
    let world =
        spools::init_with(Config::default(), JobEnv::from_lookup(|_| None).unwrap()).unwrap();
    let comm = world.io_communicator().unwrap();
    striped_file_bytes(comm);
    pipe_writer_bytes(comm);
    pipe_reader_takes(comm);
    world.finalize().unwrap();
}
