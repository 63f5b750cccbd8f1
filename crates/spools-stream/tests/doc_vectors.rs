//! The test vectors of docs/streams.md ("Test vectors") are the implementation's: every
//! fenced block of the doc whose info string is `vector` is parsed, and its bytes must be
//! exactly what `spools_proto` encodes for the exchange the doc describes (fixed secret,
//! nonces and connection id); then the doc's own bytes are decoded by the implementation:
//! the handshake's proofs check, and the sender's frames of both links, fed to a
//! `Reassembler`, give the doc's ADUs back. So the doc cannot drift from the code.
//!
//! `SPOOLS_PRINT_VECTORS=1 cargo test -p spools-stream --test doc_vectors -- --nocapture`
//! prints the blocks as the doc has them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools_proto::auth::Secret;
use spools_proto::handshake::{Client, Identity, Purpose, Server};
use spools_proto::stream::{
    decode, su_range, tus, Ack, Close, Frame, Hello, Move, Open, Su, Welcome, HELLO_CAN_MOVE,
    HELLO_CAN_PROVE, NOT_SEQUENCED, VARIABLE, VERSION, WELCOME_ACKS, WELCOME_MOVE, WELCOME_PROVEN,
    WELCOME_REQUIRE_PROOF,
};
use spools_stream::{Event, Limits, Reassembler};

const DOC: &str = include_str!("../../../docs/streams.md");

/// The exchange's constants (as the doc states them).
const CONN: u64 = 0x0123_4567_89ab_cdef;
const LINKS: u16 = 2;
const TU: u64 = 8;

fn secret() -> Secret {
    Secret::from_hex("000102030405060708090a0b0c0d0e0f").unwrap()
}

/// The sender's nonce on link `l`: 16 bytes `0x20 + 16 l ..`.
fn client_nonce(l: u16) -> [u8; 16] {
    std::array::from_fn(|i| 0x20 + 16 * l as u8 + i as u8)
}

/// The receiver's nonce on link `l`: 16 bytes `0x80 + 16 l ..`.
fn server_nonce(l: u16) -> [u8; 16] {
    std::array::from_fn(|i| 0x80 + 16 * l as u8 + i as u8)
}

/// One labelled message of a block: its bytes, and the widths of its fields (for printing).
struct Msg {
    label: &'static str,
    bytes: Vec<u8>,
    fields: Vec<usize>,
}

fn frame(label: &'static str, f: &Frame<'_>) -> Msg {
    let mut bytes = Vec::new();
    f.encode(&mut bytes);
    let fields = match f {
        Frame::Hello(_) => vec![4, 2, 2, 2, 2, 8],
        Frame::Welcome(_) => vec![4, 2, 2, 4],
        Frame::Open(_) => vec![4, 4, 4, 4, 4, 8, 8],
        Frame::Su(_, p) => vec![4, 4, 2, 2, 8, 8, 8, 8, 4, 4, p.len()],
        Frame::Close(_) | Frame::Ack(_) => vec![4, 4, 4, 8],
        Frame::Move(_) => vec![4, 2, 2, 16],
    };
    Msg {
        label,
        bytes,
        fields,
    }
}

/// The ADUs of the exchange: stream 1 (fixed size, TUs of 8 bytes) has one ADU of 10
/// bytes; stream 2 (variable, sequenced after 1) has "xyz" and an empty ADU.
fn adus() -> Vec<(u32, Vec<&'static [u8]>)> {
    vec![(1, vec![b"abcdefghij"]), (2, vec![b"xyz", b""])]
}

fn opens() -> [Open; 2] {
    [
        Open {
            stream: 1,
            group: 0,
            after: NOT_SEQUENCED,
            flags: 0,
            tu: TU,
            adu: 10,
        },
        Open {
            stream: 2,
            group: 0,
            after: 1,
            flags: 0,
            tu: TU,
            adu: VARIABLE,
        },
    ]
}

/// The SUs of `data` (ADU `adu` of stream `open`) that travel on link `l`.
fn sus(open: &Open, adu: u64, data: &'static [u8], l: u16) -> Vec<Msg> {
    let size = data.len() as u64;
    if size == 0 {
        if l != 0 {
            return Vec::new();
        }
        let s = Su {
            stream: open.stream,
            su: 0,
            link: 0,
            adu,
            tu: 0,
            offset: 0,
            size: 0,
            crc: crc32c::crc32c(b""),
        };
        return vec![frame("su", &Frame::Su(s, b""))];
    }
    let tu = if open.adu == VARIABLE { size } else { open.tu };
    (0..tus(size, tu))
        .filter_map(|t| {
            let (off, len) = su_range(size, tu, LINKS, t, l)?;
            let p = &data[off as usize..(off + len) as usize];
            let s = Su {
                stream: open.stream,
                su: l,
                link: l,
                adu,
                tu: t,
                offset: off,
                size,
                crc: crc32c::crc32c(p),
            };
            Some(frame("su", &Frame::Su(s, p)))
        })
        .collect()
}

/// The exchange as the implementation encodes it: per block, its name and messages.
fn exchange() -> Vec<(String, Vec<Msg>)> {
    let mut blocks = Vec::new();
    for l in 0..LINKS {
        let client = Client::new(
            secret(),
            client_nonce(l),
            Purpose::Data,
            Identity {
                rank: 0,
                lane: l,
                priority: 0,
            },
        );
        let hs_hello = client.hello();
        let (server, reply) = Server::new(secret(), server_nonce(l))
            .on_hello(&hs_hello)
            .unwrap();
        let auth = client.on_server_hello(&reply).unwrap();
        server.on_auth(&auth).unwrap();
        let mut out = vec![
            frame(
                "hello",
                &Frame::Hello(Hello {
                    version: VERSION,
                    flags: HELLO_CAN_PROVE,
                    links: LINKS,
                    link: l,
                    conn: CONN,
                }),
            ),
            Msg {
                label: "client-hello",
                bytes: hs_hello.to_vec(),
                fields: vec![4, 2, 1, 1, 16],
            },
            Msg {
                label: "client-auth",
                bytes: auth.to_vec(),
                fields: vec![4, 2, 1, 1, 32],
            },
        ];
        for (open, (stream, data)) in opens().iter().zip(adus()) {
            out.push(frame("open", &Frame::Open(*open)));
            for (n, d) in data.iter().enumerate() {
                out.extend(sus(open, n as u64, d, l));
            }
            out.push(frame(
                "close",
                &Frame::Close(Close {
                    stream,
                    adus: data.len() as u64,
                }),
            ));
        }
        blocks.push((format!("link {l}: sender to receiver"), out));
        let welcome = |flags| {
            frame(
                "welcome",
                &Frame::Welcome(Welcome {
                    version: VERSION,
                    flags,
                }),
            )
        };
        let ack = |stream, adu| frame("ack", &Frame::Ack(Ack { stream, adu }));
        blocks.push((
            format!("link {l}: receiver to sender"),
            vec![
                welcome(WELCOME_REQUIRE_PROOF | WELCOME_ACKS),
                Msg {
                    label: "server-hello",
                    bytes: reply.to_vec(),
                    fields: vec![4, 2, 2, 16, 32],
                },
                welcome(WELCOME_PROVEN | WELCOME_ACKS),
                ack(1, 0),
                ack(2, 1),
            ],
        ));
    }
    blocks.extend(moved_link());
    blocks
}

/// Link 1 of the same connection to a job of 2 ranks that spreads its links (no proof
/// asked): rank 0 (at the address the sender was given) moves it to rank 1's listener,
/// `10.0.0.2:7001`, where the same hello is welcomed with acks.
fn moved_link() -> Vec<(String, Vec<Msg>)> {
    let hello = frame(
        "hello",
        &Frame::Hello(Hello {
            version: VERSION,
            flags: HELLO_CAN_MOVE,
            links: LINKS,
            link: 1,
            conn: CONN,
        }),
    );
    let welcome = |flags| {
        frame(
            "welcome",
            &Frame::Welcome(Welcome {
                version: VERSION,
                flags,
            }),
        )
    };
    let again = Msg {
        label: "hello",
        bytes: hello.bytes.clone(),
        fields: hello.fields.clone(),
    };
    vec![
        ("moved link 1: sender to rank 0".into(), vec![hello]),
        (
            "moved link 1: rank 0 to sender".into(),
            vec![
                welcome(WELCOME_MOVE),
                frame(
                    "move",
                    &Frame::Move(Move {
                        addr: "10.0.0.2:7001".parse().unwrap(),
                    }),
                ),
            ],
        ),
        ("moved link 1: sender to rank 1".into(), vec![again]),
        (
            "moved link 1: rank 1 to sender".into(),
            vec![welcome(WELCOME_ACKS)],
        ),
    ]
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A message as the doc shows it: its fields' hex separated by spaces, a field of 32 bytes
/// on a line of its own.
fn show(m: &Msg) -> String {
    let mut line = format!("{:<13}", m.label);
    let mut at = 0;
    for &w in &m.fields {
        let f = hex(&m.bytes[at..at + w]);
        at += w;
        if w == 32 {
            line.truncate(line.trim_end().len());
            line.push_str(&format!("\n{:13}{f}", ""));
        } else {
            line.push_str(&f);
            line.push(' ');
        }
    }
    assert_eq!(at, m.bytes.len());
    line.trim_end().to_string()
}

/// A message of the doc: its label and bytes.
type DocMsg = (String, Vec<u8>);
/// A block of the doc: its name and messages.
type DocBlock = (String, Vec<DocMsg>);

/// The doc's `vector` blocks: per block, its name and its messages (label, bytes).
fn doc_blocks() -> Vec<DocBlock> {
    let mut blocks = Vec::new();
    let mut lines = DOC.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix("```vector ") else {
            continue;
        };
        let mut msgs: Vec<DocMsg> = Vec::new();
        for l in lines.by_ref() {
            if l.starts_with("```") {
                break;
            }
            let (label, rest) = if l.starts_with(char::is_whitespace) {
                (None, l)
            } else {
                let (label, rest) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
                (Some(label), rest)
            };
            let digits: String = rest.chars().filter(|c| !c.is_whitespace()).collect();
            assert!(digits.len() % 2 == 0, "odd hex digits in {l:?}");
            let bytes: Vec<u8> = (0..digits.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).expect("hex digits"))
                .collect();
            match label {
                Some(label) => msgs.push((label.to_string(), bytes)),
                None => msgs
                    .last_mut()
                    .expect("a continuation line after a message")
                    .1
                    .extend(bytes),
            }
        }
        blocks.push((name.trim().to_string(), msgs));
    }
    blocks
}

#[test]
fn the_docs_vectors_are_what_the_implementation_encodes() {
    let want = exchange();
    if std::env::var_os("SPOOLS_PRINT_VECTORS").is_some() {
        for (name, msgs) in &want {
            println!("```vector {name}");
            for m in msgs {
                println!("{}", show(m));
            }
            println!("```\n");
        }
    }
    let got = doc_blocks();
    assert_eq!(
        got.len(),
        want.len(),
        "docs/streams.md has {} vector blocks, the exchange {}",
        got.len(),
        want.len()
    );
    for ((gname, gmsgs), (wname, wmsgs)) in got.iter().zip(&want) {
        assert_eq!(gname, wname);
        assert_eq!(gmsgs.len(), wmsgs.len(), "messages of block {wname:?}");
        for (i, ((glabel, gbytes), w)) in gmsgs.iter().zip(wmsgs).enumerate() {
            assert_eq!(glabel, w.label, "block {wname:?}, message {i}");
            assert_eq!(
                hex(gbytes),
                hex(&w.bytes),
                "block {wname:?}, message {i} ({glabel})"
            );
        }
    }
}

/// The messages of the doc's block `name`.
fn block(blocks: &[DocBlock], name: &str) -> Vec<DocMsg> {
    blocks
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no vector block {name:?} in docs/streams.md"))
        .1
        .clone()
}

#[test]
fn the_docs_vectors_decode_to_the_docs_exchange() {
    let blocks = doc_blocks();
    let mut r: Option<Reassembler> = None;
    let mut stream_frames: Vec<(u16, Vec<u8>)> = Vec::new();
    for l in 0..LINKS {
        let s2r = block(&blocks, &format!("link {l}: sender to receiver"));
        let r2s = block(&blocks, &format!("link {l}: receiver to sender"));
        let get = |msgs: &[DocMsg], label: &str| -> Vec<u8> {
            msgs.iter()
                .find(|(n, _)| n == label)
                .unwrap_or_else(|| panic!("link {l}: no {label}"))
                .1
                .clone()
        };
        // The handshake: the receiver's answer to the doc's client hello is the doc's
        // server hello, its proof checks, and the doc's client auth proves the secret for
        // link l.
        let (hs_hello, reply, auth) = (
            get(&s2r, "client-hello"),
            get(&r2s, "server-hello"),
            get(&s2r, "client-auth"),
        );
        let nonce: [u8; 16] = hs_hello[8..24].try_into().unwrap();
        let snonce: [u8; 16] = reply[8..24].try_into().unwrap();
        let (server, answer) = Server::new(secret(), snonce).on_hello(&hs_hello).unwrap();
        assert_eq!(answer.to_vec(), reply);
        let id = Identity {
            rank: 0,
            lane: l,
            priority: 0,
        };
        let client = Client::new(secret(), nonce, Purpose::Data, id);
        assert_eq!(client.on_server_hello(&reply).unwrap().to_vec(), auth);
        assert_eq!(server.on_auth(&auth).unwrap(), (Purpose::Data, id));
        let other = Secret::from_bytes([0xee; 16]);
        assert!(Client::new(other, nonce, Purpose::Data, id)
            .on_server_hello(&reply)
            .is_err());
        // The receiver's frames: two welcomes, then acks.
        let r2s_frames: Vec<Frame<'_>> = r2s
            .iter()
            .filter(|(n, _)| n != "server-hello")
            .map(|(_, b)| {
                let (f, used) = decode(b).unwrap().unwrap();
                assert_eq!(used, b.len());
                f
            })
            .collect();
        assert_eq!(
            r2s_frames,
            [
                Frame::Welcome(Welcome {
                    version: 1,
                    flags: WELCOME_REQUIRE_PROOF | WELCOME_ACKS
                }),
                Frame::Welcome(Welcome {
                    version: 1,
                    flags: WELCOME_PROVEN | WELCOME_ACKS
                }),
                Frame::Ack(Ack { stream: 1, adu: 0 }),
                Frame::Ack(Ack { stream: 2, adu: 1 }),
            ]
        );
        // The sender's frames: a hello, then (after the handshake) stream frames.
        for (label, b) in &s2r {
            if label.starts_with("client-") {
                continue;
            }
            let (f, used) = decode(b).unwrap().unwrap();
            assert_eq!(used, b.len(), "link {l}: {label}");
            if let Frame::Hello(h) = f {
                assert_eq!((h.conn, h.links, h.link), (CONN, LINKS, l));
                match r.as_mut() {
                    None => r = Some(Reassembler::new(&h, Limits::default()).unwrap()),
                    Some(r) => r.add_link(&h).unwrap(),
                }
            } else {
                stream_frames.push((l, b.clone()));
            }
        }
    }
    // Link 1's frames first: the reassembly takes the links in any interleaving.
    stream_frames.sort_by_key(|(l, _)| std::cmp::Reverse(*l));
    let mut r = r.unwrap();
    let mut events = Vec::new();
    for (l, b) in &stream_frames {
        let (f, _) = decode(b).unwrap().unwrap();
        r.on_frame(*l, &f).unwrap();
        events.extend(std::iter::from_fn(|| r.next_event()));
    }
    let adu = |stream, adu, data: &[u8]| Event::Adu {
        stream,
        adu,
        data: data.to_vec(),
    };
    assert_eq!(
        events,
        [
            adu(1, 0, b"abcdefghij"),
            Event::Ended {
                stream: 1,
                adus: 1,
                complete: true
            },
            adu(2, 0, b"xyz"),
            adu(2, 1, b""),
            Event::Ended {
                stream: 2,
                adus: 2,
                complete: true
            },
        ]
    );
}
