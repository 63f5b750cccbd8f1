//! A link owner's sending thread: the rank hands it each ADU's stripe and goes on (the
//! next ADU is reshuffled while this one is on the wire: double buffering); at most one
//! stripe waits while another is sent, which bounds what a stream holds.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

use spools_proto::stream::{su_range, tus, Close, Frame, Su};
use spools_stream::{LinkSender, SendError};

/// What the rank hands its link thread.
enum Work {
    /// ADU `adu` (of `size` bytes): this link's SUs, in order.
    Adu {
        adu: u64,
        size: u64,
        stripe: Vec<u8>,
    },
    /// The end of the stream after `adus` ADUs.
    Close { adus: u64 },
}

/// The sending thread of the link this rank owns.
pub(crate) struct LinkThread {
    link: u16,
    tx: Option<SyncSender<Work>>,
    handle: Option<JoinHandle<Result<(), SendError>>>,
}

impl LinkThread {
    /// Starts sending on `sender` (link `s` of `links`) for stream 1 with TUs of `tu`.
    pub(crate) fn start(sender: LinkSender, links: u16, tu: u64) -> std::io::Result<LinkThread> {
        let link = sender.link();
        let (tx, rx) = sync_channel::<Work>(1);
        let handle = std::thread::Builder::new()
            .name(format!("spools-stream-link-{link}"))
            .spawn(move || {
                let mut l = sender;
                for w in rx {
                    match w {
                        Work::Adu { adu, size, stripe } => {
                            send_sus(&mut l, links, tu, adu, size, &stripe)?;
                        }
                        Work::Close { adus } => {
                            l.send(&Frame::Close(Close { stream: 1, adus }))?;
                            return l.finish();
                        }
                    }
                }
                Ok(())
            })?;
        Ok(LinkThread {
            link,
            tx: Some(tx),
            handle: Some(handle),
        })
    }

    /// The link's index.
    pub(crate) fn link(&self) -> u16 {
        self.link
    }

    /// Whether the thread has stopped (it failed: its error comes from [`LinkThread::end`]).
    pub(crate) fn failed(&self) -> bool {
        self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Hands over ADU `adu`'s stripe (waits while another one is still waiting). `Err`
    /// when the thread has stopped: [`LinkThread::end`] tells why.
    pub(crate) fn send(&mut self, adu: u64, size: u64, stripe: Vec<u8>) -> Result<(), ()> {
        let tx = self.tx.as_ref().ok_or(())?;
        tx.send(Work::Adu { adu, size, stripe }).map_err(|_| ())
    }

    /// Ends the stream after `adus` ADUs (`None`: the stream is abandoned) and waits for
    /// the thread: its outcome.
    pub(crate) fn end(&mut self, adus: Option<u64>) -> Result<(), SendError> {
        if let (Some(tx), Some(adus)) = (self.tx.take(), adus) {
            let _ = tx.send(Work::Close { adus });
        }
        self.tx = None;
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(SendError::Format("the link thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for LinkThread {
    fn drop(&mut self) {
        // Abandoned (an error elsewhere): not waited for, since its socket may be stuck;
        // the thread ends with its work or its link (dropping the sender closes it).
        self.tx = None;
        self.handle = None;
    }
}

/// Sends this link's SUs of one ADU: SU `s` of every TU, taken in order from `stripe`.
fn send_sus(
    l: &mut LinkSender,
    links: u16,
    tu: u64,
    adu: u64,
    size: u64,
    stripe: &[u8],
) -> Result<(), SendError> {
    let s = l.link();
    let mut at = 0usize;
    for t in 0..tus(size, tu) {
        let Some((off, len)) = su_range(size, tu, links, t, s) else {
            continue;
        };
        let p = stripe
            .get(at..at + len as usize)
            .ok_or(SendError::Format("the stripe is shorter than its SUs"))?;
        let su = Su {
            stream: 1,
            su: s,
            link: s,
            adu,
            tu: t,
            offset: off,
            size,
            crc: crc32c::crc32c(p),
        };
        l.send_su(&su, p)?;
        at += len as usize;
    }
    Ok(())
}
