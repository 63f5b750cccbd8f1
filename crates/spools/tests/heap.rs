//! The shared heap between real ranks: a buffer from `World::alloc` is mapped by a
//! same-host peer from the name it was sent in a tagged message, which reads the right
//! bytes; the owner freeing the buffer or being killed while the peer holds the mapping
//! leaves the peer reading stale bytes (never crashing), and `/dev/shm` holds nothing of
//! the job afterwards (a killed owner's segments are removed by the launcher).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use spools::{HeapError, HeapRef, World};
use spools_fabric::heap::{lookup, peers};
use spools_testkit::{assert_ok, checked, e, launch, rank_main, shm_leftovers};

const N: usize = 100_000;
const TAG_REF: i32 = 11;
const TAG_MAPPED: i32 = 12;
const TAG_FREED: i32 = 13;

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
fn read_role(w: &World) -> Result<(), String> {
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
    let heaps = e(peers())?;
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
    rank_main(|_| {
        let w = e(spools::init())?;
        checked(&w, read_role);
        Ok(())
    });
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
fn freed_role(w: &World) -> Result<(), String> {
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
        let heaps = e(peers())?;
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
    rank_main(|_| {
        let w = e(spools::init())?;
        checked(&w, freed_role);
        Ok(())
    });
    let o = launch(
        2,
        "a_freed_buffer_stays_readable_by_a_peer_that_maps_it",
        "x",
        &[],
    );
    assert_ok(&o);
    assert!(o.stdout.contains("rank 1: read the freed buffer"), "{o:?}");
}

/// Rank 0 is killed (SIGKILL) while rank 1 holds a mapping of its buffer: rank 1's wait
/// for rank 0 fails naming it, rank 1 still reads the bytes, and says which of rank 0's
/// heap objects are left (the launcher removes them when the job ends).
fn killed_role(w: &World) -> Result<(), String> {
    println!("job {:016x}", w.job());
    if w.rank() == 0 {
        let mut buf = e(w.alloc::<u64>(N))?;
        for (i, x) in buf.iter_mut().enumerate() {
            *x = value(0, i);
        }
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
    let r = recv_ref(w, 0)?;
    let heaps = e(peers())?;
    let pb = e(heaps.bytes(&r, N * 8))?;
    e(w.send(&[1u8], 0, TAG_MAPPED))?;
    // Nobody sends this: the wait ends when rank 0's death is known.
    match w.recv(&mut [0u8; 1], 0, TAG_FREED) {
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
    let left = shm_leftovers(&format!("{:016x}-heap-0-", w.job()));
    println!(
        "rank 1 read the dead owner's buffer; left by rank 0: {}",
        left.len()
    );
    std::process::exit(4);
}

#[test]
fn a_killed_owner_leaves_the_peer_reading_and_nothing_in_dev_shm() {
    rank_main(|_| {
        let w = e(spools::init())?;
        checked(&w, killed_role);
        Ok(())
    });
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
    // The dead rank's segment outlived it (the check below is not vacuous) ...
    assert!(
        o.stdout
            .contains("rank 1 read the dead owner's buffer; left by rank 0: 1"),
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
