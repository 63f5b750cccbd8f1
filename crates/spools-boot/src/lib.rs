//! The boot layer of Spools: configuration, job identity, the TCP
//! rendezvous with its job secret, and the watchdog (the launcher that starts jobs is
//! `spools-launch`, above this crate, so that no rank links it).
//!
//! A rank starts by reading its [`identity::JobEnv`] and [`config::Config`], connects to
//! its rendezvous ([`client::Connected::connect`]), publishes its endpoint and receives
//! everyone's ([`client::Connected::join`]). From then on the watchdog thread keeps the
//! [`health::JobHealth`] current, and the [`client::Bootstrap`] offers the runtime's own
//! collectives (barrier, broadcast, allgather) and `finalize`.
//!
//! ```
//! use spools_boot::{client::Connected, config::Config, identity::JobEnv};
//! // Without a launcher a process is a job of one rank.
//! let env = JobEnv::from_lookup(|_| None).unwrap();
//! let cfg = Config::default();
//! let boot = Connected::connect(env, &cfg).unwrap().join(Default::default()).unwrap();
//! assert_eq!((boot.rank(), boot.size()), (0, 1));
//! assert_eq!(boot.allgather(b"hi").unwrap(), vec![b"hi".to_vec()]);
//! boot.finalize().unwrap();
//! ```

pub mod admission;
pub mod client;
pub mod config;
mod error;
pub mod health;
pub mod host;
pub mod identity;
pub mod keepalive;
pub mod logger;
pub mod net;
pub mod pmi;
pub mod random;
pub mod server;

pub use error::{Awaited, BootError, BootStep, Lost, RandomFor, Violation};
