//! Where an access of a file starts ([`Place`]) and which way its bytes go ([`Dir`]).

use crate::abi::*;

/// Which way the bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

/// Where in the view an access starts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Place {
    /// At this offset (in etypes).
    At(MPI_Offset),
    /// At the individual pointer, which moves past the data.
    Own,
    /// At the shared pointer, which moves past the data.
    Shared,
    /// At the shared pointer, the group's accesses in rank order (collective).
    Ordered,
}
