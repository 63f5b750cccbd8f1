//! How an exchange runs ([`ExchangeOptions`]) and what it moved ([`ExchangeStats`]).

/// How an exchange runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExchangeOptions {
    /// Append a CRC32C to every transfer unit and check it on arrival. Streams pulled in
    /// a single copy (see `single_copy`) cross no transport and carry no checksum.
    pub integrity: bool,
    /// Largest transfer unit in bytes (at least 1).
    pub transfer_unit: usize,
    /// Transfer units in flight per peer and direction (at least 1; 2 is double
    /// buffering).
    pub window: usize,
    /// Between ranks of one host, let the destination copy the runs straight from the
    /// source's buffer (one copy): always from the shared heap, from other memory when
    /// the stream's runs are long enough; off, every stream goes through transfer units.
    /// Every rank must pass the same value.
    pub single_copy: bool,
    /// A binding declining this rank's part (default `None`): its own argument check
    /// failed, so this rank takes part only to fail. The call fails on every rank before
    /// anything is touched: here with `Declined`, elsewhere with `Remote` carrying this
    /// cause. The rank's buffer is not read.
    pub declined: Option<crate::Cause>,
}

impl Default for ExchangeOptions {
    fn default() -> Self {
        ExchangeOptions {
            integrity: false,
            transfer_unit: 512 * 1024,
            window: 2,
            single_copy: true,
            declined: None,
        }
    }
}

/// What one rank's part of an exchange moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExchangeStats {
    /// Bytes sent to other ranks (payload only, pulled bytes included, as the puller
    /// reported them).
    pub sent: u64,
    /// Bytes received from other ranks (payload only, pulled bytes included).
    pub received: u64,
    /// Bytes copied between units of this rank.
    pub local: u64,
    /// Transfer units sent.
    pub messages: u64,
    /// Runs this rank packed or copied (a run split across TUs counts once per piece).
    pub runs: u64,
    /// Bytes this rank copied straight out of a peer's buffer (single copy).
    pub pulled: u64,
}

impl std::ops::AddAssign for ExchangeStats {
    /// Adds the counts of another exchange (one round of a file operation to the
    /// operation's total).
    ///
    /// ```
    /// use spools_exchange::ExchangeStats;
    /// let mut total = ExchangeStats { sent: 3, pulled: 2, ..Default::default() };
    /// total += ExchangeStats { sent: 4, pulled: 5, ..Default::default() };
    /// assert_eq!((total.sent, total.pulled), (7, 7));
    /// ```
    fn add_assign(&mut self, x: ExchangeStats) {
        let ExchangeStats {
            sent,
            received,
            local,
            messages,
            runs,
            pulled,
        } = x;
        self.sent += sent;
        self.received += received;
        self.local += local;
        self.messages += messages;
        self.runs += runs;
        self.pulled += pulled;
    }
}
