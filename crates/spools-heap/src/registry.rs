//! This process's live heap segments: the address range of each one's user bytes and its
//! name, so that any slice can be asked whether it lies in the shared heap.

use std::collections::BTreeMap;
use std::sync::{PoisonError, RwLock};

use crate::{HeapName, HeapRef};

/// User-byte start -> (length, name).
static LIVE: RwLock<BTreeMap<usize, (usize, HeapName)>> = RwLock::new(BTreeMap::new());

pub(crate) fn insert(start: usize, len: usize, name: HeapName) {
    LIVE.write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(start, (len, name));
}

pub(crate) fn remove(start: usize) {
    LIVE.write()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&start);
}

/// Where the bytes `[ptr, ptr+len)` of this process lie in the shared heap: `Some` only if
/// the whole range lies in one live segment that this process allocated.
///
/// ```
/// let v = vec![0u8; 16];
/// assert!(spools_heap::lookup(v.as_ptr(), v.len()).is_none());
/// ```
pub fn lookup(ptr: *const u8, len: usize) -> Option<HeapRef> {
    let p = ptr as usize;
    let end = p.checked_add(len)?;
    let live = LIVE.read().unwrap_or_else(PoisonError::into_inner);
    let (&start, &(seg_len, name)) = live.range(..=p).next_back()?;
    (end <= start + seg_len).then_some(HeapRef {
        name,
        offset: (p - start) as u64,
    })
}
