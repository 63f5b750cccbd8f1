//! The sleep handshake under a model checker (loom): the real [`Sleepers`] code (what
//! `ShmTransport::wait`, `begin_sleep_elsewhere` / `end_sleep_elsewhere`, `notify`,
//! `wake` and a drain that freed space for a blocked sender run) on loom's words, with
//! messages on the real [`Ring`] over the ring model's memory (`ring_model.rs`), run by
//! senders and sleepers in every interleaving (the two-thread models all of them, the
//! others up to a preemption bound) and every outcome of the memory orderings loom
//! models. `SeqCst` accesses go to loom as the ring model's `ordered` says (a `SeqCst`
//! fence after a store or read-modify-write, where x86's locked instruction has its
//! barrier), so an access weakened right after a `SeqCst` store or read-modify-write of
//! the same thread is still ordered by that fence: the model checks the handshake as x86
//! runs it, not every weakening the language's model would allow.
//!
//! The futex is a loom lock and condition variable around the doorbell word, which keep
//! a futex's promise: a wait compares the word with the value it was given under the lock
//! (the kernel compares under its hash bucket's lock) and returns at once if they differ;
//! a wake takes the lock, so it reaches every waiter that found them equal. The bell (a
//! FIFO watched by an event loop) is a flag under a lock: readable once rung, until
//! drained. Neither ever times out: a wake-up lost leaves a thread asleep for good, which
//! loom reports as a deadlock; a message lost or not seen fails an assertion.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use loom::sync::atomic::{AtomicBool, AtomicU32};
use loom::sync::{Condvar, Mutex};

use super::futex::FutexWord;
use super::ring::{Ring, TxState, Word};
use super::ring_model::{ordered, ring, Model};
use super::sleep::Sleepers;

/// A futex word of the model.
struct Futex {
    word: AtomicU32,
    lock: Mutex<()>,
    woken: Condvar,
}

impl Futex {
    fn new() -> Futex {
        Futex {
            word: AtomicU32::new(0),
            lock: Mutex::new(()),
            woken: Condvar::new(),
        }
    }
}

impl Word<u32> for Futex {
    fn load(&self, order: Ordering) -> u32 {
        Word::load(&self.word, order)
    }
    fn store(&self, v: u32, order: Ordering) {
        Word::store(&self.word, v, order)
    }
    fn swap(&self, v: u32, order: Ordering) -> u32 {
        Word::swap(&self.word, v, order)
    }
}

impl FutexWord for Futex {
    fn fetch_add(&self, v: u32, order: Ordering) -> u32 {
        ordered(order, || self.word.fetch_add(v, order))
    }
    fn fetch_sub(&self, v: u32, order: Ordering) -> u32 {
        ordered(order, || self.word.fetch_sub(v, order))
    }
    /// No timeout: a sleep that nobody ends is a lost wake-up.
    fn wait(&self, expected: u32, _timeout: Duration) {
        let guard = self.lock.lock().unwrap();
        // The kernel reads the word after a full barrier (`futex_wait_setup`).
        loom::sync::atomic::fence(Ordering::SeqCst);
        if Word::load(&self.word, Ordering::SeqCst) != expected {
            return;
        }
        // Returning, even spuriously (a futex wait may be interrupted), means "go and look".
        drop(self.woken.wait(guard).unwrap());
    }
    fn wake(&self) {
        let _guard = self.lock.lock().unwrap();
        self.woken.notify_all();
    }
}

/// A rank's bell: a FIFO that an event loop watches for readability.
struct Bell {
    rung: Mutex<bool>,
    readable: Condvar,
}

impl Bell {
    fn ring(&self) {
        *self.rung.lock().unwrap() = true;
        self.readable.notify_all();
    }
    /// The event loop's sleep (no timeout), until the bell is readable.
    fn sleep(&self) {
        let mut rung = self.rung.lock().unwrap();
        while !*rung {
            rung = self.readable.wait(rung).unwrap();
        }
    }
    fn drain(&self) {
        *self.rung.lock().unwrap() = false;
    }
}

/// What a rank's segment and bell hold for its sleeps.
struct Rank {
    doorbell: Futex,
    sleeping: Futex,
    bell: Bell,
}

impl Rank {
    fn new() -> Arc<Rank> {
        Arc::new(Rank {
            doorbell: Futex::new(),
            sleeping: Futex::new(),
            bell: Bell {
                rung: Mutex::new(false),
                readable: Condvar::new(),
            },
        })
    }

    fn sleepers(&self) -> Sleepers<'_, Futex> {
        Sleepers::new(&self.doorbell, &self.sleeping)
    }

    /// `ShmTransport::wait`.
    fn futex_sleep(&self, nothing_to_do: impl FnOnce() -> bool) {
        self.sleepers().sleep(Duration::MAX, nothing_to_do);
    }

    /// `ShmTransport::begin_sleep_elsewhere`, the event loop's sleep on the bell,
    /// `ShmTransport::end_sleep_elsewhere` (as `spools-am`'s `sleep_on_transports`).
    fn bell_sleep(&self, nothing_to_do: impl FnOnce() -> bool) {
        if self.sleepers().begin_bell_sleep(nothing_to_do) {
            self.bell.sleep();
        }
        self.sleepers().end_bell_sleep();
        self.bell.drain();
    }

    /// `ShmTransport::notify`, after a message to this rank was published.
    fn notify(&self) {
        self.sleepers().notify(|| self.bell.ring());
    }

    /// `ShmTransport::wake`, and a drain's wake-up of a sender it freed space for.
    fn wake(&self) {
        self.sleepers().wake(|| self.bell.ring());
    }
}

/// How a receiver sleeps.
#[derive(Clone, Copy)]
enum Sleep {
    Futex,
    Bell,
}

impl Sleep {
    fn on(self, rank: &Rank, nothing_to_do: impl FnOnce() -> bool) {
        match self {
            Sleep::Futex => rank.futex_sleep(nothing_to_do),
            Sleep::Bell => rank.bell_sleep(nothing_to_do),
        }
    }
}

/// loom with `preemptions` as its preemption bound (`None`: every interleaving).
fn checker(preemptions: Option<usize>) -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = preemptions;
    b.max_branches = 100_000;
    b
}

/// A sender's `ShmTransport::try_send` of a message that fits: write, then notify.
fn send(tx: &Ring<Model>, to: &Rank, message: &[u8]) {
    let mut st = TxState::default();
    assert!(
        tx.try_write(&mut st, &[message], message.len()),
        "the ring has room"
    );
    to.notify();
}

/// A receiver's wait for `want` messages from `rings` (a poll, then a sleep when the
/// poll found nothing); returns them by ring. `ShmTransport::nothing_to_do` looks at
/// every ring.
fn receive(rank: &Rank, rings: &[Ring<Model>], want: usize, sleep: Sleep) -> Vec<Vec<Vec<u8>>> {
    let mut pos = vec![0; rings.len()];
    let mut got = vec![Vec::new(); rings.len()];
    loop {
        for (i, r) in rings.iter().enumerate() {
            r.drain(&mut pos[i], 8, &mut |b| got[i].push(b.to_vec()))
                .expect("the model's headers are well formed");
        }
        if got.iter().map(Vec::len).sum::<usize>() == want {
            return got;
        }
        sleep.on(rank, || !rings.iter().zip(&pos).any(|(r, &p)| r.ready(p)));
    }
}

fn one_sender_one_sleeper(sleep: Sleep) {
    checker(None).check(move || {
        let rank = Rank::new();
        let m = Model::new();
        let (tx, to) = (ring(&m), rank.clone());
        let sender = loom::thread::spawn(move || send(&tx, &to, b"hello"));
        let got = receive(&rank, &[ring(&m)], 1, sleep);
        sender.join().unwrap();
        assert_eq!(got, [[b"hello".to_vec()]]);
    });
}

#[test]
fn a_futex_sleeper_sees_a_message_published_as_it_goes_to_sleep_or_is_woken() {
    one_sender_one_sleeper(Sleep::Futex);
}

#[test]
fn a_bell_sleeper_sees_a_message_published_as_it_goes_to_sleep_or_is_woken() {
    one_sender_one_sleeper(Sleep::Bell);
}

#[test]
fn a_futex_sleeper_is_woken_by_each_of_two_senders() {
    checker(Some(3)).check(|| {
        let rank = Rank::new();
        let (m1, m2) = (Model::new(), Model::new());
        let senders: Vec<_> = [(ring(&m1), b"one"), (ring(&m2), b"two")]
            .into_iter()
            .map(|(tx, message)| {
                let to = rank.clone();
                loom::thread::spawn(move || send(&tx, &to, message))
            })
            .collect();
        let got = receive(&rank, &[ring(&m1), ring(&m2)], 2, Sleep::Futex);
        for s in senders {
            s.join().unwrap();
        }
        assert_eq!(got, [[b"one".to_vec()], [b"two".to_vec()]]);
    });
}

#[test]
fn a_futex_and_a_bell_sleeper_of_one_rank_are_both_woken() {
    checker(Some(4)).check(|| {
        let rank = Rank::new();
        let m = Model::new();
        let (tx, to) = (ring(&m), rank.clone());
        let sender = loom::thread::spawn(move || send(&tx, &to, b"hello"));
        // Two threads of the receiving rank (say its progress thread on the futex and its
        // application in the event loop), each until it sees the message.
        let (rx, r) = (ring(&m), rank.clone());
        let other = loom::thread::spawn(move || {
            while !rx.ready(0) {
                r.bell_sleep(|| !rx.ready(0));
            }
        });
        let rx = ring(&m);
        while !rx.ready(0) {
            rank.futex_sleep(|| !rx.ready(0));
        }
        sender.join().unwrap();
        other.join().unwrap();
    });
}

#[test]
fn a_wake_reaches_a_thread_going_to_sleep() {
    checker(None).check(|| {
        let rank = Rank::new();
        // `JobHealth`'s "troubled" flag: set SeqCst by the watchdog, which then calls the
        // transport's waker; read Relaxed by `nothing_to_do`.
        let troubled = Arc::new(AtomicBool::new(false));
        let (t, r) = (troubled.clone(), rank.clone());
        let watchdog = loom::thread::spawn(move || {
            ordered(Ordering::SeqCst, || t.store(true, Ordering::SeqCst));
            r.wake();
        });
        while !troubled.load(Ordering::Relaxed) {
            rank.futex_sleep(|| !troubled.load(Ordering::Relaxed));
        }
        watchdog.join().unwrap();
    });
}

#[test]
fn a_sender_asleep_on_a_full_ring_is_woken_by_the_drain_that_frees_space() {
    checker(Some(4)).check(|| {
        let (sender_rank, receiver_rank) = (Rank::new(), Rank::new());
        let m = Model::new();
        // Two messages of two cells fill the model's ring; the third waits for space.
        let messages = [vec![1u8; 20], vec![2; 20], vec![3; 20]];
        let (tx, me, to) = (ring(&m), sender_rank.clone(), receiver_rank.clone());
        let sender = loom::thread::spawn(move || {
            let mut st = TxState::default();
            for message in &messages {
                // `ShmTransport::try_send`: write; else flag the ring full and write
                // again; else the caller's wait, whose `nothing_to_do` asks whether the
                // consumer cleared the flag.
                loop {
                    if tx.try_write(&mut st, &[message], message.len()) {
                        break;
                    }
                    tx.flag_full(&mut st);
                    if tx.try_write(&mut st, &[message], message.len()) {
                        break;
                    }
                    me.futex_sleep(|| !tx.space_freed());
                }
                to.notify();
            }
        });
        // The receiver: `ShmTransport::drain_rings`, which wakes a sender it freed space
        // for, and sleeps on its own futex when nothing came.
        let rx = ring(&m);
        let mut pos = 0;
        let mut got = Vec::new();
        while got.len() < 3 {
            let (n, waiting) = rx
                .drain(&mut pos, 8, &mut |b| got.push(b.to_vec()))
                .expect("the model's headers are well formed");
            if waiting {
                sender_rank.wake();
            }
            if n == 0 {
                receiver_rank.futex_sleep(|| !rx.ready(pos));
            }
        }
        sender.join().unwrap();
        assert_eq!(got, [vec![1u8; 20], vec![2; 20], vec![3; 20]]);
    });
}
