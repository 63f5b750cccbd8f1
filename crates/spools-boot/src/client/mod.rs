//! A rank's side of the rendezvous: join, the runtime's own collectives, finalise, and
//! the watchdog thread that learns of dead ranks; and a job whose rendezvous this process
//! hosts for processes it starts itself (`HostedJob`), and processes it asks its
//! launcher to start (`Bootstrap::launch`).

mod bootstrap;
mod connect;
mod hosted;
mod launched;
mod port;
mod requests;

pub use bootstrap::{Bootstrap, ProgressHook, SleepHook};
pub use connect::Connected;
pub use hosted::{HostedJob, JobTicket};
pub use launched::LaunchRefused;
pub use port::{connect_port, join_socket, Port, PortError, PORT_PREFIX};
pub use requests::Exits;
