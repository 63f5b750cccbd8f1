//! The shared heap between real ranks: a buffer from `World::alloc` is mapped by a
//! same-host peer from the name it was sent in a tagged message, which reads the right
//! bytes; the owner freeing the buffer or being killed while the peer holds the mapping
//! leaves the peer reading stale bytes (never crashing), and `/dev/shm` holds nothing of
//! the job afterwards (a killed owner's segments are removed by the launcher).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use spools::{HeapError, HeapRef, World};
use spools_heap::lookup;
use spools_testkit::{assert_ok, e, launch, rank_main, shm_leftovers};

const N: usize = 100_000;
const TAG_REF: i32 = 11;
const TAG_MAPPED: i32 = 12;
const TAG_FREED: i32 = 13;
const TAG_KEY: i32 = 14;

/// Plays a rank's `role` when this process is one; on failure prints the error and exits
/// at once without finalising (as `spools_testkit::checked` does), so the launcher stops
/// the job.
fn ranks(role: fn(&mut World) -> Result<(), String>) {
    rank_main(|_| {
        let mut w = e(spools::init())?;
        if let Err(x) = role(&mut w) {
            eprintln!("rank error: {x}");
            std::process::exit(1);
        }
        Ok(())
    });
}

fn value(rank: u32, i: usize) -> u64 {
    (u64::from(rank) << 40) | (i as u64 * 2_654_435_761 % 1_000_003)
}

/// This rank's heap objects in /dev/shm.
fn my_heap_objects(w: &World) -> Vec<String> {
    shm_leftovers(&format!("{:016x}-heap-{}-", w.job(), w.rank()))
}

/// Receives a heap reference (sent as bytes) from `src`.
fn recv_ref(w: &World, src: u32) -> Result<HeapRef, String> {
    let mut b = [0u8; HeapRef::WIRE_BYTES];
    e(w.recv(&mut b, src, TAG_REF))?;
    e(HeapRef::from_bytes(&b))
}

/// Every rank allocates, fills, and sends the name of a sub-slice of its buffer to the
/// next rank, which maps it and checks the bytes; the buffer also goes through an
/// ordinary send, as any slice does.
fn read_role(w: &mut World) -> Result<(), String> {
    let (me, n) = (w.rank(), w.size());
    let mut buf = e(w.alloc::<u64>(N))?;
    if buf.iter().any(|&x| x != 0) {
        return Err("a fresh buffer is not zeroed".into());
    }
    for (i, x) in buf.iter_mut().enumerate() {
        *x = value(me, i);
    }
    if my_heap_objects(w).len() != 1 {
        return Err(format!("/dev/shm: {:?}", my_heap_objects(w)));
    }
    let (lo, hi) = (1_000, 61_000);
    let part = &buf[lo..hi];
    let r = lookup(part.as_ptr().cast(), std::mem::size_of_val(part))
        .ok_or("a sub-slice of a heap buffer is not found")?;
    if r.name != buf.heap_ref().name || r.offset != (lo * 8) as u64 {
        return Err(format!("lookup gave {r:?}"));
    }
    let ordinary: Vec<u64> = (0..8).collect();
    if lookup(ordinary.as_ptr().cast(), 64).is_some() {
        return Err("an ordinary Vec is in the heap".into());
    }
    e(w.send(&r.to_bytes(), (me + 1) % n, TAG_REF))?;
    // Slice APIs take heap buffers as they are.
    e(w.send(&buf[..16], (me + 1) % n, TAG_MAPPED))?;

    let from = (me + n - 1) % n;
    let theirs = recv_ref(w, from)?;
    let heaps = w.worker().heaps().clone();
    let pb = e(heaps.bytes(&theirs, (hi - lo) * 8))?;
    let mut got = vec![0u8; (hi - lo) * 8];
    e(pb.copy_to(0, &mut got))?;
    let want: Vec<u8> = (lo..hi)
        .flat_map(|i| value(from, i).to_le_bytes())
        .collect();
    if got != want {
        return Err(format!("rank {me}: wrong bytes from rank {from}'s heap"));
    }
    let mut head = e(w.alloc::<u64>(16))?;
    e(w.recv(&mut head, from, TAG_MAPPED))?;
    if head.iter().enumerate().any(|(i, &x)| x != value(from, i)) {
        return Err("a receive into a heap buffer got wrong values".into());
    }
    // Asking past the end of the segment is an error, not a read of foreign memory.
    let past = HeapRef {
        offset: (N * 8) as u64,
        ..theirs
    };
    if !matches!(heaps.bytes(&past, 1), Err(HeapError::OutOfRange { .. })) {
        return Err("a range past the segment was handed out".into());
    }
    e(w.barrier())?;
    drop((buf, head));
    if !my_heap_objects(w).is_empty() {
        return Err(format!("freed but still named: {:?}", my_heap_objects(w)));
    }
    println!("rank {me}: read rank {from}'s heap");
    Ok(())
}

#[test]
fn a_peer_reads_a_heap_buffer_by_its_name() {
    ranks(read_role);
    for n in [2, 3] {
        let o = launch(n, "a_peer_reads_a_heap_buffer_by_its_name", "x", &[]);
        assert_ok(&o);
        for r in 0..n {
            assert!(o.stdout.contains(&format!("rank {r}: read rank")), "{o:?}");
        }
    }
}

/// Rank 0 frees its buffer while rank 1 holds a mapping of it: rank 1 reads the old
/// bytes without a fault, and asking for the buffer again says it was freed.
fn freed_role(w: &mut World) -> Result<(), String> {
    if w.rank() == 0 {
        let mut buf = e(w.alloc::<u64>(N))?;
        for (i, x) in buf.iter_mut().enumerate() {
            *x = value(0, i);
        }
        e(w.send(&buf.heap_ref().to_bytes(), 1, TAG_REF))?;
        e(w.recv(&mut [0u8; 1], 1, TAG_MAPPED))?;
        drop(buf);
        if !my_heap_objects(w).is_empty() {
            return Err(format!("freed but still named: {:?}", my_heap_objects(w)));
        }
        e(w.send(&[1u8], 1, TAG_FREED))?;
    } else {
        let r = recv_ref(w, 0)?;
        let heaps = w.worker().heaps().clone();
        let pb = e(heaps.bytes(&r, N * 8))?;
        e(w.send(&[1u8], 0, TAG_MAPPED))?;
        e(w.recv(&mut [0u8; 1], 0, TAG_FREED))?;
        if !pb.freed() {
            return Err("the mapping does not know it was freed".into());
        }
        let mut got = vec![0u8; N * 8];
        e(pb.copy_to(0, &mut got))?;
        if got
            .chunks(8)
            .enumerate()
            .any(|(i, c)| c != value(0, i).to_le_bytes())
        {
            return Err("the stale bytes are not the last ones written".into());
        }
        match heaps.bytes(&r, 8) {
            Err(HeapError::Freed { .. }) => {}
            other => return Err(format!("after the free: {other:?}")),
        }
        println!("rank 1: read the freed buffer, then was told it is freed");
    }
    e(w.barrier())
}

#[test]
fn a_freed_buffer_stays_readable_by_a_peer_that_maps_it() {
    ranks(freed_role);
    let o = launch(
        2,
        "a_freed_buffer_stays_readable_by_a_peer_that_maps_it",
        "x",
        &[],
    );
    assert_ok(&o);
    assert!(o.stdout.contains("rank 1: read the freed buffer"), "{o:?}");
}

/// Rank 0 is killed (SIGKILL) while rank 1 holds a mapping of its buffer and copies out
/// of it: rank 1's wait for rank 0 fails naming it, rank 1 still reads the bytes, a put into and a get from
/// rank 0's shared region fail naming the death, and rank 1 says how many of rank 0's
/// heap objects are left (the launcher removes them when the job ends).
fn killed_role(w: &mut World) -> Result<(), String> {
    println!("job {:016x}", w.job());
    if w.rank() == 0 {
        let mut buf = e(w.alloc::<u64>(N))?;
        for (i, x) in buf.iter_mut().enumerate() {
            *x = value(0, i);
        }
        let region = e(w.worker().shared_region(4096))?;
        e(w.send(&region.key().to_le_bytes(), 1, TAG_KEY))?;
        e(w.send(&buf.heap_ref().to_bytes(), 1, TAG_REF))?;
        e(w.recv(&mut [0u8; 1], 1, TAG_MAPPED))?;
        std::process::Command::new("kill")
            .args(["-KILL", &std::process::id().to_string()])
            .status()
            .map_err(|x| x.to_string())?;
        // The signal ends this process; the launcher's timeout bounds this wait.
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    let mut key = [0u8; 4];
    e(w.recv(&mut key, 0, TAG_KEY))?;
    let key = u32::from_le_bytes(key);
    let r = recv_ref(w, 0)?;
    let heaps = w.worker().heaps().clone();
    let pb = e(heaps.bytes(&r, N * 8))?;
    e(w.send(&[1u8], 0, TAG_MAPPED))?;
    // A thread copies out of rank 0's buffer over and over while rank 0 dies; the wait
    // (for a message nobody sends) ends when rank 0's death is known.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let waited = std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut scratch = vec![0u8; N * 8];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // The range was checked when mapped.
                let _ = pb.copy_to(0, &mut scratch);
            }
        });
        let r = w.recv(&mut [0u8; 1], 0, TAG_FREED);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    });
    match waited {
        Err(err) => println!("rank 1 saw: {err}"),
        Ok(_) => return Err("a message from a killed rank".into()),
    }
    let mut got = vec![0u8; N * 8];
    e(pb.copy_to(0, &mut got))?;
    if got
        .chunks(8)
        .enumerate()
        .any(|(i, c)| c != value(0, i).to_le_bytes())
    {
        return Err("the dead owner's bytes changed".into());
    }
    // The dead rank's shared region is still mapped (its segment is still there), but a
    // put or get with it fails naming the death.
    let put = w.endpoint().put(0, key, 0, b"late");
    let get = w.endpoint().get(0, key, 0, &mut [0u8; 4]);
    match (put, get) {
        (Err(p), Err(g)) => println!("rank 1 put: {p}; get: {g}"),
        other => return Err(format!("put and get with a dead rank's region: {other:?}")),
    }
    let left = shm_leftovers(&format!("{:016x}-heap-0-", w.job()));
    println!(
        "rank 1 read the dead owner's buffer; left by rank 0: {}",
        left.len()
    );
    std::process::exit(4);
}

#[test]
fn a_killed_owner_leaves_the_peer_reading_and_nothing_in_dev_shm() {
    ranks(killed_role);
    let o = launch(
        2,
        "a_killed_owner_leaves_the_peer_reading_and_nothing_in_dev_shm",
        "x",
        &[],
    );
    assert_eq!(o.code(), Some(128 + 9), "{o:?}");
    assert!(
        o.stdout
            .contains("rank 1 saw: rank 0 died (was killed by signal 9"),
        "{o:?}"
    );
    assert!(
        o.stdout.contains(
            "rank 1 put: rank 0 died (was killed by signal 9 (SIGKILL)); get: rank 0 died"
        ),
        "{o:?}"
    );
    // The dead rank's segments outlived it (the check below is not vacuous) ...
    assert!(
        o.stdout
            .contains("rank 1 read the dead owner's buffer; left by rank 0: 2"),
        "{o:?}"
    );
    // ... and the launcher removed it.
    let job = o
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("job "))
        .expect("the job id")
        .to_owned();
    assert_eq!(shm_leftovers(&job), Vec::<String>::new());
}

/// Bytes of the rendezvous messages (past the eager limit).
const BIG: usize = 4 << 20;

fn pattern(seed: u8) -> impl Iterator<Item = u8> {
    (0..BIG).map(move |i| (i % 253) as u8 ^ seed)
}

/// Rank 0 sends 4 MiB messages to rank 1: from an ordinary buffer (rank 1 maps nothing),
/// then from heap buffers into a heap buffer, an ordinary one and one sized by the
/// receive, from a sub-slice, and from a non-blocking send whose request was dropped
/// (rank 1 copies from rank 0's segments, which it has then mapped): every receive gets
/// the right bytes.
fn rendezvous_role(w: &mut World) -> Result<(), String> {
    let heaps = w.worker().heaps().clone();
    if w.rank() == 0 {
        let plain: Vec<u8> = pattern(1).collect();
        e(w.send(&plain, 1, 1))?;
        for seed in [2, 3, 4] {
            let mut buf = e(w.alloc::<u8>(BIG))?;
            for (d, s) in buf.iter_mut().zip(pattern(seed)) {
                *d = s;
            }
            e(w.send(&buf, 1, i32::from(seed)))?;
        }
        // A send of a sub-slice that starts inside a segment.
        let mut buf = e(w.alloc::<u8>(BIG + 100))?;
        for (d, s) in buf[100..].iter_mut().zip(pattern(5)) {
            *d = s;
        }
        e(w.send(&buf[100..], 1, 5))?;
        // A non-blocking send that owns its heap buffer, its request dropped at once: the
        // engine keeps the buffer (mapped, named) until rank 1 has copied it.
        let mut buf = e(w.alloc::<u8>(BIG))?;
        for (d, s) in buf.iter_mut().zip(pattern(6)) {
            *d = s;
        }
        drop(e(w.isend_pinned(buf, 1, 6))?);
    } else {
        let check = |got: &[u8], seed: u8| -> Result<(), String> {
            if got.len() != BIG || !got.iter().copied().eq(pattern(seed)) {
                return Err(format!("message {seed}: wrong bytes"));
            }
            Ok(())
        };
        let mut into = e(w.alloc::<u8>(BIG))?;
        e(w.recv(&mut into, 0, 1))?;
        check(&into, 1)?;
        if heaps.mapped() != 0 {
            return Err("an ordinary send made the receiver map a segment".into());
        }
        e(w.recv(&mut into, 0, 2))?;
        check(&into, 2)?;
        if heaps.mapped() == 0 {
            return Err("a send from the heap did not take the single copy".into());
        }
        let mut plain = vec![0u8; BIG];
        e(w.recv(&mut plain, 0, 3))?;
        check(&plain, 3)?;
        let (v, _) = e(w.recv_vec(0, 4))?;
        check(&v, 4)?;
        e(w.recv(&mut plain, 0, 5))?;
        check(&plain, 5)?;
        e(w.recv(&mut plain, 0, 6))?;
        check(&plain, 6)?;
        println!("rank 1: every rendezvous from the heap right");
    }
    e(w.barrier())
}

#[test]
fn rendezvous_from_the_heap_takes_one_copy() {
    ranks(rendezvous_role);
    for t in ["auto", "tcp"] {
        let o = launch(
            2,
            "rendezvous_from_the_heap_takes_one_copy",
            "x",
            &[("SPOOLS_TRANSPORT", t)],
        );
        assert_ok(&o);
        assert!(
            o.stdout
                .contains("rank 1: every rendezvous from the heap right"),
            "{t}: {o:?}"
        );
    }
}

/// Rank 1 makes a region in the shared heap and an ordinary one; rank 0 puts into and
/// gets from both: the shared one straight through its mapping (rank 0 then maps a
/// segment), the ordinary one through the transport; the bytes are right either way, a
/// range outside the region and a withdrawn region are refused as the target would.
fn region_role(w: &mut World) -> Result<(), String> {
    let heaps = w.worker().heaps().clone();
    let len = 1 << 20;
    let (shared, plain) = if w.rank() == 1 {
        let s = e(w.worker().shared_region(len))?;
        if !s.is_shared() {
            return Err("the region is not in the shared heap".into());
        }
        (Some(s), Some(e(w.worker().region(len))?))
    } else {
        (None, None)
    };
    let key_of = |r: &Option<spools::Region>| r.as_ref().map_or(0, |r| r.key());
    let keys = e(w.bcast_bytes(
        1,
        &[key_of(&shared), key_of(&plain)]
            .map(u32::to_le_bytes)
            .concat(),
    ))?;
    let skey = u32::from_le_bytes(keys[..4].try_into().unwrap());
    let pkey = u32::from_le_bytes(keys[4..8].try_into().unwrap());
    let data: Vec<u8> = pattern(9).take(len - 64).collect();
    if w.rank() == 0 {
        e(w.endpoint().put(1, pkey, 64, &data))?;
        if heaps.mapped() != 0 {
            return Err("a put into an ordinary region mapped a segment".into());
        }
        e(w.endpoint().put(1, skey, 64, &data))?;
        if heaps.mapped() != 1 {
            return Err("a put into a shared region did not map it".into());
        }
        for key in [skey, pkey] {
            let mut back = vec![0u8; len - 64];
            e(w.endpoint().get(1, key, 64, &mut back))?;
            if back != data {
                return Err(format!("region {key}: wrong bytes back"));
            }
            match w.endpoint().put(1, key, 65, &data) {
                Err(spools::AmError::OutOfBounds { .. }) => {}
                other => return Err(format!("region {key}: put past its end gave {other:?}")),
            }
        }
        e(w.barrier())?; // rank 1 checks its regions
        e(w.barrier())?; // rank 1 withdrew them
        for key in [skey, pkey] {
            match w.endpoint().put(1, key, 0, b"late") {
                Err(spools::AmError::UnknownRegion { .. }) => {}
                other => return Err(format!("region {key}: put after withdrawal gave {other:?}")),
            }
        }
        println!("rank 0: puts and gets right in both regions");
    } else {
        e(w.barrier())?;
        for r in [&shared, &plain] {
            let r = r.as_ref().ok_or("no region")?;
            let got = r.to_vec();
            if got[64..] != data[..] || got[..64].iter().any(|&b| b != 0) {
                return Err(format!("region {}: wrong bytes", r.key()));
            }
        }
        drop((shared, plain));
        if !my_heap_objects(w).is_empty() {
            return Err(format!(
                "withdrawn but still named: {:?}",
                my_heap_objects(w)
            ));
        }
        e(w.barrier())?;
    }
    e(w.barrier())
}

#[test]
fn puts_and_gets_copy_straight_into_a_shared_region() {
    ranks(region_role);
    let o = launch(
        2,
        "puts_and_gets_copy_straight_into_a_shared_region",
        "x",
        &[],
    );
    assert_ok(&o);
    assert!(
        o.stdout
            .contains("rank 0: puts and gets right in both regions"),
        "{o:?}"
    );
}
