//! Spools: a user-level communication and parallel-I/O runtime for clusters.
//!
//! A program calls [`init`] once per process and gets its [`World`]: its rank, the job
//! size, which ranks share its host, the runtime's own collectives and the active-message
//! layer ([`World::worker`], [`World::endpoint`]). Launch it with
//! `spools run -n 4 -- ./program`, or under Slurm or Open MPI with `SPOOLS_BOOTSTRAP` set;
//! run alone it is a job of one rank.
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//! use spools::{Channel, Delivery};
//!
//! let mut world = spools::init().unwrap();
//! let sum = Arc::new(AtomicU64::new(0));
//! let s = sum.clone();
//! world.worker().register("add", move |m| { s.fetch_add(m.args[0], Ordering::Relaxed); }).unwrap();
//! world.worker().sync_handlers().unwrap();
//! let add = world.worker().handler_id("add").unwrap();
//! let me = world.rank();
//! world.endpoint().send_short(me, add, [5, 0, 0, 0], Channel::new(0), Delivery::Immediate).unwrap();
//! world.worker().wait_for(|| sum.load(Ordering::Relaxed) == 5).unwrap();
//! world.barrier().unwrap();
//! world.finalize().unwrap();
//! ```

mod io;
mod leave;
mod world;

pub use spools_am::{
    ActiveMessage, AmError, Channel, Delivery, Endpoint, HandlerId, Region, RegionKey, Route,
    Worker,
};
pub use spools_boot::config::{Config, SingleCopyChoice, TransportChoice};
pub use spools_boot::identity::LauncherKind;
pub use spools_fabric::{Caps, FabricError, Priority, SingleCopy, Transport};
pub use spools_io::file::{FileStats, Format, ReadOptions, Reshuffle, Striping, WriteOptions};
pub use spools_io::{ExchangeError, ExchangeOptions, ExchangeStats, FileError};
pub use spools_map::Layout;
pub use spools_msg::{
    as_bytes, as_bytes_mut, wait_all, wait_any, CollRequest, Communicator, Completion, Element,
    MsgError, Op, Request, RpcError, RpcHandle, Source, Status, Tag, UserFn, ANY_SOURCE, ANY_TAG,
};
pub use world::{init, init_with, InitError, World};
