//! Finding a contiguous dataset of an HDF5 file: its element type, shape and offset.

use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::path::Path;

use spools_map::DType;

use super::ffi::{self, Hdf5, Hid, Hsize, Id, Locked};
use super::{defect, signature_at, Hdf5Dataset, MAGIC};
use crate::error::{FileError, Hdf5Error};

/// Groups nested deeper than this are not searched for datasets.
const MAX_DEPTH: usize = 64;
/// Links looked at, at most, when searching a file for its datasets.
const MAX_LINKS: usize = 100_000;
/// Soft links followed, at most, on a dataset's path when looking for external links (a
/// cycle of soft links is left to the library, which refuses it).
const MAX_SOFT: usize = 64;

/// Finds the contiguous dataset `name` (a path such as `/group/sub/name`; `None`: the
/// file's only dataset, in any group) of the HDF5 file `path`: its element type, shape
/// and offset. A dataset whose data is not in the file itself (reached through an
/// external link, or stored in external raw files) is refused by name. An empty dataset
/// (no storage) is placed just after the HDF5 signature, so that it is never taken for a
/// canonical file (whose data starts at 0).
pub(crate) fn inspect(path: &Path, name: Option<&str>) -> Result<Hdf5Dataset, FileError> {
    let found = (|| -> Result<Hdf5Dataset, Hdf5Error> {
        let h = Hdf5::lock()?;
        let p = ffi::path_cstring(path, "open file")?;
        // SAFETY: a NUL-terminated path; the default access property list.
        let f = unsafe { (h.f.H5Fopen)(p.as_ptr(), ffi::F_ACC_RDONLY, ffi::P_DEFAULT) };
        let f = h.id(f, h.f.H5Fclose, "open file")?;
        let ds = match name {
            Some(n) => open_dataset(&h, &f, n)?,
            None => {
                let mut all = Vec::new();
                let mut budget = MAX_LINKS;
                list(&h, f.id, "/", 0, &mut budget, &mut all)?;
                match all.as_slice() {
                    [one] => open_dataset(&h, &f, one)?,
                    _ => return Err(Hdf5Error::WhichDataset(all)),
                }
            }
        };
        let mut d = describe(&h, &ds)?;
        if d.bytes == 0 && d.offset == 0 {
            // No storage: "at" the end of the signature (a canonical file's data starts
            // at 0, and a reader finds the signature before this offset).
            d.offset = signature_at(path).unwrap_or(0) + MAGIC.len() as u64;
        }
        Ok(d)
    })();
    found.map_err(|e| defect(path, e))
}

/// Opens the dataset `name` of the file `f`, refusing one in another file: reached
/// through an external link (on its path, or behind a soft link), whose offset is not
/// one of this file.
fn open_dataset(h: &Locked, f: &Id, name: &str) -> Result<Id, Hdf5Error> {
    no_external_link(h, f, name)?;
    let c = ffi::cstring(name, "open dataset")?;
    // SAFETY: a valid file id and NUL-terminated name.
    let ds = unsafe { (h.f.H5Dopen2)(f.id, c.as_ptr(), ffi::P_DEFAULT) };
    let ds = h.id(ds, h.f.H5Dclose, "open dataset")?;
    // The file that holds it is this file's id (the library gives one id per open file);
    // any other is a file an external link led to, e.g. behind a soft link.
    // SAFETY: a valid dataset id; the file id returned is owned (closed when dropped,
    // which only drops the reference it added when it is this file's own id).
    let of = unsafe { (h.f.H5Iget_file_id)(ds.id) };
    let of = h.id(of, h.f.H5Fclose, "open dataset")?;
    if of.id != f.id {
        return Err(Hdf5Error::external_link(
            name.to_string(),
            String::new(),
            h.file_name(of.id),
        ));
    }
    Ok(ds)
}

/// Refuses `name` when a link on its path (a group's above it or the dataset's own) is an
/// external link, naming the link and its target; soft links on the path are followed
/// (up to [`MAX_SOFT`] of them). A path that does not resolve is left to opening it
/// (which says so).
fn no_external_link(h: &Locked, f: &Id, name: &str) -> Result<(), Hdf5Error> {
    let op = "open dataset";
    let parts = |p: &str| -> Vec<String> {
        p.split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .map(str::to_string)
            .collect()
    };
    // The parts still to walk, and the path walked so far.
    let mut rest = parts(name);
    rest.reverse();
    let mut at = String::new();
    let mut soft = 0;
    while let Some(part) = rest.pop() {
        let here = format!("{at}/{part}");
        let c = ffi::cstring(&here, op)?;
        let Ok(link) = h.link(f.id, &c, op) else {
            h.message();
            return Ok(());
        };
        match link.kind() {
            ffi::L_TYPE_EXTERNAL => {
                let (file, path) = h.external_target(f.id, &c, link.val_size())?;
                return Err(Hdf5Error::external_link(
                    name.to_string(),
                    here,
                    format!("{file}:{path}"),
                ));
            }
            ffi::L_TYPE_SOFT if soft < MAX_SOFT => {
                soft += 1;
                let Ok(to) = h.soft_target(f.id, &c, link.val_size()) else {
                    h.message();
                    return Ok(());
                };
                // Absolute, or relative to the group that holds the link.
                if to.starts_with('/') {
                    at.clear();
                }
                rest.extend(parts(&to).into_iter().rev());
            }
            _ => at = here,
        }
    }
    Ok(())
}

/// Appends the paths of the datasets in `group` (whose path ends in `/`) and, through
/// hard links only (soft and external links are not followed), its subgroups.
fn list(
    h: &Locked,
    group: Hid,
    prefix: &str,
    depth: usize,
    budget: &mut usize,
    out: &mut Vec<String>,
) -> Result<(), Hdf5Error> {
    let op = "list datasets";
    let mut info = ffi::GroupInfo::default();
    // SAFETY: a valid group id and a `H5G_info_t` to fill in.
    h.ok(unsafe { (h.f.H5Gget_info)(group, &mut info) }, op)?;
    for i in 0..info.nlinks {
        if *budget == 0 {
            return Ok(());
        }
        *budget -= 1;
        // SAFETY: with a NULL buffer of size 0, returns the name's length.
        let n = unsafe {
            (h.f.H5Lget_name_by_idx)(
                group,
                c".".as_ptr(),
                ffi::INDEX_NAME,
                ffi::ITER_INC,
                i,
                std::ptr::null_mut(),
                0,
                ffi::P_DEFAULT,
            )
        };
        if n < 0 {
            return Err(h.error(op));
        }
        let mut buf = vec![0u8; n as usize + 1];
        // SAFETY: `buf` has room for the name and its NUL.
        let m = unsafe {
            (h.f.H5Lget_name_by_idx)(
                group,
                c".".as_ptr(),
                ffi::INDEX_NAME,
                ffi::ITER_INC,
                i,
                buf.as_mut_ptr().cast::<c_char>(),
                buf.len(),
                ffi::P_DEFAULT,
            )
        };
        if m < 0 {
            return Err(h.error(op));
        }
        buf.truncate(m.min(n) as usize);
        let Ok(cname) = CString::new(buf) else {
            continue;
        };
        if h.link_kind(group, &cname)? != ffi::L_TYPE_HARD {
            continue;
        }
        // SAFETY: a valid group id and NUL-terminated link name.
        let obj = unsafe { (h.f.H5Oopen)(group, cname.as_ptr(), ffi::P_DEFAULT) };
        let obj = h.id(obj, h.f.H5Oclose, op)?;
        let full = format!("{prefix}{}", cname.to_string_lossy());
        // SAFETY: a valid id.
        match unsafe { (h.f.H5Iget_type)(obj.id) } {
            ffi::I_DATASET => out.push(full),
            ffi::I_GROUP if depth < MAX_DEPTH => {
                list(h, obj.id, &format!("{full}/"), depth + 1, budget, out)?
            }
            _ => {}
        }
    }
    Ok(())
}

fn describe(h: &Locked, ds: &Id) -> Result<Hdf5Dataset, Hdf5Error> {
    let dname = h.name_of(ds.id);
    let op = "read storage layout";
    // SAFETY: a valid dataset id.
    let dcpl = h.id(
        unsafe { (h.f.H5Dget_create_plist)(ds.id) },
        h.f.H5Pclose,
        op,
    )?;
    // SAFETY: a valid dataset creation property list.
    let layout = match unsafe { (h.f.H5Pget_layout)(dcpl.id) } {
        ffi::D_CONTIGUOUS => None,
        ffi::D_COMPACT => Some("compact"),
        ffi::D_CHUNKED => Some("in chunks"),
        n if n < 0 => return Err(h.error(op)),
        _ => Some("as a virtual dataset"),
    };
    if let Some(layout) = layout {
        return Err(Hdf5Error::NotContiguous {
            dataset: dname,
            layout,
            filters: filters(h, &dcpl),
            link: Box::default(),
            elsewhere: Box::default(),
        });
    }
    // Contiguous, but possibly in external raw files (then it has no offset in this file).
    // SAFETY: a valid dataset creation property list.
    let n = unsafe { (h.f.H5Pget_external_count)(dcpl.id) };
    if n < 0 {
        return Err(h.error(op));
    }
    if n > 0 {
        return Err(Hdf5Error::external_files(
            dname,
            external_files(h, &dcpl, n),
        ));
    }
    drop(dcpl);
    let op = "read element type";
    // SAFETY: a valid dataset id.
    let t = h.id(unsafe { (h.f.H5Dget_type)(ds.id) }, h.f.H5Tclose, op)?;
    let (dtype, found) = element(h, t.id, 0);
    let dtype = dtype.ok_or_else(|| Hdf5Error::DataType {
        dataset: dname.clone(),
        found,
    })?;
    let shape = shape(h, ds)?;
    let bytes = shape.iter().fold(dtype.size(), |b, &n| b.saturating_mul(n));
    // SAFETY: a valid dataset id.
    let offset = match unsafe { (h.f.H5Dget_offset)(ds.id) } {
        ffi::HADDR_UNDEF if bytes == 0 => 0,
        ffi::HADDR_UNDEF => {
            h.message();
            return Err(Hdf5Error::Unallocated(dname));
        }
        o => o,
    };
    let written_from = written_from(h, ds);
    Ok(Hdf5Dataset {
        name: dname,
        dtype,
        shape,
        offset,
        bytes,
        written_from,
    })
}

fn shape(h: &Locked, ds: &Id) -> Result<Vec<u64>, Hdf5Error> {
    let op = "read shape";
    // SAFETY: a valid dataset id.
    let space = h.id(unsafe { (h.f.H5Dget_space)(ds.id) }, h.f.H5Sclose, op)?;
    // SAFETY: a valid dataspace id.
    let n = unsafe { (h.f.H5Sget_simple_extent_ndims)(space.id) };
    if n < 0 {
        return Err(h.error(op));
    }
    let mut dims: Vec<Hsize> = vec![0; n as usize];
    // SAFETY: `dims` has room for the `n` extents; no maximum extents wanted (NULL).
    let rc = unsafe {
        (h.f.H5Sget_simple_extent_dims)(space.id, dims.as_mut_ptr(), std::ptr::null_mut())
    };
    if rc < 0 {
        return Err(h.error(op));
    }
    Ok(dims)
}

/// The names of the `n` external raw files of a dataset (its creation property list).
fn external_files(h: &Locked, dcpl: &Id, n: c_int) -> Vec<String> {
    (0..n.max(0) as c_uint)
        .map(|i| {
            let mut name = [0 as c_char; 4096];
            let (mut offset, mut size): (i64, Hsize) = (0, 0);
            // SAFETY: `name` has room for 4096 bytes (the library writes at most that many,
            // NUL-terminated when the name fits); `offset` and `size` are filled in.
            let rc = unsafe {
                (h.f.H5Pget_external)(
                    dcpl.id,
                    i,
                    name.len(),
                    name.as_mut_ptr(),
                    &mut offset,
                    &mut size,
                )
            };
            if rc < 0 {
                h.message();
                return format!("external file {i}");
            }
            let bytes: Vec<u8> = name
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .collect()
}

/// The dataset's filters, e.g. `deflate(4)`.
fn filters(h: &Locked, dcpl: &Id) -> Vec<String> {
    // SAFETY: a valid dataset creation property list.
    let n = unsafe { (h.f.H5Pget_nfilters)(dcpl.id) };
    let mut out = Vec::new();
    for i in 0..n.max(0) as c_uint {
        let mut flags: c_uint = 0;
        let mut values = [0 as c_uint; 8];
        let mut nvalues = values.len();
        let mut name = [0 as c_char; 64];
        let mut config: c_uint = 0;
        // SAFETY: `values` holds `nvalues` entries, `name` 64 bytes (NUL-terminated by
        // the library within them).
        let id = unsafe {
            (h.f.H5Pget_filter2)(
                dcpl.id,
                i,
                &mut flags,
                &mut nvalues,
                values.as_mut_ptr(),
                name.len(),
                name.as_mut_ptr(),
                &mut config,
            )
        };
        if id < 0 {
            h.message();
            continue;
        }
        let bytes: Vec<u8> = name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        let mut s = String::from_utf8_lossy(&bytes).into_owned();
        if s.is_empty() {
            s = format!("filter {id}");
        }
        let shown = &values[..nvalues.min(values.len())];
        if !shown.is_empty() {
            let v: Vec<String> = shown.iter().map(|v| v.to_string()).collect();
            s = format!("{s}({})", v.join(", "));
        }
        out.push(s);
    }
    out
}

/// The Spools element type of the HDF5 type `t` (`None`: none, or big-endian) and how to
/// name it in an error.
fn element(h: &Locked, t: Hid, depth: usize) -> (Option<DType>, String) {
    // SAFETY: a valid datatype id (each call below only reads it).
    let (class, size, order) = unsafe {
        (
            (h.f.H5Tget_class)(t),
            (h.f.H5Tget_size)(t),
            (h.f.H5Tget_order)(t),
        )
    };
    let big = order == ffi::T_ORDER_BE;
    let endian = |name: String, d: Option<DType>| {
        if big {
            (None, format!("{name} (big-endian)"))
        } else {
            (d, name)
        }
    };
    match class {
        ffi::T_INTEGER => {
            // SAFETY: a valid integer type id.
            let unsigned = unsafe { (h.f.H5Tget_sign)(t) } == ffi::T_SGN_NONE;
            let d = match (unsigned, size) {
                (true, 1) => Some(DType::U8),
                (false, 1) => Some(DType::I8),
                (true, 2) => Some(DType::U16),
                (false, 2) => Some(DType::I16),
                (true, 4) => Some(DType::U32),
                (false, 4) => Some(DType::I32),
                (true, 8) => Some(DType::U64),
                (false, 8) => Some(DType::I64),
                _ => None,
            };
            endian(
                format!("{}{}", if unsigned { 'u' } else { 'i' }, size * 8),
                d,
            )
        }
        ffi::T_FLOAT => {
            let d = match size {
                4 => Some(DType::F32),
                8 => Some(DType::F64),
                _ => None,
            };
            endian(format!("f{}", size * 8), d)
        }
        ffi::T_ENUM => {
            let names = members(h, t);
            if size == 1 && names == ["FALSE", "TRUE"] {
                (Some(DType::U8), "bool".into())
            } else {
                (None, format!("enum {names:?}"))
            }
        }
        ffi::T_COMPOUND => compound(h, t, size, depth),
        ffi::T_STRING => {
            // SAFETY: a valid string type id.
            let vlen = unsafe { (h.f.H5Tis_variable_str)(t) } > 0;
            if vlen {
                (None, "variable-length string".into())
            } else {
                (None, format!("string of {size} bytes"))
            }
        }
        ffi::T_TIME => (None, "time".into()),
        ffi::T_BITFIELD => (None, format!("bitfield of {size} bytes")),
        ffi::T_OPAQUE => (None, format!("opaque of {size} bytes")),
        ffi::T_REFERENCE => (None, "reference".into()),
        ffi::T_VLEN => (None, "variable-length sequence".into()),
        ffi::T_ARRAY => (None, "array".into()),
        _ => {
            h.message();
            (None, "an unknown type".into())
        }
    }
}

/// The member names of a compound or enum type.
fn members(h: &Locked, t: Hid) -> Vec<String> {
    // SAFETY: a valid compound or enum type id.
    let n = unsafe { (h.f.H5Tget_nmembers)(t) };
    (0..n.max(0) as c_uint)
        .map(|i| {
            // SAFETY: `i` is below the member count; the name is the library's
            // allocation, freed by `take_string`.
            let name = unsafe { (h.f.H5Tget_member_name)(t, i) };
            h.take_string(name).unwrap_or_default()
        })
        .collect()
}

/// Complex numbers: a compound of two floats of one size named `r`, `i` (h5py) or
/// `real`, `imag`, the second right after the first.
fn compound(h: &Locked, t: Hid, size: usize, depth: usize) -> (Option<DType>, String) {
    let names = members(h, t);
    let mut parts = Vec::new();
    for i in 0..names.len() as c_uint {
        // SAFETY: `i` is below the member count; the member type is owned and closed.
        let (offset, mt) = unsafe {
            (
                (h.f.H5Tget_member_offset)(t, i),
                h.id(
                    (h.f.H5Tget_member_type)(t, i),
                    h.f.H5Tclose,
                    "read element type",
                ),
            )
        };
        let Ok(mt) = mt else {
            h.message();
            return (None, "compound".into());
        };
        let (d, found) = if depth < 4 {
            element(h, mt.id, depth + 1)
        } else {
            (None, "...".into())
        };
        parts.push((offset, d, found));
    }
    let complex = match (names.as_slice(), parts.as_slice()) {
        ([re, im], [(0, Some(a), _), (o, Some(b), _)])
            if a == b && matches!((re.as_str(), im.as_str()), ("r", "i") | ("real", "imag")) =>
        {
            match (a, *o, size) {
                (DType::F32, 4, 8) => Some(DType::C64),
                (DType::F64, 8, 16) => Some(DType::C128),
                _ => None,
            }
        }
        _ => None,
    };
    let fields: Vec<String> = names
        .iter()
        .zip(&parts)
        .map(|(n, (_, _, f))| format!("{n}: {f}"))
        .collect();
    (complex, format!("compound {{{}}}", fields.join(", ")))
}

/// The `spools_layout` attribute, when it is one variable-length string (a scalar or one
/// element: anything else, e.g. an array of strings another tool wrote, is not read).
fn written_from(h: &Locked, ds: &Id) -> Option<String> {
    let key = c"spools_layout";
    // SAFETY: a valid dataset id and NUL-terminated name.
    if unsafe { (h.f.H5Aexists)(ds.id, key.as_ptr()) } <= 0 {
        h.message();
        return None;
    }
    let read = || -> Result<Option<String>, Hdf5Error> {
        let op = "read attribute";
        // SAFETY: valid ids; the attribute holds exactly one element (checked first), so
        // H5Aread writes one `char *` (allocated by the library, freed by `take_string`)
        // into `p`.
        unsafe {
            let a = h.id(
                (h.f.H5Aopen)(ds.id, key.as_ptr(), ffi::P_DEFAULT),
                h.f.H5Aclose,
                op,
            )?;
            let at = h.id((h.f.H5Aget_type)(a.id), h.f.H5Tclose, op)?;
            if (h.f.H5Tget_class)(at.id) != ffi::T_STRING || (h.f.H5Tis_variable_str)(at.id) <= 0 {
                return Ok(None);
            }
            let space = h.id((h.f.H5Aget_space)(a.id), h.f.H5Sclose, op)?;
            if (h.f.H5Sget_simple_extent_npoints)(space.id) != 1 {
                return Ok(None);
            }
            let mt = h.utf8_type()?;
            let mut p: *mut c_char = std::ptr::null_mut();
            let rc = (h.f.H5Aread)(a.id, mt.id, &mut p as *mut *mut c_char as *mut c_void);
            h.ok(rc, op)?;
            Ok(h.take_string(p))
        }
    };
    read().unwrap_or_else(|_| {
        h.message();
        None
    })
}
