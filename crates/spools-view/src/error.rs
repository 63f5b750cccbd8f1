//! Errors of the viewer.

use thiserror::Error;

/// Why the viewer could not start or stopped.
#[derive(Debug, Error)]
pub enum ViewError {
    /// The page would be served on an interface other than loopback without
    /// [`ViewOptions::allow_remote`](crate::ViewOptions::allow_remote).
    #[error("{0} is not a loopback address: serving the page there needs allow_remote (--allow-remote), and then a token in the URL")]
    NotLoopback(std::net::SocketAddr),
    /// The port of the frame streams could not be bound.
    #[error("the frame streams' port {addr}: {source}")]
    BindFrames {
        /// The address asked for.
        addr: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The page's port could not be bound.
    #[error("the page's port {addr}: {source}")]
    BindHttp {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// No random bytes for the page's token.
    #[error("a random token for the page: {0}")]
    Random(std::io::Error),
    /// A thread of the viewer could not be started.
    #[error("starting a thread of the viewer: {0}")]
    Thread(std::io::Error),
    /// Receiving the frame streams failed (accepting links).
    #[error("receiving frames: {0}")]
    Receive(#[from] spools_stream::RecvError),
}
