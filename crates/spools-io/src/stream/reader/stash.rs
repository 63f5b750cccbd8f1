//! A rank's pieces of a spread connection, sans-IO: what its receiver handed out (pieces
//! complete on its links, in whatever order they completed, pieces its links lost, streams
//! that ended on its links, how its receiver ended), kept until the job asks for the piece
//! of the ADU rank 0 named.

use std::collections::HashMap;

use spools_stream::Event;

use super::next::Next;

/// What a rank's receiver handed out and the job has not taken yet.
#[derive(Default)]
pub(crate) struct Stash {
    pieces: HashMap<(u32, u64), Vec<u8>>,
    /// Pieces that will never be whole here: bytes that arrived.
    lost: HashMap<(u32, u64), u64>,
    /// Streams that ended on every link held here.
    ended: HashMap<u32, bool>,
    /// How the receiver ended, once it did.
    over: Option<Next>,
}

impl Stash {
    /// An event of the receiver.
    pub(crate) fn offer(&mut self, e: Event) {
        match e {
            Event::Adu { stream, adu, data } => {
                self.pieces.insert((stream, adu), data);
            }
            Event::Incomplete {
                stream, adu, have, ..
            } => {
                self.lost.insert((stream, adu), have);
            }
            Event::Ended {
                stream, complete, ..
            } => {
                self.ended.insert(stream, complete);
            }
            // A share that is not the lead reports none; nothing to keep.
            Event::Missing { .. } => {}
        }
    }

    /// The receiver ended: `End`, or why not.
    pub(crate) fn over(&mut self, n: Next) {
        self.over.get_or_insert(n);
    }

    /// This rank's piece of ADU `adu` of `stream` (of `size` bytes): `None` while it may
    /// still come; `Err` with what every rank is told when it never will: how the
    /// receiver failed, or the piece incomplete (with the bytes that arrived here).
    pub(crate) fn take(
        &mut self,
        stream: u32,
        adu: u64,
        size: u64,
    ) -> Option<Result<Vec<u8>, Next>> {
        if let Some(p) = self.pieces.remove(&(stream, adu)) {
            // Earlier pieces of the stream will never be asked for.
            self.pieces.retain(|&(s, a), _| s != stream || a > adu);
            return Some(Ok(p));
        }
        let incomplete = |have| Next::Incomplete {
            stream,
            adu,
            have,
            size,
        };
        if let Some(&have) = self.lost.get(&(stream, adu)) {
            return Some(Err(incomplete(have)));
        }
        if self.ended.contains_key(&stream) {
            return Some(Err(incomplete(0)));
        }
        match &self.over {
            None => None,
            Some(Next::End { .. }) => Some(Err(incomplete(0))),
            Some(n) => Some(Err(n.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adu(stream: u32, adu: u64, data: &[u8]) -> Event {
        Event::Adu {
            stream,
            adu,
            data: data.to_vec(),
        }
    }

    /// Pieces come out by name, whatever order they arrived in; a piece lost, a stream that
    /// ended without it, a receiver that failed: the error every rank gets.
    #[test]
    fn pieces_come_out_by_name() {
        let mut s = Stash::default();
        assert_eq!(s.take(1, 0, 10), None);
        s.offer(adu(1, 1, b"b"));
        s.offer(adu(2, 0, b"x"));
        assert_eq!(s.take(1, 0, 10), None);
        s.offer(adu(1, 0, b"a"));
        assert_eq!(s.take(1, 0, 10), Some(Ok(b"a".to_vec())));
        assert_eq!(s.take(2, 0, 10), Some(Ok(b"x".to_vec())));
        assert_eq!(s.take(1, 1, 10), Some(Ok(b"b".to_vec())));
        s.offer(Event::Incomplete {
            stream: 1,
            adu: 2,
            have: 3,
            size: 10,
        });
        assert_eq!(
            s.take(1, 2, 10),
            Some(Err(Next::Incomplete {
                stream: 1,
                adu: 2,
                have: 3,
                size: 10
            }))
        );
        s.offer(Event::Ended {
            stream: 2,
            adus: 1,
            complete: true,
        });
        assert!(matches!(
            s.take(2, 1, 5),
            Some(Err(Next::Incomplete { have: 0, .. }))
        ));
        s.over(Next::Refused("a frame out of place".into()));
        assert_eq!(
            s.take(3, 0, 1),
            Some(Err(Next::Refused("a frame out of place".into())))
        );
    }
}
