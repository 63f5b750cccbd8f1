//! Typed configuration: defaults, then an optional TOML file (`SPOOLS_CONFIG`), then
//! `SPOOLS_*` environment variables, each later source overriding the earlier.
//!
//! | key (TOML) | environment | default | meaning |
//! |---|---|---|---|
//! | `transport` | `SPOOLS_TRANSPORT` | `auto` | `auto` (shm within a host; between hosts libfabric when it offers a high-speed provider, `verbs`, `cxi`, `efa`, `psm2`, `psm3` or `opx`, else tcp), `shm`, `tcp`, `ofi` (libfabric for every rank, also within a host) |
//! | `ofi_provider` | `SPOOLS_OFI_PROVIDER` | (libfabric's choice) | the libfabric provider for `ofi`, and for `auto` between hosts, by libfabric's name: `verbs;ofi_rxm`, `cxi`, `efa`, `tcp;ofi_rxm`, `shm`, `udp;ofi_rxd`, ... (`spools info` lists this host's) |
//! | `ring_size` | `SPOOLS_RING_SIZE` | `256KiB` | bytes of each low-priority shared-memory ring (one per sender lane and receiver) |
//! | `high_ring_size` | `SPOOLS_HIGH_RING_SIZE` | `128KiB` | bytes of each high-priority ring |
//! | `cell_size` | `SPOOLS_CELL_SIZE` | `64B` | ring cell size (a cache line; a power of two, 64B to 4KiB) |
//! | `bulk_limit` | `SPOOLS_BULK_LIMIT` | `64KiB` | largest bulk active-message payload |
//! | `fragment_size` | `SPOOLS_FRAGMENT_SIZE` | `32KiB` | chunk size of fragmented and pipelined transfers |
//! | `spin_us` | `SPOOLS_SPIN_US` | `1000` | microseconds a waiting thread polls before it sleeps (spinning, or yielding the CPU while the job's awake ranks outnumber the cores or one shares its CPU; the progress thread polls at most 20) |
//! | `lanes` | `SPOOLS_LANES` | `3` | sending lanes per rank: lane 0 for the progress engine, lane 1 for the `World`'s endpoint, lane 2 for tagged messaging, the rest for more endpoints |
//! | `short_limit` | `SPOOLS_SHORT_LIMIT` | `24B` | tagged messages up to this size travel inline in one control message (at most 24B) |
//! | `eager_limit` | `SPOOLS_EAGER_LIMIT` | `32KiB` | larger tagged messages up to this size are sent eagerly (at most `bulk_limit`); beyond, rendezvous |
//! | `coll_sm_limit` | `SPOOLS_COLL_SM_LIMIT` | `4KiB` | barrier, broadcast, reduce, allreduce, allgather(v), alltoall, gather, scatter, scan, exscan and reduce-scatter, blocking or not, of up to this many bytes (per rank's part; an alltoall's, a scatter's and a reduce-scatter's whole buffer) go through a shared segment per communicator and host (flags and slots) instead of messages, where at least 2 ranks of the communicator share the host (allgather, alltoall, gather, scatter, scan, exscan and reduce-scatter within one host only); blocking gatherv, scatterv and alltoallv of any length go through it within one host, a post that exceeds this many bytes rounded up to 64 (a gatherv's part; a scatterv root's or an alltoallv member's blocks with a table of 4 bytes per rank and one) going by messages beside it; `0`: never (at most 64KiB) |
//! | `coll_sm_scan` | `SPOOLS_COLL_SM_SCAN` | `auto` | how scans and exscans run within a host where a shared segment serves the communicator: `auto` (where the job's ranks on the host that may run on the CPUs of the member that creates the segment outnumber them, a chain of eager messages, which lets each rank run ahead of the ones after it by many scans; else recursive doubling through the segment, `log2 P` rounds, among 16 members or more, and a chain through it among fewer (ranks bound to a core each do not outnumber them)), `chain`, `doubling` (through the segment at every member count), `messages` (a chain of messages at every member count, for the scans after the collective that set the segment up); the segment's creator decides for all its members |
//! | `coll_sm_fences` | `SPOOLS_COLL_SM_FENCES` | `auto` | how members of a shared segment set the collectives' flags: `auto` (with release stores, a member about to sleep paying an asymmetric fence, Linux's `membarrier` global expedited, where every member registered for it and the member that creates the segment does not find the ranks outnumbering the CPUs; else locked stores), `light` (release stores wherever every member registered, busy machine or not), `locked` (locked stores always); the segment's creator decides for all its members |
//! | `single_copy` | `SPOOLS_SINGLE_COPY` | `auto` | `auto` (collectives' rendezvous within a host by `process_vm_readv`, point-to-point too where the start-up probe finds it faster than `memcpy`), `cma` (every rendezvous within a host), `pipeline` (none: through the rings) |
//! | `batch` | `SPOOLS_BATCH` | `256` | short messages per batch in batched mode |
//! | `progress_thread` | `SPOOLS_PROGRESS_THREAD` | `false` | run handlers on a background thread |
//! | `thread_level` | `SPOOLS_THREAD_LEVEL` | `multiple` | which threads of a rank call Spools (MPI's levels): `single` or `funneled` (only the thread that initialised: the transports, the active-message progress and the message engine take no lock, and a call from another thread ends the process with an error naming the level), `serialized` or `multiple` (any thread: locks); the progress thread implies `multiple`; an MPI program's `MPI_Init` or `MPI_Init_thread` sets it |
//! | `bootstrap_timeout_s` | `SPOOLS_BOOTSTRAP_TIMEOUT` | `60` | seconds to wait for the rendezvous |
//! | `liveness_timeout_s` | `SPOOLS_LIVENESS_TIMEOUT` | `0` (off) | `spools run` ends the job when a rank stays stopped (SIGSTOP, a debugger) this many seconds |
//! | `coll_buffer` | `SPOOLS_COLL_BUFFER` | `16MiB` | collective buffer per aggregator of parallel file I/O: files are written and read in rounds of at most this many bytes per aggregator (at least 4KiB) |
//! | `net_timeout_s` | `SPOOLS_NET_TIMEOUT` | `5` | seconds without an answer after which a TCP connection of the job (rendezvous, transport) is declared dead (keepalive, and `TCP_USER_TIMEOUT` on rendezvous connections, see [`crate::keepalive`]); `0`: the kernel's defaults (hours) |
//!
//! ```
//! use spools_boot::config::Config;
//! let cfg = Config::from_sources(None, [("SPOOLS_RING_SIZE", "1MiB"), ("SPOOLS_SPIN_US", "5")]).unwrap();
//! assert_eq!(cfg.ring_size, 1 << 20);
//! assert_eq!(cfg.spin_us, 5);
//! assert!(Config::from_sources(None, [("SPOOLS_CELL_SIZE", "100")]).is_err());
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

/// Which transport carries traffic between ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportChoice {
    /// Shared memory within a host, TCP between hosts.
    Auto,
    /// Shared memory only (every rank must share the host).
    Shm,
    /// TCP for everything, also within a host.
    Tcp,
    /// libfabric for everything, also within a host (provider from
    /// [`Config::ofi_provider`]).
    Ofi,
}

/// Which threads of a rank call into Spools (MPI's thread levels). With `Single` or
/// `Funneled` one thread drives the rank: the transports, the active-message progress
/// and the message engine take no lock on the message path, and a call from any other
/// thread ends the process with an error naming the level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ThreadLevel {
    /// One thread in the process (MPI_THREAD_SINGLE).
    Single,
    /// Only the thread that initialised calls Spools (MPI_THREAD_FUNNELED).
    Funneled,
    /// Any thread, one at a time (MPI_THREAD_SERIALIZED): locks, as `Multiple`.
    Serialized,
    /// Any threads at once (MPI_THREAD_MULTIPLE).
    Multiple,
}

impl ThreadLevel {
    /// Whether one thread drives the rank (`Single` or `Funneled`).
    ///
    /// ```
    /// use spools_boot::config::ThreadLevel;
    /// assert!(ThreadLevel::Funneled.one_thread());
    /// assert!(!ThreadLevel::Serialized.one_thread());
    /// ```
    pub fn one_thread(self) -> bool {
        self <= ThreadLevel::Funneled
    }
}

/// How a rendezvous within a host moves its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SingleCopyChoice {
    /// A collective's by one read of the sender's buffer (`process_vm_readv`) where the
    /// kernel permits it; a point-to-point one too where the start-up probe finds that
    /// read faster than a `memcpy`, else pipelined through the shared rings.
    Auto,
    /// Every one by one read of the sender's buffer (`process_vm_readv`).
    Cma,
    /// Every one pipelined through the shared rings.
    Pipeline,
}

/// How scans within a host run through the shared segment ([`Config::coll_sm_scan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanChoice {
    /// A chain of messages where the job's ranks on the host that may run on the creating
    /// member's CPUs outnumber them; else recursive doubling among 16 members or more,
    /// the chain among fewer.
    Auto,
    /// The chain: each member folds its part after its left neighbour's and posts that.
    Chain,
    /// Recursive doubling at every member count.
    Doubling,
    /// A chain of eager messages instead of the segment (once it is set up): each member
    /// runs ahead of the ones after it by as many scans as the messages buffer.
    Messages,
}

/// How the members of a shared segment set the collectives' flags
/// ([`Config::coll_sm_fences`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceChoice {
    /// Release stores (a member about to sleep paying an asymmetric fence) where every
    /// member registered for it and the creating member does not find the ranks
    /// outnumbering the CPUs; else locked stores.
    Auto,
    /// Release stores wherever every member registered for the asymmetric fence.
    Light,
    /// Locked (sequentially consistent) stores always.
    Locked,
}

/// The most bytes a tagged message can carry inline in one control message.
pub const SHORT_LIMIT_MAX: u64 = 24;

/// Default of [`Config::coll_sm_limit`]: up to this size, collectives within a host go
/// through shared flags and slots.
pub const COLL_SM_LIMIT_DEFAULT: u64 = 4 << 10;

/// The largest [`Config::coll_sm_limit`] (each rank has a slot of that size in the shared
/// segment of every communicator it runs such collectives on).
pub const COLL_SM_LIMIT_MAX: u64 = 64 << 10;

/// Default of [`Config::coll_buffer`]: the collective buffer per aggregator of file I/O.
pub const COLL_BUFFER_DEFAULT: u64 = 16 << 20;

/// The smallest [`Config::coll_buffer`].
pub const COLL_BUFFER_MIN: u64 = 4 << 10;

/// The effective configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// See the table in the module docs.
    pub transport: TransportChoice,
    /// Bytes per low-priority ring.
    pub ring_size: u64,
    /// Bytes per high-priority ring.
    pub high_ring_size: u64,
    /// Ring cell size.
    pub cell_size: u64,
    /// Largest bulk payload.
    pub bulk_limit: u64,
    /// Chunk size of fragmented transfers.
    pub fragment_size: u64,
    /// Spin time before sleeping, in microseconds.
    pub spin_us: u64,
    /// Sending lanes per rank.
    pub lanes: u16,
    /// Single-copy mechanism.
    pub single_copy: SingleCopyChoice,
    /// Largest tagged message sent inline (short protocol).
    pub short_limit: u64,
    /// Largest tagged message sent eagerly; larger ones use the rendezvous protocol.
    pub eager_limit: u64,
    /// Largest collective (barrier, broadcast, reduce, allreduce, allgather(v),
    /// alltoall, gather, scatter, scan: per rank's part, an alltoall's and a scatter's whole
    /// buffer) run through shared flags and slots within a host; 0: never.
    pub coll_sm_limit: u64,
    /// How scans run through that segment (decided by the member that creates it).
    pub coll_sm_scan: ScanChoice,
    /// How its members set its flags (decided by the member that creates it).
    pub coll_sm_fences: FenceChoice,
    /// Messages per batch.
    pub batch: u32,
    /// Whether a progress thread runs handlers.
    pub progress_thread: bool,
    /// Which threads call into Spools (the progress thread implies
    /// [`ThreadLevel::Multiple`], see [`Config::thread_level_in_effect`]).
    pub thread_level: ThreadLevel,
    /// Rendezvous timeout in seconds.
    pub bootstrap_timeout_s: u64,
    /// Seconds a rank may stay stopped before `spools run` ends the job; 0: no limit.
    pub liveness_timeout_s: u64,
    /// The TOML file read, if any.
    pub file: Option<PathBuf>,
    /// Collective buffer per aggregator of parallel file I/O: files are written and read
    /// in rounds of at most this many bytes per aggregator.
    pub coll_buffer: u64,
    /// Seconds without an answer after which a job's TCP connection is declared dead;
    /// 0: the kernel's defaults.
    pub net_timeout_s: u64,
    /// The libfabric provider (`verbs;ofi_rxm`, `tcp;ofi_rxm`, ...); `None`: libfabric's
    /// first choice (`ofi`) or the first high-speed one (`auto`).
    pub ofi_provider: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            transport: TransportChoice::Auto,
            ring_size: 256 << 10,
            high_ring_size: 128 << 10,
            cell_size: 64,
            bulk_limit: 64 << 10,
            fragment_size: 32 << 10,
            spin_us: 1000,
            lanes: 3,
            single_copy: SingleCopyChoice::Auto,
            short_limit: 24,
            eager_limit: 32 << 10,
            coll_sm_limit: COLL_SM_LIMIT_DEFAULT,
            coll_sm_scan: ScanChoice::Auto,
            coll_sm_fences: FenceChoice::Auto,
            batch: 256,
            progress_thread: false,
            thread_level: ThreadLevel::Multiple,
            bootstrap_timeout_s: 60,
            liveness_timeout_s: 0,
            file: None,
            coll_buffer: COLL_BUFFER_DEFAULT,
            net_timeout_s: crate::keepalive::NET_TIMEOUT_DEFAULT_S,
            ofi_provider: None,
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file named by `SPOOLS_CONFIG` cannot be read.
    #[error("cannot read configuration file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys or wrongly typed values.
    #[error("configuration file {path}: {message}")]
    Toml {
        /// The file.
        path: PathBuf,
        /// The TOML parser's message (it names the line and key).
        message: String,
    },
    /// A value does not parse or is out of range.
    #[error("{key} = {value:?}: {reason}")]
    Value {
        /// Variable or key name.
        key: String,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    transport: Option<String>,
    ring_size: Option<toml::Value>,
    high_ring_size: Option<toml::Value>,
    cell_size: Option<toml::Value>,
    bulk_limit: Option<toml::Value>,
    fragment_size: Option<toml::Value>,
    short_limit: Option<toml::Value>,
    eager_limit: Option<toml::Value>,
    coll_sm_limit: Option<toml::Value>,
    coll_sm_scan: Option<String>,
    coll_sm_fences: Option<String>,
    spin_us: Option<u64>,
    lanes: Option<u64>,
    single_copy: Option<String>,
    batch: Option<u64>,
    progress_thread: Option<bool>,
    thread_level: Option<String>,
    bootstrap_timeout_s: Option<u64>,
    liveness_timeout_s: Option<u64>,
    coll_buffer: Option<toml::Value>,
    net_timeout_s: Option<u64>,
    ofi_provider: Option<String>,
}

/// Parses `65536`, `64KiB`, `64K`, `1MiB`, `1M`, `2GiB`.
///
/// # Errors
/// A message saying what is wrong.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| "expected a byte count such as 65536, 64KiB or 1MiB".to_string())?;
    let mult: u64 = match suffix.trim() {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size suffix {other:?} (use B, KiB, MiB, GiB)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| "size overflows 64 bits".to_string())
}

/// Prints a byte count with the largest binary suffix that divides it.
pub fn show_size(n: u64) -> String {
    for (suffix, mult) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= mult && n % mult == 0 {
            return format!("{}{}", n / mult, suffix);
        }
    }
    format!("{n}B")
}

fn value_err(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Value {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

impl Config {
    /// The thread level the rank runs at: [`Config::thread_level`], or
    /// [`ThreadLevel::Multiple`] with the progress thread (which runs handlers beside
    /// the application's thread).
    ///
    /// ```
    /// use spools_boot::config::{Config, ThreadLevel};
    /// let cfg = Config::from_sources(None, [("SPOOLS_THREAD_LEVEL", "single")]).unwrap();
    /// assert_eq!(cfg.thread_level_in_effect(), ThreadLevel::Single);
    /// let both = [("SPOOLS_THREAD_LEVEL", "single"), ("SPOOLS_PROGRESS_THREAD", "1")];
    /// let cfg = Config::from_sources(None, both).unwrap();
    /// assert_eq!(cfg.thread_level_in_effect(), ThreadLevel::Multiple);
    /// ```
    pub fn thread_level_in_effect(&self) -> ThreadLevel {
        if self.progress_thread {
            ThreadLevel::Multiple
        } else {
            self.thread_level
        }
    }

    /// Loads the configuration of this process: `SPOOLS_CONFIG` and `SPOOLS_*` variables.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, key or variable at fault.
    pub fn load() -> Result<Config, ConfigError> {
        let file = std::env::var_os("SPOOLS_CONFIG").map(PathBuf::from);
        let vars: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| k.starts_with("SPOOLS_"))
            .collect();
        Config::from_sources(
            file.as_deref(),
            vars.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        )
    }

    /// Builds a configuration from an optional TOML file and `(variable, value)` pairs.
    /// Variables that are not configuration keys (such as `SPOOLS_RANK`) are ignored.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, key or variable at fault.
    pub fn from_sources<'a>(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Config, ConfigError> {
        let mut cfg = Config::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            let fc: FileConfig = toml::from_str(&text).map_err(|e| ConfigError::Toml {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
            cfg.apply_file(fc)?;
            cfg.file = Some(path.to_path_buf());
        }
        for (k, v) in env {
            cfg.apply(k, v)?;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    fn apply_file(&mut self, fc: FileConfig) -> Result<(), ConfigError> {
        fn size_text(v: &toml::Value) -> String {
            match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            }
        }
        if let Some(v) = fc.transport {
            self.apply("transport", &v)?;
        }
        if let Some(v) = fc.ofi_provider {
            self.apply("ofi_provider", &v)?;
        }
        for (key, v) in [
            ("ring_size", fc.ring_size),
            ("high_ring_size", fc.high_ring_size),
            ("cell_size", fc.cell_size),
            ("bulk_limit", fc.bulk_limit),
            ("fragment_size", fc.fragment_size),
            ("short_limit", fc.short_limit),
            ("eager_limit", fc.eager_limit),
            ("coll_sm_limit", fc.coll_sm_limit),
            ("coll_buffer", fc.coll_buffer),
        ] {
            if let Some(v) = v {
                self.apply(key, &size_text(&v))?;
            }
        }
        for (key, v) in [
            ("spin_us", fc.spin_us),
            ("lanes", fc.lanes),
            ("batch", fc.batch),
            ("bootstrap_timeout_s", fc.bootstrap_timeout_s),
            ("liveness_timeout_s", fc.liveness_timeout_s),
            ("net_timeout_s", fc.net_timeout_s),
        ] {
            if let Some(v) = v {
                self.apply(key, &v.to_string())?;
            }
        }
        if let Some(v) = fc.single_copy {
            self.apply("single_copy", &v)?;
        }
        if let Some(v) = fc.coll_sm_scan {
            self.apply("coll_sm_scan", &v)?;
        }
        if let Some(v) = fc.coll_sm_fences {
            self.apply("coll_sm_fences", &v)?;
        }
        if let Some(v) = fc.progress_thread {
            self.apply("progress_thread", &v.to_string())?;
        }
        if let Some(v) = fc.thread_level {
            self.apply("thread_level", &v)?;
        }
        Ok(())
    }

    /// Applies one setting, given by TOML key or `SPOOLS_` variable name.
    fn apply(&mut self, key: &str, v: &str) -> Result<(), ConfigError> {
        let name = key
            .strip_prefix("SPOOLS_")
            .unwrap_or(key)
            .to_ascii_lowercase();
        let size = |v: &str| parse_size(v).map_err(|r| value_err(key, v, r));
        let int = |v: &str| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| value_err(key, v, "expected a non-negative integer"))
        };
        match name.as_str() {
            "transport" => {
                self.transport = match v.trim() {
                    "auto" => TransportChoice::Auto,
                    "shm" => TransportChoice::Shm,
                    "tcp" => TransportChoice::Tcp,
                    "ofi" => TransportChoice::Ofi,
                    _ => return Err(value_err(key, v, "expected auto, shm, tcp or ofi")),
                }
            }
            "ofi_provider" => {
                let p = v.trim();
                self.ofi_provider = if p.is_empty() {
                    None
                } else if p
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_;-".contains(c))
                {
                    Some(p.to_string())
                } else {
                    return Err(value_err(
                        key,
                        v,
                        "a libfabric provider name such as verbs;ofi_rxm or cxi (letters, digits, _, - and ;)",
                    ));
                };
            }
            "ring_size" => self.ring_size = size(v)?,
            "high_ring_size" => self.high_ring_size = size(v)?,
            "cell_size" => self.cell_size = size(v)?,
            "bulk_limit" => self.bulk_limit = size(v)?,
            "fragment_size" => self.fragment_size = size(v)?,
            "short_limit" => self.short_limit = size(v)?,
            "eager_limit" => self.eager_limit = size(v)?,
            "coll_sm_limit" => self.coll_sm_limit = size(v)?,
            "coll_buffer" => self.coll_buffer = size(v)?,
            "spin_us" => self.spin_us = int(v)?,
            "lanes" => {
                self.lanes =
                    u16::try_from(int(v)?).map_err(|_| value_err(key, v, "at most 64 lanes"))?
            }
            "coll_sm_scan" => {
                self.coll_sm_scan = match v.trim() {
                    "auto" => ScanChoice::Auto,
                    "chain" => ScanChoice::Chain,
                    "doubling" => ScanChoice::Doubling,
                    "messages" => ScanChoice::Messages,
                    _ => {
                        return Err(value_err(
                            key,
                            v,
                            "expected auto, chain, doubling or messages",
                        ))
                    }
                }
            }
            "coll_sm_fences" => {
                self.coll_sm_fences = match v.trim() {
                    "auto" => FenceChoice::Auto,
                    "light" => FenceChoice::Light,
                    "locked" => FenceChoice::Locked,
                    _ => return Err(value_err(key, v, "expected auto, light or locked")),
                }
            }
            "single_copy" => {
                self.single_copy = match v.trim() {
                    "auto" => SingleCopyChoice::Auto,
                    "cma" => SingleCopyChoice::Cma,
                    "pipeline" => SingleCopyChoice::Pipeline,
                    _ => return Err(value_err(key, v, "expected auto, cma or pipeline")),
                }
            }
            "batch" => {
                self.batch =
                    u32::try_from(int(v)?).map_err(|_| value_err(key, v, "at most 1024"))?
            }
            "progress_thread" => {
                self.progress_thread = match v.trim() {
                    "1" | "true" | "yes" | "on" => true,
                    "0" | "false" | "no" | "off" => false,
                    _ => return Err(value_err(key, v, "expected true or false")),
                }
            }
            "thread_level" => {
                self.thread_level = match v.trim() {
                    "single" => ThreadLevel::Single,
                    "funneled" => ThreadLevel::Funneled,
                    "serialized" => ThreadLevel::Serialized,
                    "multiple" => ThreadLevel::Multiple,
                    _ => {
                        return Err(value_err(
                            key,
                            v,
                            "expected single, funneled, serialized or multiple",
                        ))
                    }
                }
            }
            "bootstrap_timeout" | "bootstrap_timeout_s" => self.bootstrap_timeout_s = int(v)?,
            "liveness_timeout" | "liveness_timeout_s" => self.liveness_timeout_s = int(v)?,
            "net_timeout" | "net_timeout_s" => self.net_timeout_s = int(v)?,
            // Other SPOOLS_ variables (identity, rendezvous, secret) are not configuration.
            _ => {}
        }
        Ok(())
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let c = self.cell_size;
        if !c.is_power_of_two() || !(64..=4096).contains(&c) {
            return Err(value_err(
                "cell_size",
                &c.to_string(),
                "a power of two from 64B to 4KiB",
            ));
        }
        if !(4 << 10..=16 << 20).contains(&self.fragment_size) {
            return Err(value_err(
                "fragment_size",
                &show_size(self.fragment_size),
                "from 4KiB to 16MiB",
            ));
        }
        for (key, v) in [
            ("ring_size", self.ring_size),
            ("high_ring_size", self.high_ring_size),
        ] {
            if !v.is_power_of_two() || v < 16 * c || v > 1 << 30 {
                return Err(value_err(
                    key,
                    &show_size(v),
                    format!(
                        "a power of two from 16 cells ({}) to 1GiB",
                        show_size(16 * c)
                    ),
                ));
            }
        }
        if self.bulk_limit == 0 || self.bulk_limit > u64::from(u32::MAX) {
            return Err(value_err(
                "bulk_limit",
                &show_size(self.bulk_limit),
                "from 1B to 4GiB-1",
            ));
        }
        if self.short_limit > SHORT_LIMIT_MAX {
            return Err(value_err(
                "short_limit",
                &show_size(self.short_limit),
                format!("at most {SHORT_LIMIT_MAX}B (what fits in one control message)"),
            ));
        }
        if self.eager_limit > self.bulk_limit {
            return Err(value_err(
                "eager_limit",
                &show_size(self.eager_limit),
                format!("at most bulk_limit ({})", show_size(self.bulk_limit)),
            ));
        }
        if self.coll_sm_limit > COLL_SM_LIMIT_MAX {
            return Err(value_err(
                "coll_sm_limit",
                &show_size(self.coll_sm_limit),
                format!("at most {}", show_size(COLL_SM_LIMIT_MAX)),
            ));
        }
        if !(3..=64).contains(&self.lanes) {
            return Err(value_err(
                "lanes",
                &self.lanes.to_string(),
                "from 3 to 64 (the progress engine, the World's endpoint and tagged messaging take one each)",
            ));
        }
        if !(1..=1024).contains(&self.batch) {
            return Err(value_err(
                "batch",
                &self.batch.to_string(),
                "from 1 to 1024",
            ));
        }
        if self.spin_us > 10_000_000 {
            return Err(value_err(
                "spin_us",
                &self.spin_us.to_string(),
                "at most 10 s",
            ));
        }
        if self.net_timeout_s > crate::keepalive::NET_TIMEOUT_MAX_S {
            return Err(value_err(
                "net_timeout_s",
                &self.net_timeout_s.to_string(),
                format!("at most {} (a day)", crate::keepalive::NET_TIMEOUT_MAX_S),
            ));
        }
        if self.coll_buffer < COLL_BUFFER_MIN {
            return Err(value_err(
                "coll_buffer",
                &show_size(self.coll_buffer),
                format!("at least {}", show_size(COLL_BUFFER_MIN)),
            ));
        }
        Ok(())
    }
}

impl fmt::Display for TransportChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransportChoice::Auto => "auto",
            TransportChoice::Shm => "shm",
            TransportChoice::Tcp => "tcp",
            TransportChoice::Ofi => "ofi",
        })
    }
}

impl fmt::Display for SingleCopyChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SingleCopyChoice::Auto => "auto",
            SingleCopyChoice::Cma => "cma",
            SingleCopyChoice::Pipeline => "pipeline",
        })
    }
}

impl fmt::Display for ScanChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScanChoice::Auto => "auto",
            ScanChoice::Chain => "chain",
            ScanChoice::Doubling => "doubling",
            ScanChoice::Messages => "messages",
        })
    }
}

impl fmt::Display for FenceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FenceChoice::Auto => "auto",
            FenceChoice::Light => "light",
            FenceChoice::Locked => "locked",
        })
    }
}

impl fmt::Display for ThreadLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ThreadLevel::Single => "single",
            ThreadLevel::Funneled => "funneled",
            ThreadLevel::Serialized => "serialized",
            ThreadLevel::Multiple => "multiple",
        })
    }
}

/// Prints the configuration as TOML that [`Config::from_sources`] reads back.
impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "transport = \"{}\"", self.transport)?;
        writeln!(f, "ring_size = \"{}\"", show_size(self.ring_size))?;
        writeln!(f, "high_ring_size = \"{}\"", show_size(self.high_ring_size))?;
        writeln!(f, "cell_size = \"{}\"", show_size(self.cell_size))?;
        writeln!(f, "bulk_limit = \"{}\"", show_size(self.bulk_limit))?;
        writeln!(f, "fragment_size = \"{}\"", show_size(self.fragment_size))?;
        writeln!(f, "spin_us = {}", self.spin_us)?;
        writeln!(f, "lanes = {}", self.lanes)?;
        writeln!(f, "single_copy = \"{}\"", self.single_copy)?;
        writeln!(f, "short_limit = \"{}\"", show_size(self.short_limit))?;
        writeln!(f, "eager_limit = \"{}\"", show_size(self.eager_limit))?;
        writeln!(f, "coll_sm_limit = \"{}\"", show_size(self.coll_sm_limit))?;
        writeln!(f, "coll_sm_scan = \"{}\"", self.coll_sm_scan)?;
        writeln!(f, "coll_sm_fences = \"{}\"", self.coll_sm_fences)?;
        writeln!(f, "batch = {}", self.batch)?;
        writeln!(f, "progress_thread = {}", self.progress_thread)?;
        writeln!(f, "thread_level = \"{}\"", self.thread_level)?;
        writeln!(f, "bootstrap_timeout_s = {}", self.bootstrap_timeout_s)?;
        writeln!(f, "liveness_timeout_s = {}", self.liveness_timeout_s)?;
        writeln!(f, "coll_buffer = \"{}\"", show_size(self.coll_buffer))?;
        writeln!(f, "net_timeout_s = {}", self.net_timeout_s)?;
        write!(
            f,
            "ofi_provider = \"{}\"",
            self.ofi_provider.as_deref().unwrap_or("")
        )
    }
}
