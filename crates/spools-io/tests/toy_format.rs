//! A format of the program's own, in this one file and with no edit of the engine: "toy"
//! files hold a 16-byte header (magic and the stream's length), the canonical byte stream,
//! and a 14-byte trailer written at commit. Written by 4 ranks (replacing, and in
//! place), read by 3 through `read_with_formats`; a plain `read`, which does not know the
//! format, takes the file for canonical bytes of another size and fails on every rank.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use spools::Layout;
use spools_io::file::{
    self, Commit, Format, OneFile, OneFileFormat, Prepared, ReadOptions, StreamAt, WriteOptions,
};
use spools_io::FileError;
use spools_testkit::{assert_ok, checked, e, rank_main, tempdir, Job};

const MAGIC: &[u8; 8] = b"SPTOY\x01\x00\x00";
const TRAILER: &[u8; 6] = b"TOYEND";
const HEADER_LEN: u64 = 16;
const TRAILER_LEN: u64 = 14;

/// The toy format.
#[derive(Debug)]
struct Toy;

impl OneFileFormat for Toy {
    fn name(&self) -> &str {
        "toy"
    }

    fn inspect(
        &self,
        _path: &Path,
        head: &[u8],
        len: u64,
        _layout: Option<&Layout>,
    ) -> Result<Option<StreamAt>, FileError> {
        if head.len() < HEADER_LEN as usize || &head[..8] != MAGIC {
            return Ok(None);
        }
        let bytes = u64::from_le_bytes(head[8..16].try_into().unwrap());
        // A file cut short, or without its trailer, is not taken for a toy file.
        Ok(
            (len == HEADER_LEN + bytes + TRAILER_LEN).then_some(StreamAt {
                offset: HEADER_LEN,
                bytes,
            }),
        )
    }

    fn prepare(
        &self,
        _tmp: &Path,
        layout: &Layout,
        _in_place: bool,
    ) -> Result<Prepared, FileError> {
        let mut h = MAGIC.to_vec();
        h.extend_from_slice(&layout.total_bytes().unwrap_or(0).to_le_bytes());
        Ok(Prepared::Header(h))
    }

    fn commit(&self, file: &Path, _layout: &Layout, at: StreamAt) -> Result<bool, FileError> {
        let mut t = TRAILER.to_vec();
        t.extend_from_slice(&at.bytes.to_le_bytes());
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(file)
            .map_err(|x| FileError::io("open", file, x))?;
        f.write_all_at(&t, at.offset + at.bytes)
            .map_err(|x| FileError::io("write the trailer of", file, x))?;
        Ok(true)
    }
}

const SHAPE: &str = "u32[50,33]";

fn value(i: u64, version: u32) -> u32 {
    i as u32 ^ (version << 20)
}

fn share(l: &Layout, me: u64, version: u32) -> Result<Vec<u8>, String> {
    let mut b = vec![0u8; e(l.local_bytes(me))? as usize];
    for x in e(l.extents(me))? {
        for k in (0..x.len).step_by(4) {
            let at = (x.local + k) as usize;
            b[at..at + 4].copy_from_slice(&value((x.global + k) / 4, version).to_le_bytes());
        }
    }
    Ok(b)
}

fn ranks() {
    rank_main(|role| {
        let w = e(spools::init())?;
        checked(&w, |w| {
            let comm = w.communicator();
            let me = u64::from(w.rank());
            let path = PathBuf::from(std::env::var("SPOOLS_TEST_FILE").unwrap());
            let n = w.size();
            let toy = OneFile(Arc::new(Toy));
            match role {
                "write" => {
                    let l: Layout = e(format!("{SHAPE} block,cyclic on 2x{}", n / 2).parse())?;
                    for (version, commit) in [(1, Commit::Replace), (2, Commit::InPlace)] {
                        let opts = WriteOptions {
                            format: Format::OneFile(toy.clone()),
                            commit,
                            sync: true,
                            ..WriteOptions::default()
                        };
                        e(file::write(
                            comm,
                            &path,
                            &share(&l, me, version)?,
                            &l,
                            &opts,
                        ))?;
                    }
                }
                "read" => {
                    let l: Layout = e(format!("{SHAPE} cyclic(4),* on {n}x1").parse())?;
                    let mut got = vec![0u8; e(l.local_bytes(me))? as usize];
                    let opts = ReadOptions::default();
                    e(file::read_with_formats(
                        comm,
                        &path,
                        &mut got,
                        &l,
                        &opts,
                        &[&Toy],
                    ))?;
                    if got != share(&l, me, 2)? {
                        return Err(format!("rank {me} read other bytes than version 2"));
                    }
                    let mut again = vec![0u8; got.len()];
                    match file::read(comm, &path, &mut again, &l, &opts) {
                        Ok(_) => return Err("a plain read took the toy file".into()),
                        Err(x)
                            if x.to_string().contains("bytes but the layout describes")
                                || x.remote_rank().is_some() => {}
                        Err(x) => return Err(format!("a plain read: {x}")),
                    }
                }
                other => return Err(format!("no role {other}")),
            }
            Ok(())
        });
        e(w.finalize())
    });
}

#[test]
fn a_format_of_ones_own_is_one_trait_and_the_engine_does_the_rest() {
    const T: &str = "a_format_of_ones_own_is_one_trait_and_the_engine_does_the_rest";
    ranks();
    let d = tempdir("toy-format");
    let f = d.join("data.toy");
    let job = |n: u32, role: &str| Job::new(n, T).role(role).env("SPOOLS_TEST_FILE", &f);
    assert_ok(&job(4, "write").run());
    let b = std::fs::read(&f).unwrap();
    let total = 50 * 33 * 4u64;
    assert_eq!(b.len() as u64, HEADER_LEN + total + TRAILER_LEN);
    assert_eq!(&b[..8], MAGIC);
    assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), total);
    let stream: Vec<u8> = (0..total / 4)
        .flat_map(|i| value(i, 2).to_le_bytes())
        .collect();
    assert!(
        b[16..16 + total as usize] == stream[..],
        "the stream is version 2's canonical bytes"
    );
    assert_eq!(&b[16 + total as usize..][..6], TRAILER);
    assert_ok(&job(3, "read").run());
}
