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
        let tag = self.core.next_coll_tag();
        let me = self.rank();
        let nrecv = recvs.len();
        let mut slots: Vec<Vec<u8>> = recvs.iter().map(|&(_, len)| vec![0u8; len]).collect();
        // Blocks to this rank itself, copied in order into its receives from itself.
        let mut own = sends.iter().filter(|(to, _)| *to == me).map(|(_, b)| b);
        for (i, &(from, len)) in recvs.iter().enumerate() {
            if from == me {
                let b = own.next().ok_or(MsgError::Mismatch {
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
        let mut s = self.schedule_bytes(tag, slots);
        s.round();
        for (i, &(from, len)) in recvs.iter().enumerate() {
            if from != me && len > 0 {
                let job = self.core.job_rank(from)?;
                s.recv(job, tag, Part::new(i, 0, len));
            }
        }
        for (to, bytes) in sends {
            if to == me {
                continue;
            }
            let job = self.core.job_rank(to)?;
            if bytes.is_empty() {
                continue;
            }
            let len = bytes.len();
            let slot = s.add_slot(bytes);
            s.send(job, tag, Part::new(slot, 0, len));
        }
        Self::start_bytes("exchange", s, nrecv)
    }
}
