//! Tables of the objects behind the handles Spools makes (communicators, datatypes,
//! operators, requests, ...). A handle is `kind << 24 | index`: small enough for
//! `MPI_*_toint`, never equal to a predefined handle (all below 0x400), and of one kind
//! only, so that a datatype passed as a communicator is an error, not a confusion.

use std::sync::{Arc, PoisonError, RwLock};

/// The kinds of objects, as the top bits of their handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Comm = 1,
    Group = 2,
    Datatype = 3,
    Op = 4,
    Request = 5,
    Errhandler = 6,
    Info = 7,
    Message = 8,
    Keyval = 9,
    Session = 10,
    Win = 11,
    File = 12,
}

/// An object a call holds while it runs: a predefined one (`MPI_COMM_WORLD`, `MPI_INT`)
/// borrowed from the static that keeps it as long as the process lives, one the program
/// made shared. Borrowing touches no reference count: a count's locked increment and
/// decrement wait for every store before them (a collective's flag, on its way to the
/// members polling it), which cost a small collective more than the rest of its argument
/// checks.
pub(crate) enum ObjRef<T: 'static> {
    /// A predefined object.
    Named(&'static Arc<T>),
    /// One the program made.
    Made(Arc<T>),
}

impl<T> std::ops::Deref for ObjRef<T> {
    type Target = T;

    fn deref(&self) -> &T {
        match self {
            ObjRef::Named(t) => t,
            ObjRef::Made(t) => t,
        }
    }
}

impl<T> ObjRef<T> {
    /// The object shared, for what keeps it past the call.
    pub(crate) fn arc(&self) -> Arc<T> {
        match self {
            ObjRef::Named(t) => Arc::clone(t),
            ObjRef::Made(t) => Arc::clone(t),
        }
    }
}

const INDEX_BITS: u32 = 24;
const INDEX_MASK: usize = (1 << INDEX_BITS) - 1;

/// A table of objects of one kind.
pub(crate) struct Table<T> {
    kind: Kind,
    slots: RwLock<Slots<T>>,
}

struct Slots<T> {
    items: Vec<Option<Arc<T>>>,
    free: Vec<usize>,
}

impl<T> Table<T> {
    pub(crate) const fn new(kind: Kind) -> Table<T> {
        Table {
            kind,
            slots: RwLock::new(Slots {
                items: Vec::new(),
                free: Vec::new(),
            }),
        }
    }

    /// Adds an object; `None` when the table is full (2^24 live objects).
    pub(crate) fn insert(&self, v: T) -> Option<usize> {
        let mut s = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let i = match s.free.pop() {
            Some(i) => {
                s.items[i] = Some(Arc::new(v));
                i
            }
            None => {
                if s.items.len() > INDEX_MASK {
                    return None;
                }
                s.items.push(Some(Arc::new(v)));
                s.items.len() - 1
            }
        };
        Some(((self.kind as usize) << INDEX_BITS) | i)
    }

    fn index(&self, h: usize) -> Option<usize> {
        (h >> INDEX_BITS == self.kind as usize).then_some(h & INDEX_MASK)
    }

    /// Adds another handle to an object already shared.
    pub(crate) fn insert_shared(&self, v: Arc<T>) -> Option<usize> {
        let mut s = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let i = match s.free.pop() {
            Some(i) => {
                s.items[i] = Some(v);
                i
            }
            None => {
                if s.items.len() > INDEX_MASK {
                    return None;
                }
                s.items.push(Some(v));
                s.items.len() - 1
            }
        };
        Some(((self.kind as usize) << INDEX_BITS) | i)
    }

    /// The object of handle `h`, if it is a live one of this table.
    pub(crate) fn get(&self, h: usize) -> Option<Arc<T>> {
        let i = self.index(h)?;
        let s = self.slots.read().unwrap_or_else(PoisonError::into_inner);
        s.items.get(i)?.clone()
    }

    /// The object of handle `h`, removed when `gone` says so of it (`Ok`), else kept
    /// (`Err`, shared); `None` if `h` is no live handle of this table. One lock of the
    /// table either way.
    pub(crate) fn take_if(
        &self,
        h: usize,
        gone: impl FnOnce(&T) -> bool,
    ) -> Option<Result<Arc<T>, Arc<T>>> {
        let i = self.index(h)?;
        let mut s = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let slot = s.items.get_mut(i)?;
        if !gone(slot.as_ref()?) {
            return slot.clone().map(Err);
        }
        let v = slot.take()?;
        s.free.push(i);
        Some(Ok(v))
    }

    /// Removes and gives the object of handle `h`.
    pub(crate) fn remove(&self, h: usize) -> Option<Arc<T>> {
        let i = self.index(h)?;
        let mut s = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let v = s.items.get_mut(i)?.take()?;
        s.free.push(i);
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_of_one_kind_and_reused_after_removal() {
        let t: Table<u32> = Table::new(Kind::Comm);
        let a = t.insert(1).unwrap();
        let b = t.insert(2).unwrap();
        assert_ne!(a, b);
        assert!(a >= 0x400 && a <= i32::MAX as usize);
        assert_eq!(*t.get(b).unwrap(), 2);
        let other: Table<u32> = Table::new(Kind::Datatype);
        assert!(other.get(a).is_none());
        assert_eq!(*t.remove(a).unwrap(), 1);
        assert!(t.get(a).is_none());
        assert!(t.remove(a).is_none());
        assert_eq!(t.insert(3).unwrap(), a);
        // Taken only when the predicate says so; kept otherwise.
        assert_eq!(*t.take_if(a, |v| *v == 4).unwrap().unwrap_err(), 3);
        assert_eq!(*t.take_if(a, |v| *v == 3).unwrap().unwrap(), 3);
        assert!(t.take_if(a, |_| true).is_none());
        assert!(t.get(a).is_none());
    }
}
