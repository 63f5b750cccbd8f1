//! Mapping functions for Spools: layouts of a dataset over units, and transfer plans.
//!
//! A *layout* (the nCUBE paper's mapping function) says where each byte of a dataset lives:
//! on which *unit* (a rank, a disk, a link) and at which offset of that unit's local storage.
//! A [`Plan`] between two layouts of the same dataset is the composite `M1^-1 o M2`: for
//! each pair of units, the maximal runs `(src_offset, dst_offset, len)` to move. Every
//! transfer in Spools (redistribution, parallel files, pipes, streams) is driven by one.
//!
//! This crate is pure: no I/O, no clocks, no threads. Everything is deterministic.
//!
//! # Spec syntax
//!
//! ```text
//! spec   := array | stripe | raid5 | bits
//! array  := DTYPE '[' INT (',' INT)* ']' ' ' dist (',' dist)* ' on ' INT ('x' INT)* [' order=' ('C'|'F')]
//! dist   := 'block' ['(' INT ')'] | 'cyclic' ['(' INT ')'] | '*'
//! DTYPE  := 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'u64' | 'i64'
//!         | 'f32' | 'f64' | 'c64' | 'c128' | 'bytes(' INT ')'
//! stripe := 'stripe(' kv (',' kv)* ')'       keys: unit=SIZE count=INT [size=SIZE], any order
//! raid5  := 'raid5(' kv (',' kv)* ')'        same keys; count >= 2
//! bits   := 'bits(n=' INT ',unit=' list [',local=' list] ')'
//! list   := '[' [INT (',' INT)*] ']'
//! SIZE   := INT ['B' | 'KiB' | 'MiB' | 'GiB' | 'TiB']
//! ```
//!
//! Spaces are exactly those shown. Array distributions follow `MPI_Type_create_darray`:
//! `block` has block size `ceil(n/p)`, `block(b)` needs `b*p >= n`, `cyclic` is `cyclic(1)`,
//! `*` needs grid extent 1. Units are numbered row-major over the grid whatever the array
//! order; `order=C` (default) makes the last dimension fastest both in the global dataset
//! and in each unit's local storage, `order=F` the first. A byte-stream layout without
//! `size=` takes the size of the layout it is planned against. In `bits`, bit 0 is the
//! least significant bit of the byte index, and lists name the most significant bit first.
//!
//! ```
//! use spools_map::{Layout, Plan};
//! let m1: Layout = "f64[1000,1000] block,* on 8x1".parse()?;
//! let m2: Layout = "stripe(unit=64KiB,count=4)".parse()?;
//! let plan = Plan::new(&m1, &m2)?;
//! let s = plan.summary()?;
//! assert_eq!(s.total_bytes(), 8_000_000);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod array;
mod bitruns;
mod bits;
mod dist;
mod dtype;
mod error;
mod intersect;
mod irregular;
mod layout;
mod limits;
mod plan;
mod product;
mod rows;
mod run;
mod size;
mod spec;
mod strided;
mod stripe;
mod summary;

pub use array::{ArrayLayout, Order, Slab};
pub use bits::{BitPerm, BitsLayout, MAX_BITS};
pub use dist::Dist;
pub use dtype::DType;
pub use error::{LayoutError, PlanError, SpecError};
pub use irregular::IrregularLayout;
pub use layout::{Extent, Extents, Layout, Location};
pub use limits::{MAX_BYTES, MAX_UNITS};
pub use plan::{Direction, PeerPlan, Plan, PlanPath, Runs, StridedRuns, UnitPlan};
pub use run::Run;
pub use size::ByteSize;
pub use strided::Strided;
pub use stripe::{Raid5Layout, StripeLayout};
pub use summary::{PlanSummary, MAX_SUMMARY_CELLS};
