//! Moving distributed datasets: redistribution in memory, parallel files.

use std::borrow::Cow;
use std::ffi::{c_char, c_void};
use std::path::Path;

use spools::{Commit, ExchangeOptions, Format, ReadOptions, WriteOptions};
use spools_map::Layout;

use crate::args::{bytes, bytes_mut, handle, string};
use crate::declined::{cause_of, placeholder, settle};

use crate::layout::spools_layout_t;
use crate::status::{guard, spools_status_t, Failure};
use crate::world::spools_world_t;

/// Moves a distributed dataset from layout `from` to layout `to`: rank r passes its
/// share of unit r of each (`spools_layout_local_bytes()`). Collective over the world.
///
/// Thread safety: as every collective.
///
/// ```c
/// /* rows on 4 ranks to columns on 4 ranks */
/// spools_redistribute(world, rows, rows_len, by_rows, cols, cols_len, by_cols);
/// ```
///
/// Errors: `SPOOLS_ERR_LAYOUT` (layouts of different datasets, buffers that are not
/// this rank's share), `SPOOLS_ERR_PEER_GONE`.
///
/// # Safety
/// `world` is NULL or a live world; `src` holds `src_len` bytes, `dst` `dst_len`
/// writable bytes; the layouts are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn spools_redistribute(
    world: *const spools_world_t,
    src: *const c_void,
    src_len: usize,
    from: *const spools_layout_t,
    dst: *mut c_void,
    dst_len: usize,
    to: *const spools_layout_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        let comm = w.world.io_communicator()?;
        let me = u64::from(comm.rank());
        let (from_ptr, to_ptr) = (from, to);
        // SAFETY: the caller's contract.
        let (from, to) = unsafe { (handle(from), handle(to)) };
        // SAFETY: the caller's contract.
        // (copied first when it overlaps `dst`).
        let s = unsafe { crate::dtype::send_view::<u8>(src, src_len, dst, dst_len, "src") };
        // SAFETY: the caller's contract.
        let d = unsafe { bytes_mut(dst, dst_len, "dst") };
        // A bad layout handle or buffer (NULL), or a wrong share: this rank declines its
        // part (the first thing wrong is its cause).
        let checked = (|| {
            let (from, to) = (from?, to?);
            let (s, d) = (s?, d?);
            if let Some(p) = share_problem(s.len(), &from.layout, me, "src")? {
                return Err(p);
            }
            if let Some(p) = share_problem(d.len(), &to.layout, me, "dst")? {
                return Err(p);
            }
            Ok((s, &from.layout, d, &to.layout))
        })();
        let (mut spare_from, mut spare_to) = (None, None);
        let (s, from, d, to, problem) = match checked {
            Ok((s, from, d, to)) => (s, from, d, to, None),
            Err(p) => {
                let from = own_or(from_ptr, &mut spare_from)?;
                let to = own_or(to_ptr, &mut spare_to)?;
                (Cow::Borrowed(&[][..]), from, &mut [][..], to, Some(p))
            }
        };
        let opts = ExchangeOptions {
            declined: problem.as_ref().map(cause_of),
            ..ExchangeOptions::default()
        };
        let r = spools_io::redistribute(comm, &s, from, d, to, &opts);
        settle(problem, r).map(drop)
    })
}

/// `spools_write_params_t.field_mask` bit: `format` is set.
pub const SPOOLS_WRITE_FIELD_FORMAT: u64 = 1;
/// `spools_write_params_t.field_mask` bit: `sync` is set.
pub const SPOOLS_WRITE_FIELD_SYNC: u64 = 2;
/// `spools_write_params_t.field_mask` bit: `checksums` is set.
pub const SPOOLS_WRITE_FIELD_CHECKSUMS: u64 = 4;
/// `spools_write_params_t.field_mask` bit: `integrity` is set.
pub const SPOOLS_WRITE_FIELD_INTEGRITY: u64 = 8;
/// `spools_write_params_t.field_mask` bit: `coll_buffer` is set.
pub const SPOOLS_WRITE_FIELD_COLL_BUFFER: u64 = 16;
/// `spools_write_params_t.field_mask` bit: `in_place` is set.
pub const SPOOLS_WRITE_FIELD_IN_PLACE: u64 = 32;

/// Options of `spools_write_file()`. Only the fields whose bit is set in `field_mask`
/// are read (the others keep their defaults), so the struct can grow without breaking
/// programs built against an older header.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct spools_write_params_t {
    /// Which fields are set (`SPOOLS_WRITE_FIELD_*` bits).
    pub field_mask: u64,
    /// `"canonical"` (default: the raw canonical bytes), `"npy"`,
    /// `"raid0(unit=SIZE,count=K)"` or `"raid5(unit=SIZE,count=K)"` (striped unit
    /// files beside a manifest at the path), or `"zarr(chunk=AxB,shard=CxD,codec=zstd)"`
    /// (a Zarr v3 array, a directory; `shard=` and `codec=` optional).
    pub format: *const c_char,
    /// Non-zero: the data is durable (fsync) before the call returns. Default 0.
    pub sync: i32,
    /// Non-zero: also write block checksums (a `.spools-sums` sidecar for canonical and
    /// `.npy` files). Default 0.
    pub checksums: i32,
    /// Non-zero (default): checksum the transfer units of the reshuffle.
    pub integrity: i32,
    /// Bytes of collective buffer per aggregator (0: the configuration's `coll_buffer`).
    pub coll_buffer: usize,
    /// Non-zero: write a canonical or `.npy` file in place instead of replacing it
    /// atomically (default 0).
    pub in_place: i32,
}

/// `spools_read_params_t.field_mask` bit: `checksums` is set.
pub const SPOOLS_READ_FIELD_CHECKSUMS: u64 = 1;
/// `spools_read_params_t.field_mask` bit: `integrity` is set.
pub const SPOOLS_READ_FIELD_INTEGRITY: u64 = 2;
/// `spools_read_params_t.field_mask` bit: `coll_buffer` is set.
pub const SPOOLS_READ_FIELD_COLL_BUFFER: u64 = 4;

/// Options of `spools_read_file()`, with a field mask as `spools_write_params_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct spools_read_params_t {
    /// Which fields are set (`SPOOLS_READ_FIELD_*` bits).
    pub field_mask: u64,
    /// Non-zero: verify the blocks read against the checksum sidecar. Default 0.
    pub checksums: i32,
    /// Non-zero (default): checksum the transfer units of the reshuffle.
    pub integrity: i32,
    /// Bytes of collective buffer per aggregator (0: the configuration's).
    pub coll_buffer: usize,
}

/// The layout a rank that declines its part passes: its own when the handle is live (so
/// that what the call checks before it looks at the declined part, such as a file's size
/// against the layout's, finds nothing else wrong), else a placeholder, kept in `spare`.
fn own_or(layout: *const spools_layout_t, spare: &mut Option<Layout>) -> Result<&Layout, Failure> {
    // SAFETY: `layout` is NULL or a handle this library gave out (the caller's contract
    // of every call that takes one).
    if let Ok(l) = unsafe { handle(layout) } {
        return Ok(&l.layout);
    }
    Ok(spare.insert(placeholder()?))
}

/// The path a rank that declines its part of a file call passes when it has none of its
/// own (a NULL or non-UTF-8 path): only messages name it.
const DECLINED_PATH: &str = "(declined)";

/// The bytes rank `unit` holds of `layout` (0 past its units).
pub(crate) fn share(layout: &Layout, unit: u64) -> Result<u64, Failure> {
    if unit >= layout.units() {
        return Ok(0);
    }
    Ok(layout.local_bytes(unit)?)
}

/// This rank's argument error when a buffer of `len` bytes is not its share of `layout`
/// (the rank then takes part with nothing, so that the call fails on every rank).
fn share_problem(
    len: usize,
    layout: &Layout,
    unit: u64,
    what: &str,
) -> Result<Option<Failure>, Failure> {
    let want = share(layout, unit)?;
    if len as u64 == want {
        return Ok(None);
    }
    Ok(Some(Failure::new(
        spools_status_t::SPOOLS_ERR_LAYOUT,
        format!("{what} is {len} bytes, but rank {unit}'s share of {layout} is {want} bytes"),
    )))
}

/// The write options `p` sets.
///
/// # Safety
/// `p` is NULL or points to parameters whose `format`, when set, is a NUL-terminated
/// string.
unsafe fn write_options(p: *const spools_write_params_t) -> Result<WriteOptions, Failure> {
    let mut o = WriteOptions::default();
    if p.is_null() {
        return Ok(o);
    }
    // SAFETY: non-NULL parameters (the caller's contract).
    let p = unsafe { &*p };
    let has = |bit: u64| p.field_mask & bit != 0;
    if has(SPOOLS_WRITE_FIELD_FORMAT) {
        // SAFETY: the caller's contract.
        o.format = Format::parse(
            unsafe { string(p.format, "params.format") }?,
            Vec::new(),
            false,
        )
        .map_err(|e| Failure::arg(e.to_string()))?;
    }
    if has(SPOOLS_WRITE_FIELD_SYNC) {
        o.sync = p.sync != 0;
    }
    if has(SPOOLS_WRITE_FIELD_CHECKSUMS) {
        o.checksums = p.checksums != 0;
    }
    if has(SPOOLS_WRITE_FIELD_INTEGRITY) {
        o.integrity = p.integrity != 0;
    }
    if has(SPOOLS_WRITE_FIELD_COLL_BUFFER) && p.coll_buffer != 0 {
        o.coll_buffer = Some(p.coll_buffer);
    }
    if has(SPOOLS_WRITE_FIELD_IN_PLACE) && p.in_place != 0 {
        o.commit = Commit::InPlace;
    }
    Ok(o)
}

/// Writes this rank's share (unit `rank` of `layout`, exactly `len` =
/// `spools_layout_local_bytes()` bytes) of a dataset to the parallel file `path`
/// (missing directories on its way are created). Collective over the world. `params`
/// may be NULL (a canonical file, replaced atomically).
///
/// Thread safety: as every collective.
///
/// ```c
/// spools_write_params_t p = SPOOLS_WRITE_PARAMS_DEFAULT;
/// p.field_mask |= SPOOLS_WRITE_FIELD_FORMAT;
/// p.format = "npy";
/// spools_write_file(world, "out.npy", mine, mine_len, layout, &p);
/// ```
///
/// Errors: `SPOOLS_ERR_LAYOUT` (a buffer that is not this rank's share),
/// `SPOOLS_ERR_IO` (the file system), `SPOOLS_ERR_INVALID_ARG` (bad options, a format
/// spec that does not fit the layout), `SPOOLS_ERR_UNSUPPORTED` (what the format cannot
/// store here, e.g. a sharded Zarr array of `bytes(n)`), `SPOOLS_ERR_UNAVAILABLE` (HDF5
/// without a libhdf5 to load), `SPOOLS_ERR_PEER_GONE`; every rank gets the error.
///
/// # Safety
/// `world` is NULL or a live world; `path` is a NUL-terminated string; `data` holds
/// `len` bytes; `layout` is NULL or live; `params` as in `spools_write_params_t`.
#[no_mangle]
pub unsafe extern "C" fn spools_write_file(
    world: *const spools_world_t,
    path: *const c_char,
    data: *const c_void,
    len: usize,
    layout: *const spools_layout_t,
    params: *const spools_write_params_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        let comm = w.world.io_communicator()?;
        let me = u64::from(comm.rank());
        // A bad path, layout handle, buffer (NULL) or option, or a wrong share: this rank
        // declines its part (the first thing wrong is its cause).
        let checked = (|| {
            // SAFETY: the caller's contract.
            let path = unsafe { string(path, "path") }?;
            // SAFETY: the caller's contract.
            let l = unsafe { handle(layout) }?;
            // SAFETY: the caller's contract.
            let d = unsafe { bytes(data, len, "data") }?;
            // SAFETY: the caller's contract.
            let opts = unsafe { write_options(params) }?;
            if let Some(p) = share_problem(d.len(), &l.layout, me, "data")? {
                return Err(p);
            }
            Ok((path, d, &l.layout, opts))
        })();
        let mut spare = None;
        let (path, d, l, mut opts, problem) = match checked {
            Ok((path, d, l, opts)) => (path, d, l, opts, None),
            Err(p) => {
                // (The format is the default one: a declining rank knows no other.)
                let opts = WriteOptions::default();
                (
                    DECLINED_PATH,
                    &[][..],
                    own_or(layout, &mut spare)?,
                    opts,
                    Some(p),
                )
            }
        };
        opts.declined = problem.as_ref().map(cause_of);
        let r = spools_io::file::write(comm, Path::new(path), d, l, &opts);
        settle(problem, r).map(drop)
    })
}

/// Reads the parallel file `path` (written with any number of ranks and any layout of
/// the same dataset, in any format) into this rank's share of `layout` (`len` bytes).
/// Collective over the world. `params` may be NULL.
///
/// Thread safety: as every collective.
///
/// Errors: `SPOOLS_ERR_NOT_FOUND` (no such file), `SPOOLS_ERR_DAMAGED` (a checksum, a
/// missing unit beyond what parity rebuilds, a malformed header or metadata),
/// `SPOOLS_ERR_UNSUPPORTED` (a well-formed file using what Spools does not read: a
/// codec, a data type), `SPOOLS_ERR_UNAVAILABLE` (HDF5 without a libhdf5 to load),
/// `SPOOLS_ERR_LAYOUT` (the file holds another dataset), `SPOOLS_ERR_IO`,
/// `SPOOLS_ERR_PEER_GONE`.
///
/// # Safety
/// As `spools_write_file()`, with `data` holding `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn spools_read_file(
    world: *const spools_world_t,
    path: *const c_char,
    data: *mut c_void,
    len: usize,
    layout: *const spools_layout_t,
    params: *const spools_read_params_t,
) -> spools_status_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { handle(world) }?;
        let comm = w.world.io_communicator()?;
        let me = u64::from(comm.rank());
        let mut o = ReadOptions::default();
        if !params.is_null() {
            // SAFETY: non-NULL parameters (the caller's contract).
            let p = unsafe { &*params };
            if p.field_mask & SPOOLS_READ_FIELD_CHECKSUMS != 0 {
                o.checksums = p.checksums != 0;
            }
            if p.field_mask & SPOOLS_READ_FIELD_INTEGRITY != 0 {
                o.integrity = p.integrity != 0;
            }
            if p.field_mask & SPOOLS_READ_FIELD_COLL_BUFFER != 0 && p.coll_buffer != 0 {
                o.coll_buffer = Some(p.coll_buffer);
            }
        }
        // A bad path, layout handle or buffer (NULL), or a wrong share: this rank declines
        // its part (the first thing wrong is its cause).
        let checked = (|| {
            // SAFETY: the caller's contract.
            let path = unsafe { string(path, "path") }?;
            // SAFETY: the caller's contract.
            let l = unsafe { handle(layout) }?;
            // SAFETY: the caller's contract.
            let d = unsafe { bytes_mut(data, len, "data") }?;
            if let Some(p) = share_problem(d.len(), &l.layout, me, "data")? {
                return Err(p);
            }
            Ok((path, d, &l.layout))
        })();
        let mut spare = None;
        let (path, d, l, problem) = match checked {
            Ok((path, d, l)) => (path, d, l, None),
            Err(p) => (
                DECLINED_PATH,
                &mut [][..],
                own_or(layout, &mut spare)?,
                Some(p),
            ),
        };
        o.declined = problem.as_ref().map(cause_of);
        let r = spools_io::file::read(comm, Path::new(path), d, l, &o);
        settle(problem, r).map(drop)
    })
}
