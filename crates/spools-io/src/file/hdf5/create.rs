//! Creating an HDF5 file holding one contiguous dataset for the ranks to write.

use std::ffi::{c_char, c_void};
use std::path::Path;

use spools_map::{DType, Layout};

use super::defect;
use super::ffi::{self, Hdf5, Hsize, Id, Locked};
use crate::error::{FileError, Hdf5Error};

/// The file type of `d` (owned): a native (little-endian here) integer or float, or for
/// complex numbers h5py's compound `{r, i}` of two floats.
fn file_type(h: &Locked, d: DType) -> Result<Id, Hdf5Error> {
    let g = &h.g;
    let (native, complex) = match d {
        DType::U8 => (g.NATIVE_UINT8, None),
        DType::I8 => (g.NATIVE_INT8, None),
        DType::U16 => (g.NATIVE_UINT16, None),
        DType::I16 => (g.NATIVE_INT16, None),
        DType::U32 => (g.NATIVE_UINT32, None),
        DType::I32 => (g.NATIVE_INT32, None),
        DType::U64 => (g.NATIVE_UINT64, None),
        DType::I64 => (g.NATIVE_INT64, None),
        DType::F32 => (g.NATIVE_FLOAT, None),
        DType::F64 => (g.NATIVE_DOUBLE, None),
        DType::C64 => (g.NATIVE_FLOAT, Some(4usize)),
        DType::C128 => (g.NATIVE_DOUBLE, Some(8usize)),
        DType::Bytes(_) => return Err(Hdf5Error::Unwritable(d.to_string())),
    };
    let op = "create dataset";
    // SAFETY: the ids are the library's own type ids; the member names are
    // NUL-terminated literals.
    unsafe {
        match complex {
            None => h.id((h.f.H5Tcopy)(native), h.f.H5Tclose, op),
            Some(part) => {
                let t = h.id((h.f.H5Tcreate)(ffi::T_COMPOUND, 2 * part), h.f.H5Tclose, op)?;
                h.ok((h.f.H5Tinsert)(t.id, c"r".as_ptr(), 0, native), op)?;
                h.ok((h.f.H5Tinsert)(t.id, c"i".as_ptr(), part, native), op)?;
                Ok(t)
            }
        }
    }
}

/// Writes the variable-length UTF-8 scalar string attribute `key` = `value` on `obj`.
fn write_attr(h: &Locked, obj: &Id, key: &str, value: &str) -> Result<(), Hdf5Error> {
    let k = ffi::cstring(key, "make attribute")?;
    let v = std::ffi::CString::new(value).map_err(|_| Hdf5Error::Library {
        op: "make attribute",
        message: format!("{key} is not valid text"),
    })?;
    let t = h.utf8_type()?;
    let op = "write attribute";
    // SAFETY: valid ids; the buffer H5Awrite reads is one `char *` (a variable-length
    // string's memory form) pointing to `v`, NUL-terminated, alive for the call.
    unsafe {
        let space = h.id((h.f.H5Screate)(ffi::S_SCALAR), h.f.H5Sclose, op)?;
        let a = h.id(
            (h.f.H5Acreate2)(
                obj.id,
                k.as_ptr(),
                t.id,
                space.id,
                ffi::P_DEFAULT,
                ffi::P_DEFAULT,
            ),
            h.f.H5Aclose,
            op,
        )?;
        let p: *const c_char = v.as_ptr();
        h.ok(
            (h.f.H5Awrite)(a.id, t.id, &p as *const *const c_char as *const c_void),
            op,
        )?;
        let rc = a.close();
        h.ok(rc, op)
    }
}

/// Creates `tmp` as an HDF5 file holding the contiguous dataset `name` of `layout`'s
/// element type and shape (allocated at once, never filled), with the attributes
/// `spools_layout` and `spools_version`. Returns the data's offset in the file.
pub(crate) fn create(tmp: &Path, name: &str, layout: &Layout) -> Result<u64, FileError> {
    let Layout::Array(a) = layout else {
        return Err(FileError::Options(
            "an HDF5 dataset is written from an array layout (dtype[shape] ...), not a byte stream",
        ));
    };
    if a.order() == spools_map::Order::F && a.shape().iter().filter(|&&n| n > 1).count() > 1 {
        return Err(FileError::Options(
            "an HDF5 dataset is stored in C order: write it from a layout in C order (order=F would store it transposed)",
        ));
    }
    let made = (|| -> Result<u64, Hdf5Error> {
        let h = Hdf5::lock()?;
        let td = file_type(&h, a.dtype())?;
        let path = ffi::path_cstring(tmp, "create file")?;
        let dname = ffi::cstring(name, "create dataset")?;
        let shape: Vec<Hsize> = a.shape().to_vec();
        let op = "create dataset";
        // SAFETY: valid NUL-terminated names and ids the library gave out; `shape` holds
        // `shape.len()` extents; no maximum extents (NULL: the same).
        unsafe {
            let f = h.id(
                (h.f.H5Fcreate)(
                    path.as_ptr(),
                    ffi::F_ACC_EXCL,
                    ffi::P_DEFAULT,
                    ffi::P_DEFAULT,
                ),
                h.f.H5Fclose,
                "create file",
            )?;
            let space = if shape.is_empty() {
                (h.f.H5Screate)(ffi::S_SCALAR)
            } else {
                (h.f.H5Screate_simple)(shape.len() as i32, shape.as_ptr(), std::ptr::null())
            };
            let space = h.id(space, h.f.H5Sclose, op)?;
            let dcpl = h.id((h.f.H5Pcreate)(h.g.DATASET_CREATE), h.f.H5Pclose, op)?;
            h.ok((h.f.H5Pset_layout)(dcpl.id, ffi::D_CONTIGUOUS), op)?;
            h.ok(
                (h.f.H5Pset_alloc_time)(dcpl.id, ffi::D_ALLOC_TIME_EARLY),
                op,
            )?;
            h.ok((h.f.H5Pset_fill_time)(dcpl.id, ffi::D_FILL_TIME_NEVER), op)?;
            let lcpl = h.id((h.f.H5Pcreate)(h.g.LINK_CREATE), h.f.H5Pclose, op)?;
            h.ok((h.f.H5Pset_create_intermediate_group)(lcpl.id, 1), op)?;
            let ds = h.id(
                (h.f.H5Dcreate2)(
                    f.id,
                    dname.as_ptr(),
                    td.id,
                    space.id,
                    lcpl.id,
                    dcpl.id,
                    ffi::P_DEFAULT,
                ),
                h.f.H5Dclose,
                op,
            )?;
            drop((lcpl, dcpl, space, td));
            for (key, value) in [
                ("spools_layout", layout.to_string()),
                ("spools_version", env!("CARGO_PKG_VERSION").to_string()),
            ] {
                write_attr(&h, &ds, key, &value)?;
            }
            let offset = (h.f.H5Dget_offset)(ds.id);
            if offset == ffi::HADDR_UNDEF {
                h.message();
                return Err(Hdf5Error::Unallocated(h.name_of(ds.id)));
            }
            drop(ds);
            let rc = f.close();
            h.ok(rc, "close file")?;
            Ok(offset)
        }
    })();
    made.map_err(|e| defect(tmp, e))
}
