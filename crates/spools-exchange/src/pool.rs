//! Transfer-unit buffers kept from one exchange to the next. A fresh buffer of half a
//! mebibyte is fresh pages: a page fault every 4 KiB, zeroed by the kernel and again by
//! the allocation, then unmapped when dropped, which costs as much as packing the runs.

use std::sync::Mutex;

/// Bytes of buffers kept at most (per process): a window of two 512 KiB transfer units
/// each way with 4 peers.
const KEEP_BYTES: usize = 16 << 20;

static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// A buffer of `len` bytes (of unspecified values) with room for at least `cap`.
pub(super) fn take(len: usize, cap: usize) -> Vec<u8> {
    let want = cap.max(len);
    let kept = POOL.lock().ok().and_then(|mut p| {
        let i = p.iter().position(|b| b.capacity() >= want)?;
        Some(p.swap_remove(i))
    });
    let mut b = kept.unwrap_or_else(|| Vec::with_capacity(want));
    if b.len() >= len {
        b.truncate(len);
    } else {
        b.resize(len, 0);
    }
    b
}

/// Keeps `b` for a later [`take`], unless the pool holds enough already.
pub(super) fn give(b: Vec<u8>) {
    if b.capacity() == 0 {
        return;
    }
    if let Ok(mut p) = POOL.lock() {
        let held: usize = p.iter().map(Vec::capacity).sum();
        if held + b.capacity() <= KEEP_BYTES {
            p.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_with_the_asked_length_and_room() {
        let mut b = take(100, 1000);
        assert_eq!(b.len(), 100);
        assert!(b.capacity() >= 1000);
        b[99] = 7;
        give(b);
        let b = take(10, 500);
        assert_eq!(b.len(), 10);
        let c = take(2000, 0);
        assert_eq!(c.len(), 2000);
        give(b);
        give(c);
        // Beyond the bound, buffers are dropped, not kept.
        give(Vec::with_capacity(KEEP_BYTES + 1));
        let held: usize = POOL.lock().unwrap().iter().map(Vec::capacity).sum();
        assert!(held <= KEEP_BYTES);
    }
}
