//! Datasets whose every 4-byte element holds its own canonical index (little-endian
//! `u32`): a rank's share of any layout is made from the layout's extents, and what a job
//! reads is checked element by element against that one-process oracle.

use spools::Layout;
use spools_testkit::e;

/// Element size of every dataset made here.
pub(crate) const ELEM: u64 = 4;

/// Rank `me`'s share of `l`: every element its canonical index.
pub(crate) fn share(l: &Layout, me: u64) -> Result<Vec<u8>, String> {
    let mut v = vec![0u8; e(l.local_bytes(me))? as usize];
    for x in e(l.extents(me))? {
        for k in (0..x.len).step_by(ELEM as usize) {
            let at = (x.local + k) as usize;
            let i = ((x.global + k) / ELEM) as u32;
            v[at..at + ELEM as usize].copy_from_slice(&i.to_le_bytes());
        }
    }
    Ok(v)
}

/// The first element of `got` (rank `me`'s share of `l`) that is not its index, as an
/// error naming `what`.
pub(crate) fn check(l: &Layout, me: u64, got: &[u8], what: &str) -> Result<(), String> {
    for x in e(l.extents(me))? {
        for k in (0..x.len).step_by(ELEM as usize) {
            let at = (x.local + k) as usize;
            let i = ((x.global + k) / ELEM) as u32;
            let have = u32::from_le_bytes(
                got[at..at + ELEM as usize]
                    .try_into()
                    .map_err(|_| format!("{what}: rank {me}'s buffer is short"))?,
            );
            if have != i {
                return Err(format!(
                    "{what}: rank {me} element {i} (local byte {at}) reads {have}"
                ));
            }
        }
    }
    Ok(())
}
