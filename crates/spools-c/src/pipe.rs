//! Parallel pipes between two separately launched programs.

use std::ffi::{c_char, c_void};

use spools::Communicator;
use spools_io::pipe::{PipeName, PipeReader, PipeWriter};
use spools_io::PipeError;

use crate::args::{bytes, bytes_mut, handle, handle_mut, out, string, Handle};
use crate::declined::decline;
use crate::io::share;
use crate::layout::spools_layout_t;
use crate::status::{guard, spools_status_t, Failure};
use crate::world::spools_world_t;

enum End {
    Writer(PipeWriter),
    Reader(PipeReader),
    Closed,
}

/// One end of a parallel pipe: a producer program's writer or a consumer program's
/// reader, each rank holding its share of every record.
pub struct spools_pipe_t {
    magic: u64,
    end: End,
    /// This rank's share of a record, in bytes.
    share: usize,
}

impl Handle for spools_pipe_t {
    const MAGIC: u64 = 0x5350_4f4f_4c50_4950;
    const NAME: &'static str = "spools_pipe_t";
    fn magic(&self) -> u64 {
        self.magic
    }
}

impl spools_pipe_t {
    /// A record buffer of `len` bytes must be exactly this rank's share.
    fn check_share(&self, len: usize) -> Result<(), Failure> {
        if len == self.share {
            return Ok(());
        }
        Err(Failure::arg(format!(
            "the buffer is {len} bytes, but this rank's share of a record is {} bytes",
            self.share
        )))
    }
}

/// The pipe name argument: NULL means the environment's (`SPOOLS_PIPE_OUT` for a
/// writer, `SPOOLS_PIPE_IN` for a reader, else stdout / stdin).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
unsafe fn name_arg(name: *const c_char, output: bool) -> Result<PipeName, Failure> {
    if name.is_null() {
        return Ok(if output {
            PipeName::output_from_env()?
        } else {
            PipeName::input_from_env()?
        });
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { string(name, "name") }?.parse::<PipeName>()?)
}

/// Opens an end over `comm`, the world's I/O communicator (the end keeps a handle of its
/// own); `share` is this rank's share of a record.
fn open(
    comm: &Communicator,
    share: usize,
    make: impl FnOnce(&Communicator) -> Result<End, PipeError>,
) -> Result<*mut spools_pipe_t, Failure> {
    // Opening fails on every rank when it fails: every rank returns the faulty rank's
    // status (a rank that only heard of it gets its kind).
    let end = make(comm)?;
    Ok(Box::into_raw(Box::new(spools_pipe_t {
        magic: spools_pipe_t::MAGIC,
        end,
        share,
    })))
}

/// Takes this rank's part in the opening the other ranks make, only to fail it, because
/// this rank's own arguments are wrong (`f`); returns `f`. The opening's first agreement
/// then fails on every rank before any meeting: here with `f`, on the others with `f`'s
/// status and message, naming this rank. Nothing waits for this rank.
fn decline_open(comm: &Communicator, f: Failure, output: bool) -> Failure {
    decline(f, |why| {
        if output {
            PipeWriter::open_declined(comm, why)
        } else {
            PipeReader::open_declined(comm, why)
        }
    })
}

/// Opens a writing (`output`) or reading end: the body of both open calls.
///
/// # Safety
/// As `spools_pipe_open_writer()`.
unsafe fn open_end(
    world: *const spools_world_t,
    name: *const c_char,
    layout: *const spools_layout_t,
    pipe: *mut *mut spools_pipe_t,
    output: bool,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        let comm = w.world.io_communicator()?;
        // A bad layout handle, name or output pointer on this rank: it takes part in the
        // opening only to fail it, on every rank (`decline_open`).
        let checked = (|| {
            // SAFETY: the caller's contract.
            let l = unsafe { handle(layout) }?;
            // SAFETY: the caller's contract.
            let pipe = unsafe { out(pipe, "pipe") }?;
            // SAFETY: the caller's contract.
            let n = unsafe { name_arg(name, output) }?;
            let share = usize::try_from(share(&l.layout, u64::from(comm.rank()))?)
                .map_err(|_| Failure::arg("this rank's share does not fit in memory"))?;
            Ok((l, pipe, n, share))
        })();
        let (l, pipe, n, share) = match checked {
            Ok(v) => v,
            Err(f) => return Err(decline_open(comm, f, output)),
        };
        *pipe = open(comm, share, |c| {
            Ok(if output {
                End::Writer(PipeWriter::open(c, &n, &l.layout)?)
            } else {
                End::Reader(PipeReader::open(c, &n, &l.layout)?)
            })
        })?;
        Ok(())
    })
}

/// Opens the writing end of pipe `name` (`"pipe:NAME"`, `"tcp:HOST:PORT"`, `"stdout"`;
/// NULL: `SPOOLS_PIPE_OUT`, else stdout) for records distributed as `layout`.
/// Collective over the world; waits for the consumer program (up to
/// `SPOOLS_PIPE_TIMEOUT`).
///
/// Thread safety: as every collective; a pipe is used by one thread at a time.
///
/// ```c
/// spools_pipe_t *p;
/// spools_pipe_open_writer(world, "pipe:frames", layout, &p);
/// for (int i = 0; i < 10; i++) spools_pipe_write(p, mine, mine_len);
/// spools_pipe_close(p);
/// ```
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a bad name), `SPOOLS_ERR_LAYOUT` (the consumer's
/// layout is of another dataset), `SPOOLS_ERR_TRANSPORT` (no consumer in time).
///
/// # Safety
/// `world` is NULL or a live world; `name` NULL or a NUL-terminated string; `layout`
/// NULL or live; `pipe` writable.
#[no_mangle]
pub unsafe extern "C" fn spools_pipe_open_writer(
    world: *const spools_world_t,
    name: *const c_char,
    layout: *const spools_layout_t,
    pipe: *mut *mut spools_pipe_t,
) -> spools_status_t {
    // SAFETY: the caller's contract.
    unsafe { open_end(world, name, layout, pipe, true) }
}

/// Opens the reading end of pipe `name` (NULL: `SPOOLS_PIPE_IN`, else stdin) for records
/// distributed as `layout`. Collective over the world; waits for the producer.
///
/// Thread safety: as `spools_pipe_open_writer()`.
///
/// # Safety
/// As `spools_pipe_open_writer()`.
#[no_mangle]
pub unsafe extern "C" fn spools_pipe_open_reader(
    world: *const spools_world_t,
    name: *const c_char,
    layout: *const spools_layout_t,
    pipe: *mut *mut spools_pipe_t,
) -> spools_status_t {
    // SAFETY: the caller's contract.
    unsafe { open_end(world, name, layout, pipe, false) }
}

/// Sends the next record: this rank's share, `len` bytes. Collective over the
/// producer's ranks.
///
/// Errors: `SPOOLS_ERR_INVALID_ARG` (a reader, a share of the wrong size),
/// `SPOOLS_ERR_PEER_GONE` (a consumer rank went away).
///
/// # Safety
/// `pipe` is NULL or a live pipe no other thread uses; `data` holds `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn spools_pipe_write(
    pipe: *mut spools_pipe_t,
    data: *const c_void,
    len: usize,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { handle_mut(pipe) }?;
        // A NULL buffer or a wrong share on this rank: it takes part in the record's
        // agreement only to fail it, on every rank (nothing is sent; the pipe stays usable).
        // SAFETY: the caller's contract.
        let checked =
            unsafe { bytes(data, len, "data") }.and_then(|d| p.check_share(len).map(|()| d));
        match &mut p.end {
            End::Writer(w) => match checked {
                Ok(d) => Ok(w.write(d)?),
                Err(f) => Err(decline(f, |why| w.decline_write(why))),
            },
            _ => Err(Failure::arg("the pipe is a reader (or closed)")),
        }
    })
}

/// Receives the next record into this rank's share `buf` (`len` bytes): `*got` is 1, or
/// 0 at the end of the stream (the producer closed the pipe). Collective over the
/// consumer's ranks.
///
/// Errors: `SPOOLS_ERR_PEER_GONE` (a producer rank went away before closing),
/// `SPOOLS_ERR_DAMAGED` (a checksum), `SPOOLS_ERR_INVALID_ARG` (a writer, a buffer of
/// the wrong size).
///
/// # Safety
/// `pipe` is NULL or a live pipe no other thread uses; `buf` holds `len` writable bytes;
/// `got` is writable.
#[no_mangle]
pub unsafe extern "C" fn spools_pipe_read(
    pipe: *mut spools_pipe_t,
    buf: *mut c_void,
    len: usize,
    got: *mut i32,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { handle_mut(pipe) }?;
        // As a write: a wrong argument on this rank fails the read on every rank, before
        // a byte is taken (the record stays the next one).
        // SAFETY: the caller's contract.
        let checked = unsafe { out(got, "got") }.and_then(|got| {
            // SAFETY: the caller's contract.
            let b = unsafe { bytes_mut(buf, len, "buf") }?;
            p.check_share(len)?;
            Ok((got, b))
        });
        match &mut p.end {
            End::Reader(r) => match checked {
                Ok((got, b)) => {
                    *got = i32::from(r.read(b)?);
                    Ok(())
                }
                Err(f) => Err(decline(f, |why| r.decline_read(why))),
            },
            _ => Err(Failure::arg("the pipe is a writer (or closed)")),
        }
    })
}

/// Records sent or received so far.
///
/// # Safety
/// `pipe` is NULL or a live pipe; `records` is writable.
#[no_mangle]
pub unsafe extern "C" fn spools_pipe_records(
    pipe: *const spools_pipe_t,
    records: *mut u64,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { handle(pipe) }?;
        // SAFETY: the caller's contract.
        *unsafe { out(records, "records") }? = match &p.end {
            End::Writer(w) => w.records(),
            End::Reader(r) => r.records(),
            End::Closed => 0,
        };
        Ok(())
    })
}

/// Closes the end and frees it: a writer ends the stream (the consumer's next read gets
/// `*got` = 0); a reader lets go. Collective over the end's ranks. NULL does nothing.
///
/// Errors: a writer's failure to end the stream (`SPOOLS_ERR_PEER_GONE`, ...); the
/// handle is freed either way.
///
/// # Safety
/// `pipe` is NULL or a live pipe no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn spools_pipe_close(pipe: *mut spools_pipe_t) -> spools_status_t {
    guard(|| {
        if pipe.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        unsafe { handle(pipe) }?;
        // SAFETY: a live pipe made by `Box::into_raw` in `open`.
        let mut b = unsafe { Box::from_raw(pipe) };
        b.magic = 0;
        match std::mem::replace(&mut b.end, End::Closed) {
            End::Writer(w) => w.close()?,
            End::Reader(r) => drop(r),
            End::Closed => {}
        }
        Ok(())
    })
}
