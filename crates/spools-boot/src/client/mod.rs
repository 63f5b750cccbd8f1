//! A rank's side of the rendezvous: join, the runtime's own collectives, finalise, and
//! the watchdog thread that learns of dead ranks; and a job whose rendezvous this process
//! hosts for processes it starts itself (`HostedJob`).

mod bootstrap;
mod connect;
mod hosted;
mod port;

pub use bootstrap::{Bootstrap, ProgressHook, SleepHook};
pub use connect::Connected;
pub use hosted::{HostedJob, JobTicket};
pub use port::{connect_port, join_socket, Port, PortError, PORT_PREFIX};
