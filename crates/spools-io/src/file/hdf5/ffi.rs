//! The HDF5 C library, opened at run time with `dlopen` (through `libloading`, as
//! `spools-boot` opens libpmix): the few functions Spools calls, their C prototypes, the
//! library's global type and property-list class ids, and owned identifiers.
//!
//! Only calls whose prototypes are the same in HDF5 1.10, 1.12 and 1.14 are used (`hid_t`
//! is 64 bits since 1.10, which is the oldest accepted; [`Hdf5::load`] checks
//! `H5get_libversion`). The one exception, `H5Lget_info` (renamed `H5Lget_info2` with a
//! larger info structure in 1.12), is looked up under both names and only the info's
//! first field, the link type, is read.
//!
//! libhdf5 is not thread-safe in every build: every use goes through [`Hdf5::lock`],
//! which holds a process-wide mutex.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::{Mutex, MutexGuard, OnceLock};

use libloading::Library;

use crate::error::Hdf5Error;

/// The environment variable naming the library to load instead of the usual names.
pub(crate) const ENV_LIB: &str = "SPOOLS_HDF5_LIB";

/// The library names tried when [`ENV_LIB`] is unset, in order: Debian's and Ubuntu's
/// serial library (HDF5 1.10, soname 103; 1.14, 310), the upstream names of 1.10, 1.12
/// and 1.14, and the unversioned development links.
const NAMES: &[&str] = &[
    "libhdf5_serial.so.103",
    "libhdf5_serial.so.310",
    "libhdf5.so.103",
    "libhdf5.so.200",
    "libhdf5.so.310",
    "libhdf5.so.320",
    "libhdf5_serial.so",
    "libhdf5.so",
    "/usr/lib/x86_64-linux-gnu/hdf5/serial/libhdf5.so",
    "/usr/lib/aarch64-linux-gnu/hdf5/serial/libhdf5.so",
];

/// `hid_t`.
pub(crate) type Hid = i64;
/// `herr_t`.
pub(crate) type Herr = c_int;
/// `hsize_t`.
pub(crate) type Hsize = u64;
/// `haddr_t`.
pub(crate) type Haddr = u64;

/// `H5P_DEFAULT`.
pub(crate) const P_DEFAULT: Hid = 0;
/// `H5E_DEFAULT`.
const E_DEFAULT: Hid = 0;
/// `H5F_ACC_RDONLY`.
pub(crate) const F_ACC_RDONLY: c_uint = 0;
/// `H5F_ACC_EXCL`.
pub(crate) const F_ACC_EXCL: c_uint = 4;
/// `HADDR_UNDEF`.
pub(crate) const HADDR_UNDEF: Haddr = u64::MAX;
/// `H5S_SCALAR` (`H5S_class_t`).
pub(crate) const S_SCALAR: c_int = 0;
/// `H5D_layout_t`: compact, contiguous, chunked, virtual.
pub(crate) const D_COMPACT: c_int = 0;
pub(crate) const D_CONTIGUOUS: c_int = 1;
pub(crate) const D_CHUNKED: c_int = 2;
/// `H5D_ALLOC_TIME_EARLY`.
pub(crate) const D_ALLOC_TIME_EARLY: c_int = 1;
/// `H5D_FILL_TIME_NEVER`.
pub(crate) const D_FILL_TIME_NEVER: c_int = 1;
/// `H5T_class_t`.
pub(crate) const T_INTEGER: c_int = 0;
pub(crate) const T_FLOAT: c_int = 1;
pub(crate) const T_TIME: c_int = 2;
pub(crate) const T_STRING: c_int = 3;
pub(crate) const T_BITFIELD: c_int = 4;
pub(crate) const T_OPAQUE: c_int = 5;
pub(crate) const T_COMPOUND: c_int = 6;
pub(crate) const T_REFERENCE: c_int = 7;
pub(crate) const T_ENUM: c_int = 8;
pub(crate) const T_VLEN: c_int = 9;
pub(crate) const T_ARRAY: c_int = 10;
/// `H5T_ORDER_BE` (`H5T_order_t`).
pub(crate) const T_ORDER_BE: c_int = 1;
/// `H5T_SGN_NONE` (`H5T_sign_t`).
pub(crate) const T_SGN_NONE: c_int = 0;
/// `H5T_VARIABLE`.
const T_VARIABLE: usize = usize::MAX;
/// `H5T_CSET_UTF8`.
const T_CSET_UTF8: c_int = 1;
/// `H5I_type_t`: group, dataset.
pub(crate) const I_GROUP: c_int = 2;
pub(crate) const I_DATASET: c_int = 5;
/// `H5L_type_t`: hard, soft and external links.
pub(crate) const L_TYPE_HARD: c_int = 0;
pub(crate) const L_TYPE_SOFT: c_int = 1;
pub(crate) const L_TYPE_EXTERNAL: c_int = 64;
/// `H5_INDEX_NAME`, `H5_ITER_INC`.
pub(crate) const INDEX_NAME: c_int = 0;
pub(crate) const ITER_INC: c_int = 0;
/// `H5E_WALK_DOWNWARD`.
const E_WALK_DOWNWARD: c_int = 1;

/// `H5E_error2_t` (the same from 1.8 to 1.14).
#[repr(C)]
pub(crate) struct ErrorRecord {
    cls_id: Hid,
    maj_num: Hid,
    min_num: Hid,
    line: c_uint,
    func_name: *const c_char,
    file_name: *const c_char,
    desc: *const c_char,
}

/// `H5G_info_t`.
#[repr(C)]
#[derive(Default)]
pub(crate) struct GroupInfo {
    storage_type: c_int,
    pub(crate) nlinks: Hsize,
    max_corder: i64,
    // `hbool_t`: read as a byte, whatever the library wrote.
    mounted: u8,
}

/// Room for `H5L_info_t` (1.10, 32 bytes) or `H5L_info2_t` (1.12 and later, 40 bytes):
/// only the first field, the `H5L_type_t`, and the union `u` at byte 24 (after
/// `corder_valid`, `corder` and `cset`, in both versions) as `val_size` are read.
#[repr(C, align(8))]
pub(crate) struct LinkInfo(pub(crate) [u8; 128]);

impl LinkInfo {
    /// The link type (`H5L_type_t`, the structure's first field).
    pub(crate) fn kind(&self) -> c_int {
        c_int::from_ne_bytes([self.0[0], self.0[1], self.0[2], self.0[3]])
    }

    /// The size of a soft or external link's value (`u.val_size`; meaningless for a hard
    /// link, whose `u` is its address or token).
    pub(crate) fn val_size(&self) -> usize {
        const N: usize = std::mem::size_of::<usize>();
        let mut b = [0u8; N];
        b.copy_from_slice(&self.0[24..24 + N]);
        usize::from_ne_bytes(b)
    }
}

type WalkFn = unsafe extern "C" fn(c_uint, *const ErrorRecord, *mut c_void) -> Herr;

/// Declares the functions: a struct of pointers, filled by `dlsym`.
macro_rules! functions {
    ($($name:ident : fn($($arg:ty),*) -> $ret:ty;)*) => {
        /// The library's functions used here, by their C names.
        #[allow(non_snake_case)]
        pub(crate) struct Functions {
            $(pub(crate) $name: unsafe extern "C" fn($($arg),*) -> $ret,)*
        }

        impl Functions {
            fn load(lib: &'static Library) -> Result<Functions, String> {
                Ok(Functions {
                    $($name: symbol(lib, stringify!($name))?,)*
                })
            }
        }
    };
}

functions! {
    H5open: fn() -> Herr;
    H5free_memory: fn(*mut c_void) -> Herr;
    H5Eset_auto2: fn(Hid, *const c_void, *mut c_void) -> Herr;
    H5Ewalk2: fn(Hid, c_int, WalkFn, *mut c_void) -> Herr;
    H5Eclear2: fn(Hid) -> Herr;
    H5Fcreate: fn(*const c_char, c_uint, Hid, Hid) -> Hid;
    H5Fopen: fn(*const c_char, c_uint, Hid) -> Hid;
    H5Fclose: fn(Hid) -> Herr;
    H5Fget_name: fn(Hid, *mut c_char, usize) -> isize;
    H5Pcreate: fn(Hid) -> Hid;
    H5Pclose: fn(Hid) -> Herr;
    H5Pset_layout: fn(Hid, c_int) -> Herr;
    H5Pget_layout: fn(Hid) -> c_int;
    H5Pset_alloc_time: fn(Hid, c_int) -> Herr;
    H5Pset_fill_time: fn(Hid, c_int) -> Herr;
    H5Pset_create_intermediate_group: fn(Hid, c_uint) -> Herr;
    H5Pget_nfilters: fn(Hid) -> c_int;
    H5Pget_external_count: fn(Hid) -> c_int;
    H5Pget_external: fn(Hid, c_uint, usize, *mut c_char, *mut i64, *mut Hsize) -> Herr;
    H5Pget_filter2: fn(Hid, c_uint, *mut c_uint, *mut usize, *mut c_uint, usize, *mut c_char, *mut c_uint) -> c_int;
    H5Screate: fn(c_int) -> Hid;
    H5Screate_simple: fn(c_int, *const Hsize, *const Hsize) -> Hid;
    H5Sclose: fn(Hid) -> Herr;
    H5Sget_simple_extent_ndims: fn(Hid) -> c_int;
    H5Sget_simple_extent_dims: fn(Hid, *mut Hsize, *mut Hsize) -> c_int;
    H5Tcopy: fn(Hid) -> Hid;
    H5Tcreate: fn(c_int, usize) -> Hid;
    H5Tinsert: fn(Hid, *const c_char, usize, Hid) -> Herr;
    H5Tclose: fn(Hid) -> Herr;
    H5Tset_size: fn(Hid, usize) -> Herr;
    H5Tset_cset: fn(Hid, c_int) -> Herr;
    H5Tget_class: fn(Hid) -> c_int;
    H5Tget_size: fn(Hid) -> usize;
    H5Tget_order: fn(Hid) -> c_int;
    H5Tget_sign: fn(Hid) -> c_int;
    H5Tget_nmembers: fn(Hid) -> c_int;
    H5Tget_member_name: fn(Hid, c_uint) -> *mut c_char;
    H5Tget_member_offset: fn(Hid, c_uint) -> usize;
    H5Tget_member_type: fn(Hid, c_uint) -> Hid;
    H5Tis_variable_str: fn(Hid) -> c_int;
    H5Dcreate2: fn(Hid, *const c_char, Hid, Hid, Hid, Hid, Hid) -> Hid;
    H5Dopen2: fn(Hid, *const c_char, Hid) -> Hid;
    H5Dclose: fn(Hid) -> Herr;
    H5Dget_offset: fn(Hid) -> Haddr;
    H5Dget_type: fn(Hid) -> Hid;
    H5Dget_space: fn(Hid) -> Hid;
    H5Dget_create_plist: fn(Hid) -> Hid;
    H5Acreate2: fn(Hid, *const c_char, Hid, Hid, Hid, Hid) -> Hid;
    H5Aopen: fn(Hid, *const c_char, Hid) -> Hid;
    H5Aexists: fn(Hid, *const c_char) -> c_int;
    H5Awrite: fn(Hid, Hid, *const c_void) -> Herr;
    H5Aread: fn(Hid, Hid, *mut c_void) -> Herr;
    H5Aget_type: fn(Hid) -> Hid;
    H5Aget_space: fn(Hid) -> Hid;
    H5Sget_simple_extent_npoints: fn(Hid) -> i64;
    H5Aclose: fn(Hid) -> Herr;
    H5Gget_info: fn(Hid, *mut GroupInfo) -> Herr;
    H5Lget_name_by_idx: fn(Hid, *const c_char, c_int, c_int, Hsize, *mut c_char, usize, Hid) -> isize;
    H5Lget_val: fn(Hid, *const c_char, *mut c_void, usize, Hid) -> Herr;
    H5Lunpack_elink_val: fn(*const c_void, usize, *mut c_uint, *mut *const c_char, *mut *const c_char) -> Herr;
    H5Oopen: fn(Hid, *const c_char, Hid) -> Hid;
    H5Oclose: fn(Hid) -> Herr;
    H5Iget_type: fn(Hid) -> c_int;
    H5Iget_name: fn(Hid, *mut c_char, usize) -> isize;
    H5Iget_file_id: fn(Hid) -> Hid;
}

/// `H5Lget_info` (1.10) or `H5Lget_info2` (1.12 and later): the same arguments, the info
/// structure differing only after the link type.
type LinkInfoFn = unsafe extern "C" fn(Hid, *const c_char, *mut LinkInfo, Hid) -> Herr;

fn symbol<T: Copy>(lib: &'static Library, name: &str) -> Result<T, String> {
    let c = [name.as_bytes(), b"\0"].concat();
    // SAFETY: every `T` this is called with is the C prototype of the named function in
    // HDF5's headers (1.10 to 1.14), and the library stays loaded for the life of the
    // process.
    unsafe { lib.get::<T>(&c) }
        .map(|s| *s)
        .map_err(|e| format!("it has no {name} ({e})"))
}

fn global(lib: &'static Library, name: &str) -> Result<Hid, String> {
    let c = [name.as_bytes(), b"\0"].concat();
    // SAFETY: the named symbol is one of HDF5's global `hid_t` variables, read after
    // `H5open` has set it; the library stays loaded.
    let p = unsafe { lib.get::<*const Hid>(&c) }
        .map(|s| *s)
        .map_err(|e| format!("it has no {name} ({e})"))?;
    if p.is_null() {
        return Err(format!("its {name} is NULL"));
    }
    // SAFETY: `p` points to the library's initialised `hid_t` variable.
    Ok(unsafe { p.read() })
}

/// The library's global type and class ids used here.
#[allow(non_snake_case)]
pub(crate) struct Globals {
    pub(crate) NATIVE_INT8: Hid,
    pub(crate) NATIVE_UINT8: Hid,
    pub(crate) NATIVE_INT16: Hid,
    pub(crate) NATIVE_UINT16: Hid,
    pub(crate) NATIVE_INT32: Hid,
    pub(crate) NATIVE_UINT32: Hid,
    pub(crate) NATIVE_INT64: Hid,
    pub(crate) NATIVE_UINT64: Hid,
    pub(crate) NATIVE_FLOAT: Hid,
    pub(crate) NATIVE_DOUBLE: Hid,
    pub(crate) C_S1: Hid,
    pub(crate) DATASET_CREATE: Hid,
    pub(crate) LINK_CREATE: Hid,
}

/// The loaded library.
pub(crate) struct Hdf5 {
    /// Its functions.
    pub(crate) f: Functions,
    link_info: LinkInfoFn,
    /// Its global ids.
    pub(crate) g: Globals,
}

static LOADED: OnceLock<Result<Hdf5, Hdf5Error>> = OnceLock::new();
static LOCK: Mutex<()> = Mutex::new(());

/// The library locked for this thread's calls.
pub(crate) struct Locked {
    pub(crate) lib: &'static Hdf5,
    _guard: MutexGuard<'static, ()>,
}

impl std::ops::Deref for Locked {
    type Target = Hdf5;
    fn deref(&self) -> &Hdf5 {
        self.lib
    }
}

impl Hdf5 {
    /// Loads the library (once per process) and locks it for this thread's calls, with
    /// its error printing turned off and its error stack cleared.
    ///
    /// # Errors
    /// [`Hdf5Error::LibraryMissing`].
    pub(crate) fn lock() -> Result<Locked, Hdf5Error> {
        let lib = LOADED
            .get_or_init(Hdf5::load)
            .as_ref()
            .map_err(Clone::clone)?;
        let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: no error handler (NULL) for the default stack; clearing it takes no
        // pointers. (Per thread in thread-safe builds, so done before every use.)
        unsafe {
            (lib.f.H5Eset_auto2)(E_DEFAULT, std::ptr::null(), std::ptr::null_mut());
            (lib.f.H5Eclear2)(E_DEFAULT);
        }
        Ok(Locked { lib, _guard: guard })
    }

    fn load() -> Result<Hdf5, Hdf5Error> {
        let names: Vec<String> = match std::env::var_os(ENV_LIB) {
            Some(v) if !v.is_empty() => vec![v.to_string_lossy().into_owned()],
            _ => NAMES.iter().map(|s| s.to_string()).collect(),
        };
        let mut why = String::from("no library name to try");
        for name in &names {
            // SAFETY: loading libhdf5 runs its initialisers, which only set up the
            // library's own state. It is never unloaded (its ids and atexit handler
            // outlive any one use).
            let lib = match unsafe { Library::new(name) } {
                Ok(l) => &*Box::leak(Box::new(l)),
                Err(e) => {
                    why = e.to_string();
                    continue;
                }
            };
            match Hdf5::init(lib) {
                Ok(h) => return Ok(h),
                // Another name may be a usable library (an old one stays loaded, unused).
                Err(e) => why = format!("{name} was loaded but {e}"),
            }
        }
        Err(Hdf5Error::LibraryMissing { tried: names, why })
    }

    fn init(lib: &'static Library) -> Result<Hdf5, String> {
        let version: unsafe extern "C" fn(*mut c_uint, *mut c_uint, *mut c_uint) -> Herr =
            symbol(lib, "H5get_libversion")?;
        let (mut major, mut minor, mut release) = (0, 0, 0);
        // SAFETY: three valid unsigned ints to fill in.
        unsafe { version(&mut major, &mut minor, &mut release) };
        if (major, minor) < (1, 10) {
            return Err(format!(
                "it is HDF5 {major}.{minor}.{release}; Spools needs 1.10 or newer"
            ));
        }
        let f = Functions::load(lib)?;
        // SAFETY: takes no arguments; initialises the library and its global ids.
        if unsafe { (f.H5open)() } < 0 {
            return Err("H5open failed".into());
        }
        let link_info = symbol::<LinkInfoFn>(lib, "H5Lget_info2")
            .or_else(|_| symbol::<LinkInfoFn>(lib, "H5Lget_info"))?;
        let g = Globals {
            NATIVE_INT8: global(lib, "H5T_NATIVE_INT8_g")?,
            NATIVE_UINT8: global(lib, "H5T_NATIVE_UINT8_g")?,
            NATIVE_INT16: global(lib, "H5T_NATIVE_INT16_g")?,
            NATIVE_UINT16: global(lib, "H5T_NATIVE_UINT16_g")?,
            NATIVE_INT32: global(lib, "H5T_NATIVE_INT32_g")?,
            NATIVE_UINT32: global(lib, "H5T_NATIVE_UINT32_g")?,
            NATIVE_INT64: global(lib, "H5T_NATIVE_INT64_g")?,
            NATIVE_UINT64: global(lib, "H5T_NATIVE_UINT64_g")?,
            NATIVE_FLOAT: global(lib, "H5T_NATIVE_FLOAT_g")?,
            NATIVE_DOUBLE: global(lib, "H5T_NATIVE_DOUBLE_g")?,
            C_S1: global(lib, "H5T_C_S1_g")?,
            DATASET_CREATE: global(lib, "H5P_CLS_DATASET_CREATE_ID_g")?,
            LINK_CREATE: global(lib, "H5P_CLS_LINK_CREATE_ID_g")?,
        };
        Ok(Hdf5 { f, link_info, g })
    }
}

impl Locked {
    /// The library's error stack as one message (its outermost and innermost entries),
    /// cleared.
    pub(crate) fn message(&self) -> String {
        unsafe extern "C" fn walk(_n: c_uint, e: *const ErrorRecord, data: *mut c_void) -> Herr {
            // SAFETY: `data` is the `Vec<String>` `message` passed to H5Ewalk2, and `e`
            // the library's record, valid during the call; its strings are NULL or
            // NUL-terminated.
            unsafe {
                let out = &mut *(data as *mut Vec<String>);
                if let Some(e) = e.as_ref() {
                    let text = |p: *const c_char| {
                        if p.is_null() {
                            String::new()
                        } else {
                            CStr::from_ptr(p).to_string_lossy().into_owned()
                        }
                    };
                    out.push(format!("{}(): {}", text(e.func_name), text(e.desc)));
                }
            }
            0
        }
        let mut all: Vec<String> = Vec::new();
        // SAFETY: `walk` only appends to `all`, which outlives the call.
        unsafe {
            (self.f.H5Ewalk2)(
                E_DEFAULT,
                E_WALK_DOWNWARD,
                walk,
                &mut all as *mut Vec<String> as *mut c_void,
            );
            (self.f.H5Eclear2)(E_DEFAULT);
        }
        match all.as_slice() {
            [] => "failed (no message from the library)".into(),
            [one] => one.clone(),
            [first, .., last] => format!("{first}: {last}"),
        }
    }

    /// An [`Hdf5Error::Library`] for `op`, with the library's message.
    pub(crate) fn error(&self, op: &'static str) -> Hdf5Error {
        Hdf5Error::Library {
            op,
            message: self.message(),
        }
    }

    /// Checks a returned id: an owned [`Id`] closed by `close`, or the library's error.
    pub(crate) fn id(
        &self,
        id: Hid,
        close: unsafe extern "C" fn(Hid) -> Herr,
        op: &'static str,
    ) -> Result<Id, Hdf5Error> {
        if id < 0 {
            return Err(self.error(op));
        }
        Ok(Id { id, close })
    }

    /// Checks a returned status.
    pub(crate) fn ok(&self, status: Herr, op: &'static str) -> Result<(), Hdf5Error> {
        if status < 0 {
            return Err(self.error(op));
        }
        Ok(())
    }

    /// The link type of `name` in `group` (without following it).
    pub(crate) fn link_kind(&self, group: Hid, name: &CStr) -> Result<c_int, Hdf5Error> {
        Ok(self.link(group, name, "list datasets")?.kind())
    }

    /// The link `name` (a path from `group`; the links before its last part are followed)
    /// itself, not followed; the error `op` when there is none.
    pub(crate) fn link(
        &self,
        group: Hid,
        name: &CStr,
        op: &'static str,
    ) -> Result<LinkInfo, Hdf5Error> {
        let mut info = LinkInfo([0; 128]);
        // SAFETY: `name` is NUL-terminated and `info` is larger than either version of
        // the info structure.
        let rc = unsafe { (self.link_info)(group, name.as_ptr(), &mut info, P_DEFAULT) };
        self.ok(rc, op)?;
        Ok(info)
    }

    /// The path the soft link `name` (a path from `group`), whose value holds `size`
    /// bytes, points to.
    pub(crate) fn soft_target(
        &self,
        group: Hid,
        name: &CStr,
        size: usize,
    ) -> Result<String, Hdf5Error> {
        let buf = self.link_value(group, name, size, "read soft link")?;
        let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
        Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
    }

    /// The value of the soft or external link `name` (a path from `group`), of `size`
    /// bytes.
    fn link_value(
        &self,
        group: Hid,
        name: &CStr,
        size: usize,
        op: &'static str,
    ) -> Result<Vec<u8>, Hdf5Error> {
        if size == 0 || size > 1 << 20 {
            return Err(Hdf5Error::Library {
                op,
                message: format!("the link's value holds {size} bytes"),
            });
        }
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` has room for the link's `size` bytes.
        let rc = unsafe {
            (self.f.H5Lget_val)(
                group,
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                size,
                P_DEFAULT,
            )
        };
        self.ok(rc, op)?;
        Ok(buf)
    }

    /// The target of the external link `name` (a path from `group`) whose value holds
    /// `size` bytes: its file and the object's path in it, as the link stores them.
    pub(crate) fn external_target(
        &self,
        group: Hid,
        name: &CStr,
        size: usize,
    ) -> Result<(String, String), Hdf5Error> {
        let op = "read external link";
        // A file name and a path, each NUL-terminated, after a byte of version and flags.
        let buf = self.link_value(group, name, size, op)?;
        let (mut flags, mut file, mut path): (c_uint, *const c_char, *const c_char) =
            (0, std::ptr::null(), std::ptr::null());
        // SAFETY: `buf` holds the link's value of `size` bytes; the library sets `file` and
        // `path` to NUL-terminated strings inside it (checked within `buf` below).
        let rc = unsafe {
            (self.f.H5Lunpack_elink_val)(
                buf.as_ptr().cast(),
                size,
                &mut flags,
                &mut file,
                &mut path,
            )
        };
        self.ok(rc, op)?;
        let text = |p: *const c_char| -> String {
            let base = buf.as_ptr() as usize;
            let at = (p as usize).wrapping_sub(base);
            if p.is_null() || at >= buf.len() {
                return String::new();
            }
            let s = &buf[at..];
            let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
            String::from_utf8_lossy(&s[..end]).into_owned()
        };
        Ok((text(file), text(path)))
    }

    /// The path of an object (`H5Iget_name`).
    pub(crate) fn name_of(&self, id: Hid) -> String {
        self.text_of(id, self.f.H5Iget_name)
    }

    /// The name of the file that holds an object (`H5Fget_name`), as it was opened.
    pub(crate) fn file_name(&self, id: Hid) -> String {
        self.text_of(id, self.f.H5Fget_name)
    }

    /// A name the library writes into a buffer (`H5Iget_name`, `H5Fget_name`).
    fn text_of(
        &self,
        id: Hid,
        get: unsafe extern "C" fn(Hid, *mut c_char, usize) -> isize,
    ) -> String {
        let mut buf = vec![0u8; 256];
        for _ in 0..2 {
            // SAFETY: `buf` has room for `buf.len()` bytes, the NUL included.
            let n = unsafe { get(id, buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                self.message();
                return String::new();
            }
            if (n as usize) < buf.len() {
                buf.truncate(n as usize);
                return String::from_utf8_lossy(&buf).into_owned();
            }
            buf = vec![0u8; n as usize + 1];
        }
        String::new()
    }

    /// A string the library allocated (freed here).
    pub(crate) fn take_string(&self, p: *mut c_char) -> Option<String> {
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` is a NUL-terminated string the library allocated, freed once here.
        unsafe {
            let s = CStr::from_ptr(p).to_string_lossy().into_owned();
            (self.f.H5free_memory)(p.cast());
            Some(s)
        }
    }

    /// A variable-length UTF-8 string type (h5py's `str`), owned.
    pub(crate) fn utf8_type(&self) -> Result<Id, Hdf5Error> {
        // SAFETY: copies the library's C string type; sets its size and character set.
        unsafe {
            let t = self.id(
                (self.f.H5Tcopy)(self.g.C_S1),
                self.f.H5Tclose,
                "make attribute",
            )?;
            self.ok((self.f.H5Tset_size)(t.id, T_VARIABLE), "make attribute")?;
            self.ok((self.f.H5Tset_cset)(t.id, T_CSET_UTF8), "make attribute")?;
            Ok(t)
        }
    }
}

/// A C string for the library, or the error `op` naming the NUL byte.
pub(crate) fn cstring(s: &str, op: &'static str) -> Result<CString, Hdf5Error> {
    CString::new(s).map_err(|_| Hdf5Error::Library {
        op,
        message: format!("{s:?} holds a NUL byte"),
    })
}

/// A file path for the library, or the error `op` naming the NUL byte.
pub(crate) fn path_cstring(p: &std::path::Path, op: &'static str) -> Result<CString, Hdf5Error> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(p.as_os_str().as_bytes()).map_err(|_| Hdf5Error::Library {
        op,
        message: format!("{} holds a NUL byte", p.display()),
    })
}

/// An identifier the library gave out, closed when dropped (errors closing are ignored;
/// a file whose close must succeed is closed with [`Id::close`]).
pub(crate) struct Id {
    pub(crate) id: Hid,
    close: unsafe extern "C" fn(Hid) -> Herr,
}

impl Id {
    /// Closes it, returning the library's status.
    pub(crate) fn close(self) -> Herr {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `id` is open and is closed once, by the function for its kind.
        unsafe { (this.close)(this.id) }
    }
}

impl Drop for Id {
    fn drop(&mut self) {
        // SAFETY: as in `close`; the library is locked while any `Id` lives (ids never
        // leave the functions holding the lock).
        unsafe { (self.close)(self.id) };
    }
}
