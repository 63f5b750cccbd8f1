//! A rank's bell: a FIFO beside its segment, so that a rank can sleep in one `epoll` for
//! shared memory and TCP at once (the TCP transport's event loop watches the FIFO).
//!
//! Local senders write one byte into a receiver's bell only when the receiver's
//! `sleeping` word says it sleeps that way ([`BELL_SLEEPER`]); a receiver sleeping on its
//! futex is rung through the futex as before. The FIFO is created before the set-up's
//! first barrier, opened by the other local ranks before the second and unlinked after
//! it, like the segment.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use crate::error::{FabricError, IoStep};

/// Added to a segment's `sleeping` word by a thread that sleeps watching the bell (the
/// low bits count futex sleepers).
pub(crate) const BELL_SLEEPER: u32 = 1 << 16;

/// The path of a rank's bell.
pub(crate) fn bell_path(segment: &str) -> String {
    format!("/dev/shm{segment}.bell")
}

/// This rank's bell and the write ends of the other local ranks' bells.
pub(crate) struct Bells {
    /// This rank's FIFO, opened read-write (so the open never blocks and the rank's own
    /// wakes can ring it).
    mine: OwnedFd,
    /// Write ends by local index (None for this rank, and for a peer without a bell).
    peers: Vec<Option<OwnedFd>>,
    /// This rank's local index (its bell is `mine`).
    me_local: usize,
}

/// Creates this rank's bell (before the first set-up barrier).
///
/// # Errors
/// [`FabricError::Io`] if the FIFO cannot be created or opened.
pub(crate) fn create(segment: &str) -> Result<OwnedFd, FabricError> {
    let path = bell_path(segment);
    let io = |e: Errno| FabricError::Io {
        step: IoStep::BellCreate { path: path.clone() },
        source: e.into(),
    };
    // A stale FIFO of the same name can only be this job's own (the job id is random).
    let _ = rustix::fs::unlink(&path);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &path,
        rustix::fs::FileType::Fifo,
        Mode::RUSR | Mode::WUSR,
        0,
    )
    .map_err(io)?;
    rustix::fs::open(
        &path,
        OFlags::RDWR | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io)
}

impl Bells {
    /// Opens the write ends of the other local ranks' bells (between the set-up's
    /// barriers); `segments` are the segment names by local index. A peer that made no
    /// bell (a process that set up only a segment) never sleeps in an event loop: it is
    /// rung through its futex alone.
    ///
    /// # Errors
    /// [`FabricError::Io`] naming the bell that exists but could not be opened.
    pub(crate) fn open(
        mine: OwnedFd,
        me_local: usize,
        segments: &[(String, u32)],
    ) -> Result<Bells, FabricError> {
        let mut peers = Vec::with_capacity(segments.len());
        for (i, (name, owner)) in segments.iter().enumerate() {
            if i == me_local {
                peers.push(None);
                continue;
            }
            let path = bell_path(name);
            match rustix::fs::open(
                &path,
                OFlags::WRONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => peers.push(Some(fd)),
                Err(Errno::NOENT) => peers.push(None),
                Err(e) => {
                    return Err(FabricError::Io {
                        step: IoStep::BellOpen {
                            path: path.clone(),
                            owner: *owner,
                        },
                        source: e.into(),
                    })
                }
            }
        }
        Ok(Bells {
            mine,
            peers,
            me_local,
        })
    }

    /// This rank's bell, for an event loop to watch.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.mine.as_fd()
    }

    /// Rings the bell of local rank `local` (this rank's own included).
    pub(crate) fn ring(&self, local: usize) {
        let fd = if local == self.me_local {
            self.mine.as_fd()
        } else {
            match self.peers.get(local) {
                Some(Some(fd)) => fd.as_fd(),
                _ => return,
            }
        };
        // A full FIFO (EAGAIN) already holds a ring the sleeper has not drained: it
        // wakes all the same.
        let _ = rustix::io::write(fd, &[1]);
    }

    /// Empties this rank's bell after a sleep, so that its next ring is seen.
    pub(crate) fn drain(&self) {
        let mut b = [0u8; 64];
        while matches!(rustix::io::read(self.mine.as_fd(), &mut b), Ok(n) if n == b.len()) {}
    }
}

/// Removes a bell's name (the open ends stay valid).
pub(crate) fn unlink(segment: &str) {
    // A name already gone is what the caller wants.
    let _ = rustix::fs::unlink(bell_path(segment));
}
