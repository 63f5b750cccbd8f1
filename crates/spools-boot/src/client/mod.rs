//! A rank's side of the rendezvous: join, the runtime's own collectives, finalise, and
//! the watchdog thread that learns of dead ranks.

mod bootstrap;
mod connect;

pub use bootstrap::{Bootstrap, ProgressHook, SleepHook};
pub use connect::Connected;
