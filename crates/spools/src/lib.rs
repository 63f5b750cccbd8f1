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
//! use spools::{Channel, Delivery, Op};
//!
//! let mut world = spools::init().unwrap();
//! let (me, n) = (u64::from(world.rank()), u64::from(world.size()));
//! // An active-message handler runs on the receiving rank with the message's arguments.
//! let got = Arc::new(AtomicU64::new(u64::MAX));
//! let g = got.clone();
//! world
//!     .worker()
//!     .register("hello", move |m| g.store(m.args[0] * 1000 + m.args[1], Ordering::SeqCst))
//!     .unwrap();
//! world.worker().sync_handlers().unwrap(); // every rank knows every handler's id
//! let hello = world.worker().handler_id("hello").unwrap();
//! // Each rank greets the next one with its rank and the job size.
//! let next = ((me + 1) % n) as u32;
//! let args = [me, n, 0, 0];
//! world
//!     .endpoint()
//!     .send_short(next, hello, args, Channel::new(0), Delivery::Immediate)
//!     .unwrap();
//! world.worker().wait_for(|| got.load(Ordering::SeqCst) != u64::MAX).unwrap();
//! let prev = (me + n - 1) % n;
//! assert_eq!(got.load(Ordering::SeqCst), prev * 1000 + n);
//! // The MPI-style layer on the same World: a sum with a closed form.
//! let mut total = [0u64];
//! world.allreduce(&[me + 1], &mut total, &Op::Sum).unwrap();
//! assert_eq!(total[0], n * (n + 1) / 2);
//! world.finalize().unwrap();
//! ```

mod carrier;
mod heap;
mod io;
mod leave;
mod listen;
pub mod shared;
mod world;

pub use carrier::Carrier;
pub use heap::SharedBuf;
pub use spools_am::{
    ActiveMessage, AmError, Channel, Delivery, Endpoint, HandlerId, Interrupt, Region, RegionKey,
    Route, Worker,
};
pub use spools_boot::client::{
    connect_port, join_socket, Exits, HostedJob, JobTicket, LaunchRefused, Port, PortError,
};
pub use spools_boot::config::{
    Config, FenceChoice, ScanChoice, SingleCopyChoice, ThreadLevel, TransportChoice,
};
pub use spools_boot::identity::LauncherKind;
pub use spools_boot::BootError;
pub use spools_fabric::{Caps, FabricError, Priority, SingleCopy, Transport};
pub use spools_heap::{HeapError, HeapRef, PeerBytes};
pub use spools_io::file::{
    Commit, FileStats, Format, ReadOptions, Reshuffle, Striping, WriteOptions,
};
pub use spools_io::stream::{
    frame_header, FrameStyle, StreamConnection, StreamFormat, StreamId, StreamOptions, StreamWriter,
};
pub use spools_io::stream::{AduInfo, StreamReader};
pub use spools_io::StreamRecvError;
pub use spools_io::{ExchangeError, ExchangeOptions, ExchangeStats, FileError, StreamError};
pub use spools_map::{DType, Layout};
pub use spools_msg::{
    as_bytes, as_bytes_mut, wait_all, wait_any, zip_with, CollRequest, Communicator, Completion,
    DupRequest, Element, GatherBuf, InterRoot, MsgError, Op, Request, RpcError, RpcHandle,
    ScatterBuf, Sides, Source, Status, Tag, UserFn, Verdict, ANY_SOURCE, ANY_TAG, INTER_FLAT_PAIRS,
    MAX_LIVE_COMMUNICATORS,
};
pub use spools_proto::boot::SpawnProc;
pub use spools_proto::framebuffer::{ColorMap, FrameHeader, PixelFormat};
pub use world::{agreed_settings, init, init_with, InitError, World};
