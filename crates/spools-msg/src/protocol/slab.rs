//! [`Slab`]: the receive operations by id without hashing. An id is a slot index (low 32
//! bits) and the slot's generation (high 32 bits, never 0), so looking an id up is one
//! bounds check and one comparison, and an id whose operation was removed (a stale id,
//! or one a peer made up) finds nothing: the slot's generation moved on. A slot is reused
//! 2^32 - 1 times before an id can repeat.

/// One slot: its current generation and the value, if occupied.
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// Values by generational id; freed slots are reused (most recently freed first, which
/// keeps a ping-pong's one receive in the same, cache-warm slot).
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
}

/// The slot index and generation of `id`.
fn split(id: u64) -> (usize, u32) {
    ((id & 0xFFFF_FFFF) as usize, (id >> 32) as u32)
}

impl<T> Slab<T> {
    /// Stores `value` and returns its id (never 0).
    pub(crate) fn insert(&mut self, value: T) -> u64 {
        self.len += 1;
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 1,
                    value: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.value = Some(value);
        (u64::from(slot.generation) << 32) | u64::from(index)
    }

    /// The value of `id`, if held.
    pub(crate) fn get(&self, id: u64) -> Option<&T> {
        let (i, g) = split(id);
        match self.slots.get(i) {
            Some(s) if s.generation == g => s.value.as_ref(),
            _ => None,
        }
    }

    /// The value of `id`, if held, to change.
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        let (i, g) = split(id);
        match self.slots.get_mut(i) {
            Some(s) if s.generation == g => s.value.as_mut(),
            _ => None,
        }
    }

    /// Removes the value of `id`; the id is stale from now on.
    pub(crate) fn remove(&mut self, id: u64) -> Option<T> {
        let (i, g) = split(id);
        let slot = self.slots.get_mut(i).filter(|s| s.generation == g)?;
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1).max(1);
        self.free.push(i as u32);
        self.len -= 1;
        Some(value)
    }

    /// Number of values held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::Slab;

    #[test]
    fn ids_are_unique_and_stale_ids_find_nothing() {
        let mut s = Slab::default();
        let a = s.insert("a");
        let b = s.insert("b");
        assert_ne!(a, b);
        assert_ne!(a, 0);
        assert_eq!(s.remove(a), Some("a"));
        assert_eq!(s.get(a), None);
        assert_eq!(s.remove(a), None);
        let c = s.insert("c");
        // The freed slot is reused under a new generation: the old id stays dead.
        assert_ne!(c, a);
        assert_eq!(c & 0xFFFF_FFFF, a & 0xFFFF_FFFF);
        assert_eq!(s.get(a), None);
        assert_eq!(s.get(c), Some(&"c"));
        assert_eq!(s.get_mut(b).map(|v| *v), Some("b"));
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn made_up_ids_find_nothing() {
        let mut s = Slab::default();
        let a = s.insert(1);
        for id in [0, u64::MAX, a + 1, a ^ (1 << 32), 1 << 40] {
            assert_eq!(s.get(id), None);
            assert_eq!(s.remove(id), None);
        }
        assert_eq!(s.get(a), Some(&1));
    }
}
