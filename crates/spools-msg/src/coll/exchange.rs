//! A non-blocking exchange of byte blocks between any ranks of a communicator, in its
//! collective order: the building block of MPI's v and w collectives and neighbourhood
//! collectives (crates/spools-mpi), where each rank names whom it sends what and from
//! whom it receives how much.

use super::schedule::Part;
use super::CollRequest;
use crate::communicator::Communicator;
use crate::error::MsgError;

impl Communicator {
    /// Collective: every rank of the communicator calls it (in the same order as its
    /// other collectives). This rank sends each `(to, bytes)` of `sends` and receives,
    /// for each `(from, len)` of `recvs`, exactly `len` bytes; `wait` returns the
    /// received blocks in the order of `recvs`. Blocks between the same two ranks match
    /// in the order they are listed on each side; blocks to this rank itself are copied.
    /// All blocks travel at once, driven by the progress engine.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let me = world.rank();
    /// // Everyone sends its rank to itself (copied) and gets it back.
    /// let r = world.iexchange(vec![(me, vec![me as u8; 3])], vec![(me, 3)]).unwrap();
    /// assert_eq!(r.wait().unwrap(), vec![vec![me as u8; 3]]);
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadRank`] for a rank outside the communicator, a self-block whose
    /// length differs from its receive ([`MsgError::Mismatch`]); the exchange's own
    /// errors (a dead rank, a block of another length) come from `wait`.
    pub fn iexchange(
        &self,
        sends: Vec<(u32, Vec<u8>)>,
        recvs: Vec<(u32, usize)>,
    ) -> Result<CollRequest<Vec<Vec<u8>>>, MsgError> {
        self.iexchange_keyed(
            sends.into_iter().map(|(r, b)| (r, 0, b)).collect(),
            recvs.into_iter().map(|(r, n)| (r, 0, n)).collect(),
        )
    }

    /// [`Communicator::iexchange`] with a key (0 to 255) on every block: a block sent
    /// with key k matches only a receive with key k, so that blocks between the same two
    /// ranks need not be listed in the same order on both sides (a Cartesian
    /// neighbourhood where one rank is both the left and the right neighbour).
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let me = world.rank();
    /// let r = world
    ///     .iexchange_keyed(vec![(me, 1, vec![1]), (me, 2, vec![2])], vec![(me, 2, 1), (me, 1, 1)])
    ///     .unwrap();
    /// assert_eq!(r.wait().unwrap(), vec![vec![2], vec![1]]);
    /// ```
    ///
    /// # Errors
    /// As [`Communicator::iexchange`].
    pub fn iexchange_keyed(
        &self,
        sends: Vec<(u32, u8, Vec<u8>)>,
        recvs: Vec<(u32, u8, usize)>,
    ) -> Result<CollRequest<Vec<Vec<u8>>>, MsgError> {
        let nb = self.nonblocking();
        let this = &nb;
        let tag = this.core.next_coll_tag();
        let me = this.rank();
        let nrecv = recvs.len();
        let mut slots: Vec<Vec<u8>> = recvs.iter().map(|&(_, _, len)| vec![0u8; len]).collect();
        // Blocks to this rank itself, copied in order (per key) into its receives from
        // itself.
        let mut own: Vec<Vec<&Vec<u8>>> = vec![Vec::new(); 256];
        for (to, key, b) in sends.iter().rev() {
            if *to == me {
                own[*key as usize].push(b);
            }
        }
        for (i, &(from, key, len)) in recvs.iter().enumerate() {
            if from == me {
                let b = own[key as usize].pop().ok_or(MsgError::Mismatch {
                    op: "exchange",
                    from: Some(me),
                    got: 0,
                    want: len,
                })?;
                if b.len() != len {
                    return Err(MsgError::Mismatch {
                        op: "exchange",
                        from: Some(me),
                        got: b.len(),
                        want: len,
                    });
                }
                slots[i].copy_from_slice(b);
            }
        }
        let mut s = this.schedule_bytes(tag, slots);
        s.round();
        for (i, &(from, key, len)) in recvs.iter().enumerate() {
            if from != me && len > 0 {
                let job = this.core.job_rank(from)?;
                s.recv(job, tag | u32::from(key), Part::new(i, 0, len));
            }
        }
        for (to, key, bytes) in sends {
            if to == me {
                continue;
            }
            let job = this.core.job_rank(to)?;
            if bytes.is_empty() {
                continue;
            }
            let len = bytes.len();
            let slot = s.add_slot(bytes);
            s.send(job, tag | u32::from(key), Part::new(slot, 0, len));
        }
        Self::start_bytes("exchange", s, nrecv)
    }
}
