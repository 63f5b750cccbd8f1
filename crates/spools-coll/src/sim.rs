//! The cost model: the machines run over a simulated shared memory that counts cache-line
//! transfers.
//!
//! Each rank runs on its own core of a [`Topology`]. A core holds a copy of a line once it
//! loaded or stored it; a store takes every other copy away. A load of a line the core
//! holds costs nothing; any other load is a transfer from the nearest core holding it,
//! and a store to a line other cores hold is one transfer (taking their copies) before
//! the value is visible, which the storing core does not wait for (its store buffer). A line
//! serves one transfer at a time, and a core makes one at a time, so a root that reads 63
//! lines, or a line that 63 cores read, costs 63 transfers in a row. Time is discrete
//! events: the rank with the least time makes the next memory operation; a rank waiting
//! for a line goes on when its owner stores it.
//!
//! [`Cost::Transfers`] counts each transfer as 1 (the critical path in transfers);
//! [`Cost::Nanos`] weighs them by distance (40 ns within an L3 group, 80 across a
//! socket, 150 across sockets: the range measured on current servers).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::machine::{Coll, Line, Lines, Machine, Poll, Shape, Word, CELLS};
use crate::topology::{Distance, Topology};

/// How a transfer is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cost {
    /// 1 per transfer.
    Transfers,
    /// Nanoseconds by distance (40 / 80 / 150).
    Nanos,
}

impl Cost {
    fn of(self, d: Distance) -> u64 {
        match (self, d) {
            (_, Distance::Same) => 0,
            (Cost::Transfers, _) => 1,
            (Cost::Nanos, Distance::SameL3) => 40,
            (Cost::Nanos, Distance::SameSocket) => 80,
            (Cost::Nanos, Distance::CrossSocket) => 150,
        }
    }
}

/// What a run of calls cost, per call (means over the measured calls).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measure {
    /// From the common start of a call to the last rank's end.
    pub critical: f64,
    /// From the start to the root's end.
    pub root: f64,
    /// Transfers of all ranks.
    pub transfers: f64,
}

/// One call of a [`run`].
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Each rank's result.
    pub results: Vec<u64>,
    /// When each rank started it.
    pub starts: Vec<u64>,
    /// When each rank was done.
    pub finishes: Vec<u64>,
    /// What it cost.
    pub measure: Measure,
}

/// Ranks waited for lines that nobody would store: the algorithm is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deadlock {
    /// The call.
    pub call: u64,
    /// The ranks still waiting.
    pub waiting: Vec<usize>,
}

/// Stores a core has in flight at once (its line fill buffers): the next one becomes
/// visible only after the oldest.
const IN_FLIGHT: usize = 8;

struct State {
    word: Word,
    written: u64,
    busy: u64,
    holders: Vec<bool>,
}

/// The simulated memory, seen from rank `me`.
struct Memory<'a> {
    topo: &'a Topology,
    cost: Cost,
    lines: HashMap<Line, State>,
    clock: Vec<u64>,
    /// Per core, when its stores in flight become visible.
    flight: Vec<std::collections::VecDeque<u64>>,
    transfers: u64,
    me: usize,
    loaded: Option<Line>,
    stored: Option<Line>,
}

impl Memory<'_> {
    fn state(&mut self, line: Line) -> &mut State {
        let n = self.topo.ranks();
        self.lines.entry(line).or_insert_with(|| {
            let mut holders = vec![false; n];
            if let Some(h) = holders.get_mut(line.owner) {
                *h = true;
            }
            State {
                word: Word::default(),
                written: 0,
                busy: 0,
                holders,
            }
        })
    }
}

impl Lines for Memory<'_> {
    fn load(&mut self, line: Line) -> Word {
        let (me, topo, cost) = (self.me, self.topo, self.cost);
        let now = self.clock[me];
        let st = self.state(line);
        if st.holders[me] {
            let w = st.word;
            self.loaded = Some(line);
            return w;
        }
        // From the nearest core holding it.
        let d = (0..st.holders.len())
            .filter(|&h| st.holders[h])
            .map(|h| topo.distance(me, h))
            .min()
            .unwrap_or(Distance::CrossSocket);
        let done = now.max(st.busy).max(st.written) + cost.of(d);
        st.busy = done;
        st.holders[me] = true;
        let w = st.word;
        self.clock[me] = done;
        self.transfers += 1;
        self.loaded = Some(line);
        w
    }

    fn store(&mut self, line: Line, word: Word) {
        let (me, topo, cost) = (self.me, self.topo, self.cost);
        let now = self.clock[me];
        // The store leaves through the core's store buffer: the core goes on at once, and
        // the value is visible once the other copies are gone, after the oldest of the
        // core's stores in flight when it has [`IN_FLIGHT`].
        let q = &mut self.flight[me];
        while q.front().is_some_and(|&t| t <= now) {
            q.pop_front();
        }
        let after = match q.len().checked_sub(IN_FLIGHT) {
            Some(i) => q.get(i).copied().unwrap_or(now),
            None => now,
        };
        let st = self.state(line);
        let far = (0..st.holders.len())
            .filter(|&h| h != me && st.holders[h])
            .map(|h| topo.distance(me, h))
            .max();
        let visible = match far {
            Some(d) => after.max(st.busy) + cost.of(d),
            None => now,
        };
        st.busy = st.busy.max(visible);
        st.holders.iter_mut().for_each(|h| *h = false);
        st.holders[me] = true;
        st.word = word;
        st.written = visible;
        if far.is_some() {
            self.flight[me].push_back(visible);
            self.transfers += 1;
        }
        self.stored = Some(line);
    }
}

/// Runs `calls` calls of `coll` over `shape` on `topo`'s ranks. Before call `s` (from 1)
/// every rank's time is set to the common start plus `offset(rank, s)`; rank `r` brings
/// `input(r, s)`. Returns each call: every rank's result, start and end, and its cost.
///
/// # Errors
/// [`Deadlock`] when ranks wait for lines nobody stores.
pub fn run(
    topo: &Topology,
    shape: &Shape,
    coll: Coll,
    cost: Cost,
    calls: u64,
    offset: &dyn Fn(usize, u64) -> u64,
    input: &dyn Fn(usize, u64) -> u64,
) -> Result<Vec<Call>, Deadlock> {
    let n = topo.ranks();
    let shape = Arc::new(shape.clone());
    let root = match &*shape {
        Shape::Flat { root } => *root,
        Shape::Tree(t) => t.root(),
    };
    let mut machines: Vec<Machine> = (0..n)
        .map(|r| match &*shape {
            Shape::Flat { root } => Machine::flat(*root, n, coll, r),
            Shape::Tree(_) => Machine::new(shape.clone(), coll, r),
        })
        .collect();
    let mut mem = Memory {
        topo,
        cost,
        lines: HashMap::new(),
        clock: vec![0; n],
        flight: vec![std::collections::VecDeque::new(); n],
        transfers: 0,
        me: 0,
        loaded: None,
        stored: None,
    };
    let mut out = Vec::new();
    for s in 1..=calls {
        let start = mem.clock.iter().copied().max().unwrap_or(0);
        let before = mem.transfers;
        let mut runnable = BTreeSet::new();
        let mut waiting: HashMap<Line, Vec<usize>> = HashMap::new();
        let mut results = vec![0; n];
        let mut finish = vec![start; n];
        let mut starts = vec![start; n];
        for (r, m) in machines.iter_mut().enumerate() {
            mem.clock[r] = start + offset(r, s);
            starts[r] = mem.clock[r];
            m.start(input(r, s));
            runnable.insert((mem.clock[r], r));
        }
        let mut done = 0;
        while let Some((_, r)) = runnable.pop_first() {
            mem.me = r;
            mem.loaded = None;
            mem.stored = None;
            match machines[r].poll(&mut mem) {
                Poll::Ready => {
                    runnable.insert((mem.clock[r], r));
                }
                Poll::Pending => match mem.loaded {
                    Some(l) => waiting.entry(l).or_default().push(r),
                    None => {
                        return Err(Deadlock {
                            call: s,
                            waiting: vec![r],
                        })
                    }
                },
                Poll::Done(v) => {
                    results[r] = v;
                    finish[r] = mem.clock[r];
                    done += 1;
                }
            }
            if let Some(l) = mem.stored {
                for w in waiting.remove(&l).unwrap_or_default() {
                    runnable.insert((mem.clock[w], w));
                }
            }
        }
        if done < n {
            let mut w: Vec<usize> = waiting.into_values().flatten().collect();
            w.sort_unstable();
            return Err(Deadlock {
                call: s,
                waiting: w,
            });
        }
        let last = finish.iter().copied().max().unwrap_or(start);
        out.push(Call {
            results,
            starts,
            measure: Measure {
                critical: (last - start) as f64,
                root: (finish[root] - start) as f64,
                transfers: (mem.transfers - before) as f64,
            },
            finishes: finish,
        });
    }
    Ok(out)
}

/// The steady-state cost of one call: `2 * CELLS` calls to warm up, then the mean of
/// `4 * CELLS` calls, each started by every rank at once (as after a barrier). A
/// deadlock (a wrong algorithm) is a measure of infinite cost.
pub fn measure(topo: &Topology, shape: Shape, coll: Coll, cost: Cost) -> Measure {
    let warm = 2 * CELLS as u64;
    let calls = warm + 4 * CELLS as u64;
    let none = |_: usize, _: u64| 0;
    let Ok(runs) = run(topo, &shape, coll, cost, calls, &none, &none) else {
        return Measure {
            critical: f64::INFINITY,
            root: f64::INFINITY,
            transfers: f64::INFINITY,
        };
    };
    let m = &runs[warm as usize..];
    let mean =
        |f: fn(&Measure) -> f64| m.iter().map(|c| f(&c.measure)).sum::<f64>() / m.len() as f64;
    Measure {
        critical: mean(|x| x.critical),
        root: mean(|x| x.root),
        transfers: mean(|x| x.transfers),
    }
}
