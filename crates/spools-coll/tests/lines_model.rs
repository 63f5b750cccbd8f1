//! The trees' flag-line protocol under a model checker (loom): the real [`Machine`]s of
//! barrier, bcast, reduce, allreduce and scan, one thread per rank, over flag lines made of
//! loom's words as a host's segment would hold them, in every interleaving up to a
//! preemption bound and every outcome of the memory orderings loom models.
//!
//! The simulated memory of the cost model (`spools_coll::sim`) loads and stores a line as
//! one whole; a real line is several words. Here a store writes the cell of the call its
//! rank is in (relaxed) and then the sequence number (release), and a load reads the
//! sequence number (acquire) and then that cell (relaxed), so a reader may find a cell
//! that its writer has already reused for a later call. The runs have one call more than
//! a line has [`CELLS`], so that the last call reuses the first call's cell: a bcast's
//! root and a reduce's contributor may run that far ahead, and a credit taken too early
//! (a writer that reuses the cell before its reader took what it held) gives a rank
//! another call's value, which fails an assertion. (Barrier and allreduce keep two ranks
//! within a call of each other, so at two ranks they reuse no cell before it is read:
//! their model checks the values and that nobody leaves early.) A rank that waits for a
//! store that never comes spins on `yield_now` for good, which fails the run (loom runs
//! out of branches). The last test shows that the check is not vacuous: with the
//! sequence number stored relaxed, loom finds a reader that takes a stale cell. So does
//! a credit taken one call early (`CELLS + 1` for `CELLS` in `Machine::credits`), tried by
//! hand, not kept as a test: the bcast's child then gets call 5's value in call 1 (and
//! for the scan alone, rank 1 a later call's prefix in call 1).
//!
//! What is not checked: trees of three ranks or more (a rank with both a parent and a
//! child; loom found no end to them in a minute even at a preemption bound of 1: a
//! bcast's root runs up to [`CELLS`] calls ahead, and every look of the waiting rank may
//! see any of those stores), and the flat shape (today's engine as the model reads it),
//! which reuses a result cell only after 64 calls. Nor is this the messaging engine's
//! own flag protocol (`spools-msg`'s `coll/sm`), which does not run these machines yet.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use loom::sync::atomic::{AtomicU64, AtomicUsize};
use loom::sync::Arc;
use spools_coll::{Coll, Line, Lines, Machine, Poll, Purpose, Shape, Tree, Word, CELLS};

/// One flag line of the segment: a sequence number and the payload cells.
struct LoomLine {
    seq: AtomicU64,
    cells: [AtomicU64; CELLS],
}

impl LoomLine {
    fn new() -> LoomLine {
        LoomLine {
            seq: AtomicU64::new(0),
            cells: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The segment: every line of the tree, and per call how many ranks entered it.
struct Segment {
    lines: BTreeMap<Line, LoomLine>,
    entered: Vec<AtomicUsize>,
    /// How the sequence number is stored (`Release`; `Relaxed` for the negative check).
    publish: Ordering,
}

/// One rank's view of the segment: the [`Lines`] the machines run on. As an engine would,
/// it moves only the cell of the call its machine is in (`call`, set before each poll):
/// a store writes that cell and then the sequence number, a load reads the sequence number
/// and then that cell (the other cells of the word it returns are 0).
struct View {
    seg: Arc<Segment>,
    rank: usize,
    call: u64,
}

impl Lines for View {
    fn load(&mut self, line: Line) -> Word {
        let l = &self.seg.lines[&line];
        let seq = l.seq.load(Ordering::Acquire);
        let c = cell(self.call);
        let mut cells = [0; CELLS];
        cells[c] = l.cells[c].load(Ordering::Relaxed);
        Word { seq, cells }
    }

    fn store(&mut self, line: Line, word: Word) {
        assert_eq!(line.owner, self.rank, "a rank stores only its own lines");
        let l = &self.seg.lines[&line];
        let c = cell(self.call);
        assert_eq!(
            word.seq, self.call,
            "a rank stores a line for the call it is in"
        );
        l.cells[c].store(word.cells[c], Ordering::Relaxed);
        l.seq.store(word.seq, self.seg.publish);
    }
}

/// The cell of call `s`.
fn cell(s: u64) -> usize {
    (s % CELLS as u64) as usize
}

/// Every line a tree's machines touch: each rank's gather line, each child's inbox.
fn lines_of(tree: &Tree) -> BTreeMap<Line, LoomLine> {
    let mut m = BTreeMap::new();
    for r in 0..tree.ranks() {
        let purpose = Purpose::Gather;
        m.insert(Line { owner: r, purpose }, LoomLine::new());
        for &c in tree.children(r) {
            let purpose = Purpose::Inbox(c);
            m.insert(Line { owner: r, purpose }, LoomLine::new());
        }
    }
    m
}

/// Rank `r`'s 8 bytes in call `s`.
fn input(r: usize, s: u64) -> u64 {
    s * 1_000 + r as u64 * 10 + 1
}

/// Runs `calls` calls of `coll` over `tree`, one loom thread per rank, and checks every
/// rank's result of every call.
fn check(tree: &Tree, coll: Coll, calls: u64, publish: Ordering, bound: usize) {
    let tree = tree.clone();
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(bound);
    b.max_branches = 1_000_000;
    b.check(move || {
        let n = tree.ranks();
        let root = tree.root();
        let seg = Arc::new(Segment {
            lines: lines_of(&tree),
            entered: (0..calls).map(|_| AtomicUsize::new(0)).collect(),
            publish,
        });
        let shape = std::sync::Arc::new(Shape::Tree(tree.clone()));
        let mut threads = Vec::new();
        for r in 0..n {
            let seg = Arc::clone(&seg);
            let shape = std::sync::Arc::clone(&shape);
            threads.push(loom::thread::spawn(move || {
                let mut view = View {
                    seg,
                    rank: r,
                    call: 0,
                };
                let mut m = Machine::new(shape, coll, r);
                for s in 1..=calls {
                    // Relaxed: the count adds no order between the ranks that the real
                    // engine lacks; a rank that left the call after everyone's release
                    // chain reached it sees every increment made before it (coherence).
                    if matches!(coll, Coll::Barrier | Coll::Allreduce) {
                        let entered = &view.seg.entered[(s - 1) as usize];
                        entered.fetch_add(1, Ordering::Relaxed);
                    }
                    m.start(input(r, s));
                    view.call = s;
                    let got = loop {
                        match m.poll(&mut view) {
                            Poll::Ready => {}
                            Poll::Pending => loom::thread::yield_now(),
                            Poll::Done(v) => break v,
                        }
                    };
                    let sum = (0..n).fold(0u64, |a, q| a.wrapping_add(input(q, s)));
                    let want = match coll {
                        Coll::Barrier => 0,
                        Coll::Bcast => input(root, s),
                        Coll::Reduce if r == root => sum,
                        Coll::Reduce => 0,
                        Coll::Allreduce => sum,
                        Coll::Scan | Coll::ScanDoubling => {
                            (0..=r).fold(0u64, |a, q| a.wrapping_add(input(q, s)))
                        }
                    };
                    assert_eq!(got, want, "{coll:?}: rank {r}, call {s}");
                    if matches!(coll, Coll::Barrier | Coll::Allreduce) {
                        let all = view.seg.entered[(s - 1) as usize].load(Ordering::Relaxed);
                        assert_eq!(all, n, "{coll:?}: rank {r} left call {s} early");
                    }
                }
            }));
        }
        for t in threads {
            t.join().unwrap();
        }
    });
}

/// One call more than a line has cells: the last call reuses the first call's cell.
const CALLS: u64 = CELLS as u64 + 1;

/// Two ranks, one the other's parent, rooted at `root`.
fn pair(root: usize) -> Tree {
    Tree::knomial(2, root, 2)
}

// The models run in release builds (scripts/test.sh runs them so; a debug build takes
// minutes for each): `cargo test --release -p spools-coll --test lines_model`.

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "minutes in a debug build: run with --release"
)]
fn bcast_reuses_inbox_cells_only_after_the_acknowledgements() {
    check(&pair(0), Coll::Bcast, CALLS, Ordering::Release, 1);
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "minutes in a debug build: run with --release"
)]
fn reduce_reuses_gather_cells_only_after_the_parent_folded_them() {
    check(&pair(1), Coll::Reduce, CALLS, Ordering::Release, 1);
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "seconds in a debug build: run with --release"
)]
fn allreduce_and_barrier_release_nobody_early() {
    check(&pair(0), Coll::Allreduce, CALLS, Ordering::Release, 2);
    check(&pair(1), Coll::Barrier, CALLS, Ordering::Release, 2);
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "minutes in a debug build: run with --release"
)]
fn scan_reuses_a_cell_only_after_the_right_neighbour_took_it() {
    check(&pair(0), Coll::Scan, CALLS, Ordering::Release, 1);
}

/// The doubling scan's round lines (two ranks: one round a call, its own sequence number):
/// a cell is reused only once its reader stored the round after the one that read it.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "minutes in a debug build: run with --release"
)]
fn doubling_scan_reuses_a_cell_only_after_its_reader_went_on() {
    check(&pair(0), Coll::ScanDoubling, CALLS, Ordering::Release, 1);
}

#[test]
#[should_panic(expected = "Bcast: rank 1, call")]
fn a_relaxed_sequence_number_lets_a_reader_take_a_stale_cell() {
    check(&pair(0), Coll::Bcast, 2, Ordering::Relaxed, 2);
}
