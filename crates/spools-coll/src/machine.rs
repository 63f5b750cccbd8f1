//! The collectives as state machines over flag lines: one machine per rank, one memory
//! operation per step, never blocking.
//!
//! Every rank owns a `Gather` line (what comes up a tree: arrivals, partial reductions,
//! acknowledgements) and an `Inbox` line per child (what goes down: a bcast's data, the
//! end of a barrier; the flat shape has one `Release` line that every rank reads). A line
//! holds a
//! sequence number that only grows (the call it last stands for) and [`CELLS`] cells of
//! inline payload, call `s` in cell `s % CELLS`. A writer reuses a cell only once every
//! reader took what the cell held [`CELLS`] calls before (credits, looked at again only
//! when the cached view does not suffice), so no call waits for an acknowledgement of its
//! own.

use std::sync::Arc;

use crate::topology::Topology;
use crate::tree::Tree;

/// Payload cells per line (8 bytes each; with the sequence number, 40 of a line's 64).
pub const CELLS: usize = 4;

/// What a flag line holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Word {
    /// The call the line last stands for (0: none yet).
    pub seq: u64,
    /// Inline payload: call `s` in cell `s % CELLS`.
    pub cells: [u64; CELLS],
}

/// What a line is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Purpose {
    /// Down to every rank that reads it (the flat shape's result line).
    Release,
    /// Down a tree to one child, the given rank, which alone reads it: a parent pushes
    /// a release into each child's inbox, so that a child polls a line nobody else
    /// reads and the parent orders its children (the largest subtree first).
    Inbox(usize),
    /// Up the tree: arrivals, partial results and acknowledgements.
    Gather,
}

/// A flag line: its owner (the only rank that writes it) and purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Line {
    /// The rank that writes it.
    pub owner: usize,
    /// What it is for.
    pub purpose: Purpose,
}

/// The memory the machines run on: a simulated one ([`crate::sim`]) or a host's shared
/// segment.
pub trait Lines {
    /// Loads `line` (an acquire load).
    fn load(&mut self, line: Line) -> Word;
    /// Stores the calling rank's own `line` (a release store).
    fn store(&mut self, line: Line, word: Word);
}

/// What one step of a machine did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// A step was made: poll again.
    Ready,
    /// The line loaded last must change first.
    Pending,
    /// The call is over on this rank, with its result (a bcast's data, the reduction at
    /// the root, every rank's allreduce; 0 where a rank gets nothing).
    Done(u64),
}

/// A collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coll {
    /// No rank leaves before every rank arrived.
    Barrier,
    /// The root's 8 bytes to every rank.
    Bcast,
    /// The sum of every rank's 8 bytes at the root.
    Reduce,
    /// The sum at every rank.
    Allreduce,
    /// The sum of ranks 0 to `r` at every rank `r` (an inclusive scan), as the engine
    /// runs it whatever the shape: a chain in rank order (a rank waits for its left
    /// neighbour's gather line, which holds the prefix before it, and stores its own;
    /// it reuses a cell once its right neighbour stored the call that read it).
    Scan,
    /// The same inclusive scan by recursive doubling, as the engine runs it from
    /// [`SCAN_DOUBLING_MIN`] members whatever the shape: [`scan_rounds`] rounds, each a
    /// sequence number of its own; in round `k` a rank stores the fold of the (up to)
    /// `2^k` ranks ending at itself, then folds that of rank `r - 2^k` before its own. A
    /// cell is reused once its reader (`r + 2^k`) stored the round after the one that
    /// read it.
    ScanDoubling,
}

/// Members from which the engine scans by recursive doubling ([`Coll::ScanDoubling`],
/// `log2 P` rounds) rather than as a chain ([`Coll::Scan`], `P - 1` hops): the smallest
/// count at which the cost model finds doubling's critical path shorter in transfers and
/// never longer in nanoseconds, on every topology it knows (`tests/model.rs` asserts
/// it). At 4 and 8 it is shorter within a socket but longer on 2 sockets, where every
/// round crosses between them and the chain crosses once. The engine's segment creator
/// decides for all its members (and takes the chain where ranks outnumber CPUs).
pub const SCAN_DOUBLING_MIN: usize = 16;

/// Rounds (and sequence numbers) of a scan by recursive doubling among `members`:
/// `ceil(log2 members)`, at least 1.
///
/// ```
/// use spools_coll::scan_rounds;
/// assert_eq!((scan_rounds(1), scan_rounds(2), scan_rounds(5), scan_rounds(16)), (1, 1, 3, 4));
/// ```
#[must_use]
pub fn scan_rounds(members: usize) -> u32 {
    members.max(2).next_power_of_two().trailing_zeros()
}

/// How the ranks are connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// Today's engine (`spools-msg`'s `coll/sm`, as it reads): every rank posts after
    /// looking at every member's line, the root folds the members in rank order and
    /// publishes, and every post and publish wakes every member (a look at each line).
    Flat {
        /// The root.
        root: usize,
    },
    /// Gather over a tree (a parent reads its children's lines, the smallest subtree
    /// first), release pushed down it (a parent writes each child's inbox, the largest
    /// subtree first), with lagged credits.
    Tree(Tree),
}

impl Shape {
    /// The flat shape rooted at `root`.
    pub fn flat(root: usize) -> Shape {
        Shape::Flat { root }
    }

    /// The tree by levels of `topo` ([`Tree::hierarchical`]) of radix `radix`.
    pub fn tree(topo: &Topology, root: usize, radix: usize) -> Shape {
        Shape::Tree(Tree::hierarchical(topo, root, radix))
    }

    fn root(&self) -> usize {
        match self {
            Shape::Flat { root } => *root,
            Shape::Tree(t) => t.root(),
        }
    }
}

/// Result slots a flat bcast's root cycles through before it needs the members' posts.
const FLAT_OUTS: u64 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Flat: every member's post at least `s - lag`.
    LookAll { lag: u64 },
    /// Flat root: fold every member's post of this call, in rank order.
    FoldMembers,
    /// Flat: one look at every other member's line (the wake-up).
    WakeAll,
    /// Tree: the credit for call `seq + ahead` (bcast: the children's acknowledgements;
    /// reduce: the parent's gather).
    Credits { ahead: u64 },
    /// Tree: every child's gather of this call, folded.
    GatherChildren,
    /// Store the own gather line.
    PublishGather,
    /// Wait for the parent's (flat: the root's) release of this call.
    WaitRelease,
    /// Scan: the left neighbour's gather line of this call, its prefix folded in.
    WaitLeft,
    /// Doubling scan, round `k`: the credit for this round's cell (its reader, rank
    /// `r + 2^k'`, stored the round after the one that last read it).
    RoundCredit { k: u32 },
    /// Doubling scan: store the own gather line for round `k`.
    RoundPublish { k: u32 },
    /// Doubling scan: rank `r - 2^k`'s gather line of round `k`, folded in before.
    RoundLeft { k: u32 },
    /// Store the own release line (flat).
    PublishRelease,
    /// Store each child's inbox, the largest subtree first (tree).
    PushRelease,
    /// Over.
    Done,
}

/// One rank's side of a run of collectives of one kind over one shape: [`Machine::start`]
/// a call, then [`Machine::poll`] it until it is done.
///
/// ```
/// use spools_coll::{Coll, Machine, Poll, Shape, Tree};
/// use std::sync::Arc;
/// // A bcast on one rank needs no memory.
/// let mut m = Machine::new(Arc::new(Shape::Tree(Tree::knomial(1, 0, 2))), Coll::Bcast, 0);
/// struct Nothing;
/// impl spools_coll::Lines for Nothing {
///     fn load(&mut self, _: spools_coll::Line) -> spools_coll::Word { Default::default() }
///     fn store(&mut self, _: spools_coll::Line, _: spools_coll::Word) {}
/// }
/// m.start(42);
/// let mut out = Poll::Ready;
/// while out == Poll::Ready { out = m.poll(&mut Nothing); }
/// assert_eq!(out, Poll::Done(42));
/// ```
#[derive(Debug, Clone)]
pub struct Machine {
    shape: Arc<Shape>,
    coll: Coll,
    rank: usize,
    n: usize,
    seq: u64,
    value: u64,
    steps: Vec<Step>,
    at: usize,
    /// The next child (member) to look at in the current step.
    idx: usize,
    release: Word,
    gather: Word,
    /// The least sequence number seen on the lines this rank needs credit from.
    credit: u64,
    /// Per child (member), the sequence number last seen on its line (a doubling scan:
    /// per round, its reader's).
    seen: Vec<u64>,
}

impl Machine {
    /// Rank `rank`'s machine for `coll` over `shape`.
    pub fn new(shape: Arc<Shape>, coll: Coll, rank: usize) -> Machine {
        let n = match &*shape {
            Shape::Tree(t) => t.ranks(),
            Shape::Flat { .. } => 0,
        };
        Machine {
            shape,
            coll,
            rank,
            n,
            seq: 0,
            value: 0,
            steps: Vec::new(),
            at: 0,
            idx: 0,
            release: Word::default(),
            gather: Word::default(),
            credit: 0,
            seen: Vec::new(),
        }
    }

    /// The flat shape's machine, which needs the number of ranks.
    pub fn flat(root: usize, ranks: usize, coll: Coll, rank: usize) -> Machine {
        let mut m = Machine::new(Arc::new(Shape::flat(root)), coll, rank);
        m.n = ranks;
        m
    }

    /// The call in progress (from 1).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Starts the next call with this rank's 8 bytes (the root's for a bcast).
    pub fn start(&mut self, value: u64) {
        self.seq += 1;
        self.value = value;
        self.at = 0;
        self.idx = 0;
        let root = self.shape.root();
        let me = self.rank;
        let is_root = me == root;
        use Step::*;
        self.steps = match (&*self.shape, self.coll) {
            // The chain: the credit (the right neighbour stored the call that last used
            // this rank's cell) is looked at once the left neighbour's prefix is in.
            (_, Coll::Scan) if me == 0 => vec![Credits { ahead: 0 }, PublishGather],
            (_, Coll::Scan) => vec![WaitLeft, Credits { ahead: 0 }, PublishGather],
            (_, Coll::ScanDoubling) => (0..self.rounds())
                .flat_map(|k| [RoundCredit { k }, RoundPublish { k }, RoundLeft { k }])
                .collect(),
            (Shape::Flat { .. }, Coll::Bcast) if is_root => {
                vec![LookAll { lag: FLAT_OUTS - 1 }, PublishRelease, WakeAll]
            }
            (Shape::Flat { .. }, Coll::Bcast) => vec![WaitRelease, PublishGather, WakeAll],
            (Shape::Flat { .. }, _) if is_root => vec![
                LookAll { lag: 1 },
                PublishGather,
                FoldMembers,
                PublishRelease,
                WakeAll,
            ],
            (Shape::Flat { .. }, _) => {
                vec![LookAll { lag: 1 }, PublishGather, WakeAll, WaitRelease]
            }
            // Credits are looked at where a rank has time: the root after its release, for
            // the next call; the others before they wait for theirs. The acknowledgement
            // (the own gather line) goes after the children's releases.
            (Shape::Tree(_), Coll::Bcast) if is_root => {
                vec![Credits { ahead: 0 }, PushRelease, Credits { ahead: 1 }]
            }
            (Shape::Tree(_), Coll::Bcast) => vec![
                Credits { ahead: 0 },
                WaitRelease,
                PushRelease,
                PublishGather,
            ],
            (Shape::Tree(_), Coll::Reduce) if is_root => vec![GatherChildren, PublishGather],
            // A contributor returns once its part is in its line: the credit for the next
            // call is looked at after it.
            (Shape::Tree(_), Coll::Reduce) => vec![
                Credits { ahead: 0 },
                GatherChildren,
                PublishGather,
                Credits { ahead: 1 },
            ],
            (Shape::Tree(_), Coll::Barrier | Coll::Allreduce) if is_root => {
                vec![GatherChildren, PushRelease]
            }
            (Shape::Tree(_), Coll::Barrier | Coll::Allreduce) => {
                vec![GatherChildren, PublishGather, WaitRelease, PushRelease]
            }
        };
        self.steps.push(Done);
        let others = match (&*self.shape, self.coll) {
            (_, Coll::ScanDoubling) => self.rounds() as usize,
            (Shape::Tree(t), _) => t.children(me).len(),
            (Shape::Flat { .. }, _) => self.n,
        };
        self.seen.resize(others, 0);
    }

    /// The lines this rank looks at in a step over children (members).
    fn child(&self, i: usize, purpose: Purpose) -> Option<Line> {
        let owner = match &*self.shape {
            Shape::Tree(t) => *t.children(self.rank).get(i)?,
            Shape::Flat { .. } => {
                if i >= self.n {
                    return None;
                }
                i
            }
        };
        Some(Line { owner, purpose })
    }

    fn parent(&self) -> Option<usize> {
        match &*self.shape {
            Shape::Tree(t) => t.parent(self.rank),
            Shape::Flat { root } => (self.rank != *root).then_some(*root),
        }
    }

    /// Ranks in the shape.
    fn ranks(&self) -> usize {
        match &*self.shape {
            Shape::Tree(t) => t.ranks(),
            Shape::Flat { .. } => self.n,
        }
    }

    fn cell(&self) -> usize {
        (self.seq % CELLS as u64) as usize
    }

    /// A doubling scan's rounds.
    fn rounds(&self) -> u32 {
        scan_rounds(self.ranks())
    }

    /// A doubling scan's sequence number for round `k` of the call in progress (each
    /// call takes [`Machine::rounds`] of them, from 1).
    fn round_seq(&self, k: u32) -> u64 {
        (self.seq - 1) * u64::from(self.rounds()) + u64::from(k) + 1
    }

    /// Makes one step of the call: at most one load or store.
    pub fn poll(&mut self, mem: &mut dyn Lines) -> Poll {
        let s = self.seq;
        let Some(&step) = self.steps.get(self.at) else {
            return Poll::Done(self.value);
        };
        let next = |m: &mut Machine| {
            m.at += 1;
            m.idx = 0;
            Poll::Ready
        };
        match step {
            Step::Done => Poll::Done(match (self.coll, self.rank == self.shape.root()) {
                (Coll::Barrier, _) | (Coll::Reduce, false) => 0,
                _ => self.value,
            }),
            Step::LookAll { lag } => {
                if self.idx == self.rank {
                    self.idx += 1;
                }
                let Some(line) = self.child(self.idx, Purpose::Gather) else {
                    return next(self);
                };
                // The least call every member must have posted; members whose post
                // this rank already saw that far are not looked at again.
                let need = s.saturating_sub(lag);
                if self.seen[self.idx] >= need {
                    self.idx += 1;
                    return Poll::Ready;
                }
                let w = mem.load(line);
                self.seen[self.idx] = w.seq;
                if w.seq < need {
                    return Poll::Pending;
                }
                self.idx += 1;
                Poll::Ready
            }
            Step::FoldMembers => {
                if self.idx == self.rank {
                    self.idx += 1;
                }
                let Some(line) = self.child(self.idx, Purpose::Gather) else {
                    return next(self);
                };
                let w = mem.load(line);
                self.seen[self.idx] = w.seq;
                if w.seq < s {
                    return Poll::Pending;
                }
                self.value = self.value.wrapping_add(w.cells[self.cell()]);
                self.idx += 1;
                Poll::Ready
            }
            Step::WakeAll => {
                if self.idx == self.rank {
                    self.idx += 1;
                }
                let Some(line) = self.child(self.idx, Purpose::Gather) else {
                    return next(self);
                };
                let w = mem.load(line);
                self.seen[self.idx] = w.seq;
                self.idx += 1;
                Poll::Ready
            }
            Step::Credits { ahead } => self.credits(mem, ahead, next),
            Step::RoundCredit { k } => {
                // The cell of round sequence t was last written at t - CELLS, in round
                // k', and read by rank r + 2^k', which stores t - CELLS + 1 after.
                let t = self.round_seq(k);
                let Some(last) = t.checked_sub(CELLS as u64).filter(|&l| l > 0) else {
                    return next(self);
                };
                let kk = ((last - 1) % u64::from(self.rounds())) as usize;
                let reader = self.rank + (1 << kk);
                if reader >= self.ranks() || self.seen[kk] > last {
                    return next(self);
                }
                let w = mem.load(Line {
                    owner: reader,
                    purpose: Purpose::Gather,
                });
                self.seen[kk] = w.seq;
                if w.seq <= last {
                    return Poll::Pending;
                }
                next(self)
            }
            Step::RoundPublish { k } => {
                let t = self.round_seq(k);
                self.gather.seq = t;
                self.gather.cells[(t % CELLS as u64) as usize] = self.value;
                let line = Line {
                    owner: self.rank,
                    purpose: Purpose::Gather,
                };
                mem.store(line, self.gather);
                next(self)
            }
            Step::RoundLeft { k } => {
                let Some(left) = self.rank.checked_sub(1 << k) else {
                    return next(self);
                };
                let t = self.round_seq(k);
                let w = mem.load(Line {
                    owner: left,
                    purpose: Purpose::Gather,
                });
                if w.seq < t {
                    return Poll::Pending;
                }
                self.value = w.cells[(t % CELLS as u64) as usize].wrapping_add(self.value);
                next(self)
            }
            Step::GatherChildren => {
                // The smallest subtrees first: they are ready first.
                let k = match &*self.shape {
                    Shape::Tree(t) => t.children(self.rank).len(),
                    Shape::Flat { .. } => 0,
                };
                let Some(line) = self
                    .idx
                    .checked_add(1)
                    .and_then(|i| k.checked_sub(i))
                    .and_then(|i| self.child(i, Purpose::Gather))
                else {
                    return next(self);
                };
                let w = mem.load(line);
                if w.seq < s {
                    return Poll::Pending;
                }
                if self.coll != Coll::Barrier {
                    self.value = self.value.wrapping_add(w.cells[self.cell()]);
                }
                self.idx += 1;
                Poll::Ready
            }
            Step::PublishGather => {
                let c = self.cell();
                self.gather.seq = s;
                self.gather.cells[c] = self.value;
                let line = Line {
                    owner: self.rank,
                    purpose: Purpose::Gather,
                };
                mem.store(line, self.gather);
                next(self)
            }
            Step::WaitLeft => {
                let Some(left) = self.rank.checked_sub(1) else {
                    return next(self);
                };
                let w = mem.load(Line {
                    owner: left,
                    purpose: Purpose::Gather,
                });
                if w.seq < s {
                    return Poll::Pending;
                }
                self.value = w.cells[self.cell()].wrapping_add(self.value);
                next(self)
            }
            Step::WaitRelease => {
                let Some(p) = self.parent() else {
                    return next(self);
                };
                let purpose = match &*self.shape {
                    Shape::Flat { .. } => Purpose::Release,
                    Shape::Tree(_) => Purpose::Inbox(self.rank),
                };
                let w = mem.load(Line { owner: p, purpose });
                if w.seq < s {
                    return Poll::Pending;
                }
                if self.coll != Coll::Barrier {
                    self.value = w.cells[self.cell()];
                }
                next(self)
            }
            Step::PushRelease => {
                let Some(Line { owner: child, .. }) = self.child(self.idx, Purpose::Gather) else {
                    return next(self);
                };
                if self.idx == 0 {
                    let c = self.cell();
                    self.release.seq = s;
                    self.release.cells[c] = self.value;
                }
                let line = Line {
                    owner: self.rank,
                    purpose: Purpose::Inbox(child),
                };
                mem.store(line, self.release);
                self.idx += 1;
                Poll::Ready
            }
            Step::PublishRelease => {
                let c = self.cell();
                self.release.seq = s;
                self.release.cells[c] = self.value;
                let line = Line {
                    owner: self.rank,
                    purpose: Purpose::Release,
                };
                mem.store(line, self.release);
                next(self)
            }
        }
    }

    /// A tree's credit before a cell is reused: for a bcast, every child took call
    /// `s - CELLS` from its inbox (their gather lines, the acknowledgements, say so); for a
    /// reduce, the parent folded call `s - CELLS` from this rank's gather line (its gather
    /// line says so); for a scan, the right neighbour took it (it stored that call). The
    /// least sequence number seen is cached: lines are looked at only when it does not
    /// suffice.
    fn credits(
        &mut self,
        mem: &mut dyn Lines,
        ahead: u64,
        next: impl Fn(&mut Machine) -> Poll,
    ) -> Poll {
        let need = (self.seq + ahead).saturating_sub(CELLS as u64);
        if self.credit >= need {
            return next(self);
        }
        if matches!(self.coll, Coll::Reduce | Coll::Scan) {
            let reader = match self.coll {
                Coll::Scan => Some(self.rank + 1).filter(|&r| r < self.ranks()),
                _ => self.parent(),
            };
            let Some(p) = reader else {
                return next(self);
            };
            let w = mem.load(Line {
                owner: p,
                purpose: Purpose::Gather,
            });
            self.credit = w.seq;
            if w.seq < need {
                return Poll::Pending;
            }
            return next(self);
        }
        let Some(line) = self.child(self.idx, Purpose::Gather) else {
            self.credit = self.seen.iter().copied().min().unwrap_or(u64::MAX);
            return next(self);
        };
        if self.seen[self.idx] >= need {
            self.idx += 1;
            return Poll::Ready;
        }
        let w = mem.load(line);
        self.seen[self.idx] = w.seq;
        if w.seq < need {
            return Poll::Pending;
        }
        self.idx += 1;
        Poll::Ready
    }
}
