//! Prints the cost model's table: critical path and total transfers per call of each
//! collective, today's flat shape against trees, on three topologies (the scans, chain and
//! doubling, are the same in every shape: their three columns agree).
//!
//! `cargo run --release -p spools-coll --example model_table`

use spools_coll::sim::{measure, Cost};
use spools_coll::{Coll, Shape, Topology};

/// A topology of a given number of ranks.
type Maker = fn(usize) -> Topology;

fn main() {
    let topos: [(&str, Maker); 3] = [
        ("flat", Topology::flat),
        ("2 sockets", |p| Topology::sockets(p, 2)),
        ("L3 groups of 8", |p| Topology::l3_groups(p, 8, 4)),
    ];
    println!("| topology | ranks | collective | flat: critical / total transfers | tree radix 2 | tree radix 4 | flat ns | tree-2 ns | tree-4 ns |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, topo) in topos {
        for p in [2, 4, 8, 16, 64, 256] {
            let t = topo(p);
            for coll in [
                Coll::Barrier,
                Coll::Bcast,
                Coll::Reduce,
                Coll::Allreduce,
                Coll::Scan,
                Coll::ScanDoubling,
            ] {
                let shapes = [Shape::flat(0), Shape::tree(&t, 0, 2), Shape::tree(&t, 0, 4)];
                let tr: Vec<_> = shapes
                    .iter()
                    .map(|s| measure(&t, s.clone(), coll, Cost::Transfers))
                    .collect();
                let ns: Vec<_> = shapes
                    .iter()
                    .map(|s| measure(&t, s.clone(), coll, Cost::Nanos))
                    .collect();
                println!(
                    "| {name} | {p} | {coll:?} | {:.1} / {:.0} | {:.1} / {:.0} | {:.1} / {:.0} | {:.0} | {:.0} | {:.0} |",
                    tr[0].critical, tr[0].transfers, tr[1].critical, tr[1].transfers,
                    tr[2].critical, tr[2].transfers, ns[0].critical, ns[1].critical, ns[2].critical
                );
            }
        }
    }
}
