//! The attributes an object holds (communicators, datatypes, windows), apart from the
//! calls on them (`attr.rs`), so that the objects' files need nothing else of it.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::Mutex;

/// An object's attributes.
pub(crate) type Attrs = Mutex<AttrMap>;

/// An object's attributes by keyval, each with the order it was set in (MPI deletes
/// `MPI_COMM_SELF`'s at `MPI_Finalize` in the reverse of that order).
#[derive(Debug, Default)]
pub(crate) struct AttrMap {
    vals: BTreeMap<c_int, (u64, usize)>,
    sets: u64,
}

impl AttrMap {
    /// The value of keyval `k`.
    pub(crate) fn get(&self, k: &c_int) -> Option<&usize> {
        self.vals.get(k).map(|(_, v)| v)
    }

    /// Sets keyval `k` (a set again counts as the newest).
    pub(crate) fn insert(&mut self, k: c_int, v: usize) {
        self.sets += 1;
        self.vals.insert(k, (self.sets, v));
    }

    /// Removes keyval `k`.
    pub(crate) fn remove(&mut self, k: &c_int) {
        self.vals.remove(k);
    }

    /// The attributes in the order they were set.
    pub(crate) fn in_set_order(&self) -> Vec<(c_int, usize)> {
        let mut v: Vec<(u64, c_int, usize)> =
            self.vals.iter().map(|(k, (n, x))| (*n, *k, *x)).collect();
        v.sort_unstable();
        v.into_iter().map(|(_, k, x)| (k, x)).collect()
    }
}
