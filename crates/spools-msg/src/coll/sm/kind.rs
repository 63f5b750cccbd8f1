//! What a collective through the segment does with its buffer.

/// What a collective does with its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// No data.
    Barrier,
    /// The root's buffer to everyone.
    Bcast,
    /// Everyone's buffer combined into the root's.
    Reduce,
    /// Everyone's buffer combined into everyone's.
    Allreduce,
    /// Everyone's buffer to everyone, side by side.
    Allgather,
    /// Block j of everyone's buffer to member j.
    Alltoall,
    /// Everyone's buffer to the root, side by side.
    Gather,
    /// Block j of the root's buffer to member j.
    Scatter,
    /// Member i gets the buffers of members 0 to i combined.
    Scan,
    /// Member i gets the buffers of members 0 to i - 1 combined.
    Exscan,
    /// Member j gets block j of everyone's buffer combined.
    ReduceScatter,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Barrier => "barrier",
            Kind::Bcast => "bcast",
            Kind::Reduce => "reduce",
            Kind::Allreduce => "allreduce",
            Kind::Allgather => "allgather",
            Kind::Alltoall => "alltoall",
            Kind::Gather => "gather",
            Kind::Scatter => "scatter",
            Kind::Scan => "scan",
            Kind::Exscan => "exscan",
            Kind::ReduceScatter => "reduce_scatter",
        }
    }

    pub(crate) fn contributes(self) -> bool {
        matches!(
            self,
            Kind::Reduce
                | Kind::Allreduce
                | Kind::Allgather
                | Kind::Alltoall
                | Kind::Gather
                | Kind::Scan
                | Kind::Exscan
                | Kind::ReduceScatter
        )
    }

    pub(crate) fn publishes_data(self) -> bool {
        matches!(self, Kind::Bcast | Kind::Allreduce | Kind::Scatter)
    }

    /// The members other than the root (through [`super::SmColl`]) wait for its
    /// publication: all but a reduce's, whose contributors are done once posted.
    pub(crate) fn awaited(self) -> bool {
        self != Kind::Reduce
    }

    /// Its posts (lengths and small contributions) go through the members' deep rings
    /// ([`super::SmComm::deep_len`]): a reduce's and a gather's, each read by one member,
    /// whose contributors are done once posted and so may run far ahead of it.
    pub(crate) fn deep(self) -> bool {
        matches!(self, Kind::Reduce | Kind::Gather)
    }

    /// The root's data goes out and nothing comes in: the root reads no contribution,
    /// only that every member is far enough along to reuse a result slot.
    pub(crate) fn fans_out(self) -> bool {
        matches!(self, Kind::Bcast | Kind::Scatter)
    }
}
