//! Any-to-any redistribution with real processes against a one-process reference.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod model;

use spools::{ExchangeOptions, Layout};
use spools_testkit::{assert_ok, checked, e, launch, rank_main, Rng};

/// The byte at canonical offset `g` of the test dataset.
fn byte(g: u64) -> u8 {
    (g ^ (g >> 8) ^ (g >> 17)).wrapping_mul(131) as u8
}

/// A random distribution of one dimension (`n` elements over `p` units).
fn dist(rng: &mut Rng, n: u64, p: u64) -> String {
    if p == 1 && rng.below(3) == 0 {
        return "*".into();
    }
    match rng.below(4) {
        0 => "block".into(),
        1 => format!("block({})", n.div_ceil(p) + rng.below(3)),
        2 => "cyclic".into(),
        _ => format!("cyclic({})", 1 + rng.below(9)),
    }
}

/// A random layout of a dataset of `shape` x `dtype` (or a byte-stream layout of its
/// size) over at most `ranks` units.
fn random_layout(rng: &mut Rng, dtype: &str, shape: &[u64], order: &str, ranks: u64) -> String {
    let es = match dtype {
        "u8" => 1,
        "u16" => 2,
        "u32" => 4,
        _ => 8,
    };
    let total = shape.iter().product::<u64>() * es;
    match rng.below(8) {
        0 => {
            return format!(
                "stripe(unit={}B,count={},size={total}B)",
                1 + rng.below(300),
                1 + rng.below(ranks)
            )
        }
        1 if ranks >= 2 => {
            return format!(
                "raid5(unit={}B,count={},size={total}B)",
                1 + rng.below(200),
                2 + rng.below(ranks - 1)
            )
        }
        2 => {
            // Another shape of the same bytes (1-D), which corresponds through the stream.
            let p = 1 + rng.below(ranks);
            return format!("u8[{total}] {} on {p}", dist(rng, total, p));
        }
        _ => {}
    }
    let mut left = 1 + rng.below(ranks);
    let mut grid = Vec::new();
    for &n in shape {
        let p = 1 + rng.below(left.min(n));
        left /= p;
        left = left.max(1);
        grid.push(p);
    }
    let dists: Vec<String> = shape
        .iter()
        .zip(&grid)
        .map(|(&n, &p)| dist(rng, n, p))
        .collect();
    let grid: Vec<String> = grid.iter().map(u64::to_string).collect();
    let shape_s: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!(
        "{dtype}[{}] {} on {}{order}",
        shape_s.join(","),
        dists.join(","),
        grid.join("x")
    )
}

/// This rank's local storage under `l`, filled from the dataset (parity slots left 0):
/// from the element model (the oracle), checked against what `Layout::extents` (which the
/// plans use too) says.
fn local(l: &Layout, me: u64) -> Result<Vec<u8>, String> {
    if me >= l.units() {
        return Ok(Vec::new());
    }
    let len = e(l.local_bytes(me))? as usize;
    let (want, modelled) = model::local_storage(l, me, len, byte);
    let mut covered = 0u64;
    for x in e(l.extents(me))? {
        covered += x.len;
        for k in 0..x.len {
            let i = (x.local + k) as usize;
            if want.get(i) != Some(&byte(x.global + k)) {
                return Err(format!(
                    "{l}: unit {me}: Layout::extents puts global byte {} at local byte {i}, \
                     not the model",
                    x.global + k
                ));
            }
        }
    }
    if covered != modelled {
        return Err(format!(
            "{l}: unit {me}: Layout::extents covers {covered} bytes, the model {modelled}"
        ));
    }
    Ok(want)
}

/// A rank's buffer holding `bytes`: ordinary memory, or the shared heap if `heap` (an
/// empty one stays ordinary).
fn buffer(
    w: &spools::World,
    bytes: Vec<u8>,
    heap: bool,
) -> Result<Box<dyn std::ops::DerefMut<Target = [u8]>>, String> {
    if !heap || bytes.is_empty() {
        return Ok(Box::new(bytes));
    }
    let mut b = e(w.alloc::<u8>(bytes.len()))?;
    b.copy_from_slice(&bytes);
    Ok(Box::new(b))
}

fn redistribute_rank(w: &spools::World) -> Result<(), String> {
    let n = u64::from(w.size());
    let me = u64::from(w.rank());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ n);
    for case in 0..120 {
        let dtype = ["u8", "u16", "u32", "f64"][rng.below(4) as usize];
        let dims = 1 + rng.below(3) as usize;
        // Every fourth case is large enough for transfer units beyond the eager limit.
        let big = case % 4 == 0;
        let shape: Vec<u64> = (0..dims)
            .map(|_| {
                1 + rng.below(match (dims, big) {
                    (1, true) => 300_000,
                    (1, false) => 3000,
                    (2, true) => 400,
                    (_, true) => 60,
                    _ => 40,
                })
            })
            .collect();
        let order = if rng.below(3) == 0 { " order=F" } else { "" };
        let a = random_layout(&mut rng, dtype, &shape, order, n);
        let b = random_layout(&mut rng, dtype, &shape, order, n);
        let from: Layout = e(a.parse())?;
        let to: Layout = e(b.parse())?;
        let opts = ExchangeOptions {
            integrity: rng.below(2) == 0,
            transfer_unit: [7, 100, 4096, 40_000, 100_000, 1 << 20][rng.below(6) as usize],
            window: 1 + rng.below(3) as usize,
            single_copy: rng.below(4) != 0,
            declined: None,
        };
        // Each rank picks its own kind of buffers on each side (ordinary or shared
        // heap), so that every mix between two ranks occurs.
        let kinds = (rng.below(4) + me) % 4;
        let src = buffer(w, local(&from, me)?, kinds & 1 != 0)?;
        let want = local(&to, me)?;
        let mut got = buffer(w, vec![0u8; want.len()], kinds & 2 != 0)?;
        spools_io::redistribute(e(w.io_communicator())?, &src, &from, &mut got, &to, &opts)
            .map_err(|x| format!("case {case}: {a} -> {b}: {x}"))?;
        if got[..] != want[..] {
            let i = got.iter().zip(&want).position(|(x, y)| x != y).unwrap_or(0);
            return Err(format!(
                "case {case}: {a} -> {b} ({opts:?}, buffers {kinds}): rank {me} byte {i} is \
                 {}, want {}",
                got[i], want[i]
            ));
        }
    }
    // A buffer smaller than the rank's share fails on that rank and, without moving
    // anything, on every other.
    let l: Layout = e(format!("u8[{}] block on {n}", 100 * n).parse())?;
    let mut small = vec![0u8; if me == 0 { 10 } else { 100 }];
    let r = w.redistribute(&[1u8; 100], &l, &mut small, &l);
    match (me, r) {
        (
            0,
            Err(spools::ExchangeError::BufferSize {
                need: 100, got: 10, ..
            }),
        ) => {}
        // The others learn rank 0's kind and message.
        (_, Err(spools::ExchangeError::Remote { rank: 0, cause }))
            if me > 0
                && cause.kind == spools_io::ErrorKind::Mismatch
                && cause.message.contains("holds 10 bytes") => {}
        (_, r) => return Err(format!("small buffer: {r:?}")),
    }
    // A binding declining the last rank's part (its own argument check failed): every rank
    // fails before anything moves, the others with that rank's cause.
    let last = n - 1;
    let why = spools_io::Cause::new(spools_io::ErrorKind::WrongType, "int64 is not float64");
    let opts = ExchangeOptions {
        declined: (me == last).then(|| why.clone()),
        ..ExchangeOptions::default()
    };
    let mut out = vec![7u8; 100];
    let src = if me == last {
        Vec::new()
    } else {
        vec![1u8; 100]
    };
    let r = spools_io::redistribute(e(w.io_communicator())?, &src, &l, &mut out, &l, &opts);
    match r {
        Err(spools::ExchangeError::Declined(c)) if me == last && c == why => {}
        Err(spools::ExchangeError::Remote { rank, cause })
            if me != last && u64::from(rank) == last && cause == why => {}
        r => return Err(format!("declined: {r:?}")),
    }
    if out != [7u8; 100] {
        return Err("a refused exchange moved data".into());
    }
    Ok(())
}

#[test]
fn redistribution_any_to_any_matches_a_one_process_reference() {
    rank_main(|role| {
        assert_eq!(role, "redistribute");
        let w = e(spools::init())?;
        checked(&w, redistribute_rank);
        e(w.finalize())
    });
    for n in 1..=7 {
        let o = launch(
            n,
            "redistribution_any_to_any_matches_a_one_process_reference",
            "redistribute",
            &[],
        );
        assert_ok(&o);
    }
}

/// Whether this process may read process memory with `process_vm_readv` (tried on
/// itself; a ptrace policy or a seccomp filter can forbid it).
fn cma_allowed() -> bool {
    let src = [7u8; 64];
    let mut dst = [0u8; 64];
    let local = libc::iovec {
        iov_base: dst.as_mut_ptr().cast(),
        iov_len: dst.len(),
    };
    let remote = libc::iovec {
        iov_base: src.as_ptr() as *mut libc::c_void,
        iov_len: src.len(),
    };
    // SAFETY: both iovecs describe live buffers of this process of the stated lengths.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    // Reading itself proves little under Yama: scope 1 lets sibling ranks read each other
    // only because each rank names any tracer (the shm transport's start-up); scopes 2
    // and 3 refuse them whatever a rank does.
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0);
    n == 64 && dst == src && yama < 2
}

/// Long runs (4 KiB) and element runs (8 B), from ordinary and shared-heap buffers, with
/// the single copy on and off: the same bytes arrive, and the single copy is really taken
/// where it should be (heap: always; ordinary memory: long runs, and runs of 256 B one
/// after the other at the source, spread at the destination, if the kernel allows; not
/// 32 B runs).
fn single_copy_rank(w: &spools::World) -> Result<(), String> {
    let n = u64::from(w.size());
    let me = u64::from(w.rank());
    let cma = cma_allowed();
    for (from, to, long) in [
        ("block", "cyclic(512)", true),
        ("block", "cyclic", false),
        ("cyclic(32)", "block", true),
        ("cyclic(4)", "block", false),
    ] {
        let a = format!("f64[{}] {from} on {n}", 40_000 * n);
        let b = format!("f64[{}] {to} on {n}", 40_000 * n);
        let from: Layout = e(a.parse())?;
        let to: Layout = e(b.parse())?;
        let want = local(&to, me)?;
        for heap in [false, true] {
            for single_copy in [true, false] {
                let src = buffer(w, local(&from, me)?, heap)?;
                let mut got = buffer(w, vec![0u8; want.len()], heap)?;
                let opts = ExchangeOptions {
                    single_copy,
                    ..ExchangeOptions::default()
                };
                let st = spools_io::redistribute(
                    e(w.io_communicator())?,
                    &src,
                    &from,
                    &mut got,
                    &to,
                    &opts,
                )
                .map_err(|x| format!("{a} -> {b}: {x}"))?;
                let case = format!("{a} -> {b}, heap {heap}, single copy {single_copy}");
                if got[..] != want[..] {
                    return Err(format!("{case}: rank {me} got other bytes"));
                }
                let expect_pull = n > 1 && single_copy && (heap || (long && cma));
                if (st.pulled > 0) != expect_pull || (st.pulled > 0 && st.pulled != st.received) {
                    return Err(format!("{case}: rank {me}: {st:?}"));
                }
                // What left the ranks arrived, pulled or not.
                let mut sums = [0u64; 2];
                e(w.allreduce(&[st.sent, st.received], &mut sums, &spools::Op::Sum))?;
                if sums[0] != sums[1] || (n > 1 && sums[0] == 0) {
                    return Err(format!(
                        "{case}: sent {} bytes, received {}",
                        sums[0], sums[1]
                    ));
                }
            }
        }
    }
    println!("rank {me}: single copy checked (cma {cma})");
    Ok(())
}

#[test]
fn single_copy_on_and_off_move_the_same_bytes() {
    rank_main(|role| {
        assert_eq!(role, "single-copy");
        let w = e(spools::init())?;
        checked(&w, single_copy_rank);
        e(w.finalize())
    });
    for n in [1, 2, 3, 5] {
        let o = launch(
            n,
            "single_copy_on_and_off_move_the_same_bytes",
            "single-copy",
            &[],
        );
        assert_ok(&o);
        assert!(o.stdout.contains("single copy checked"), "{o:?}");
    }
}

/// Element runs (4, 8 and 16 bytes) in equally spaced progressions: 2-D block -> cyclic
/// and back in column order, every mix of ordinary and shared-heap buffers, with and
/// without the single copy and checksums, and transfer units that cut runs in two.
fn short_runs_rank(w: &spools::World) -> Result<(), String> {
    let n = u64::from(w.size());
    let me = u64::from(w.rank());
    for (dtype, rows) in [("f64", 96 * n + 5), ("f32", 64 * n), ("c128", 40 * n + 1)] {
        let block = format!("{dtype}[{rows},37] block,* on {n}x1 order=F");
        let cyclic = format!("{dtype}[{rows},37] cyclic,* on {n}x1 order=F");
        for (a, b) in [(&block, &cyclic), (&cyclic, &block)] {
            let from: Layout = e(a.parse())?;
            let to: Layout = e(b.parse())?;
            let want = local(&to, me)?;
            for kinds in 0..4u64 {
                for (single_copy, integrity, transfer_unit) in [
                    (true, false, 1 << 20),
                    (false, true, 1003),
                    (false, false, 4096),
                ] {
                    let src = buffer(w, local(&from, me)?, kinds & 1 != 0)?;
                    let mut got = buffer(w, vec![0u8; want.len()], kinds & 2 != 0)?;
                    let opts = ExchangeOptions {
                        integrity,
                        transfer_unit,
                        single_copy,
                        ..ExchangeOptions::default()
                    };
                    let case = format!("{a} -> {b}, buffers {kinds}, {opts:?}");
                    let st = spools_io::redistribute(
                        e(w.io_communicator())?,
                        &src,
                        &from,
                        &mut got,
                        &to,
                        &opts,
                    )
                    .map_err(|x| format!("{case}: {x}"))?;
                    if got[..] != want[..] {
                        let i = got.iter().zip(&want).position(|(x, y)| x != y).unwrap_or(0);
                        return Err(format!("{case}: rank {me} byte {i} differs"));
                    }
                    // Shared heap on both sides with the single copy: every byte from a
                    // peer is pulled.
                    let mut heap = [0u64; 1];
                    e(w.allreduce(&[u64::from(kinds == 3)], &mut heap, &spools::Op::Min))?;
                    if single_copy && heap[0] == 1 && st.pulled != st.received {
                        return Err(format!("{case}: rank {me}: {st:?}"));
                    }
                }
            }
        }
    }
    println!("rank {me}: short runs checked");
    Ok(())
}

#[test]
fn element_runs_move_between_every_kind_of_buffer() {
    rank_main(|role| {
        assert_eq!(role, "short-runs");
        let w = e(spools::init())?;
        checked(&w, short_runs_rank);
        e(w.finalize())
    });
    for n in [1, 3, 5] {
        let o = launch(
            n,
            "element_runs_move_between_every_kind_of_buffer",
            "short-runs",
            &[],
        );
        assert_ok(&o);
        assert!(o.stdout.contains("short runs checked"), "{o:?}");
    }
}
