//! PMIx, through `libpmix.so.2` opened at run time.
//!
//! The structures below follow the PMIx standard's ABI (`pmix_common.h`, unchanged from
//! PMIx 3 to 5): a process name is a 256-byte namespace and a 32-bit rank; a value is a
//! 16-bit type tag and, 8 bytes in, a union of at most 24 bytes; an info is a 512-byte key,
//! 32-bit flags and a value at byte 520. The sizes are checked at compile time here and
//! against the installed header in `tests/pmix_abi.rs`.

use std::ffi::{c_char, c_int, CStr, CString};
use std::time::Duration;

use libloading::Library;

use spools_proto::boot::SpawnProc;

use super::kind::PMIX_LIBRARY;
use super::{Pmi, PmiError, PmiKind};

const NSPACE_LEN: usize = 256;
const KEY_LEN: usize = 512;
const RANK_WILDCARD: u32 = u32::MAX - 1;
const SCOPE_GLOBAL: u8 = 3;
const SUCCESS: c_int = 0;

/// PMIx data types used here.
const TYPE_BOOL: u16 = 1;
const TYPE_STRING: u16 = 3;
const TYPE_SIZE: u16 = 4;
const TYPE_INT: u16 = 6;
const TYPE_UINT: u16 = 11;
const TYPE_UINT32: u16 = 14;
const TYPE_UINT64: u16 = 15;
const TYPE_PID: u16 = 5;

/// `pmix_proc_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Proc {
    pub(crate) nspace: [c_char; NSPACE_LEN],
    pub(crate) rank: u32,
}

/// `pmix_value_t`: the tag, and the union as three words.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Value {
    pub(crate) kind: u16,
    pub(crate) data: [u64; 3],
}

/// `pmix_info_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Info {
    pub(crate) key: [c_char; KEY_LEN],
    pub(crate) flags: u32,
    pub(crate) value: Value,
}

/// `pmix_app_t`: one application of a spawn.
#[repr(C)]
struct App {
    cmd: *const c_char,
    argv: *const *const c_char,
    env: *const *const c_char,
    cwd: *const c_char,
    maxprocs: c_int,
    info: *const Info,
    ninfo: usize,
}

const _: () = assert!(std::mem::size_of::<App>() == 56);
const _: () = assert!(std::mem::size_of::<Proc>() == 260);
const _: () = assert!(std::mem::size_of::<Value>() == 32);
const _: () = assert!(std::mem::size_of::<Info>() == 552);
const _: () = assert!(std::mem::offset_of!(Info, value) == 520);
// Booleans and integers are stored as the low bytes of the union's first word.
#[cfg(not(target_endian = "little"))]
compile_error!("the PMIx values are laid out for little-endian targets only");

/// The sizes of the three structures, for the ABI test against the installed header.
#[doc(hidden)]
pub const ABI_SIZES: [usize; 4] = [
    std::mem::size_of::<Proc>(),
    std::mem::size_of::<Value>(),
    std::mem::size_of::<Info>(),
    std::mem::size_of::<App>(),
];

impl Info {
    fn new(key: &str, kind: u16, word: u64) -> Info {
        let mut info = Info {
            key: [0; KEY_LEN],
            flags: 0,
            value: Value {
                kind,
                data: [word, 0, 0],
            },
        };
        for (d, s) in info.key.iter_mut().zip(key.bytes()) {
            *d = s as c_char;
        }
        info
    }
}

type InitFn = unsafe extern "C" fn(*mut Proc, *mut Info, usize) -> c_int;
type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
type CommitFn = unsafe extern "C" fn() -> c_int;
type FenceFn = unsafe extern "C" fn(*const Proc, usize, *const Info, usize) -> c_int;
type GetFn =
    unsafe extern "C" fn(*const Proc, *const c_char, *const Info, usize, *mut *mut Value) -> c_int;
type FinalizeFn = unsafe extern "C" fn(*const Info, usize) -> c_int;
type ErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;
type SpawnFn = unsafe extern "C" fn(*const Info, usize, *const App, usize, *mut c_char) -> c_int;

/// What a PMIx spawn started: the new namespace, and each process's host and process
/// id where the server tells them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawned {
    /// The namespace.
    pub namespace: String,
    /// Per process (its rank in the namespace), (host name, process id).
    pub where_: Vec<(Option<String>, Option<u32>)>,
}

/// A PMIx client session.
pub(super) struct Pmix {
    me: Proc,
    size: u32,
    timeout: Duration,
    put: PutFn,
    commit: CommitFn,
    fence: FenceFn,
    get: GetFn,
    finalize: FinalizeFn,
    error_string: ErrorStringFn,
    finalized: bool,
}

fn load() -> Result<&'static Library, PmiError> {
    let load = |source| PmiError::Load {
        kind: PmiKind::Pmix,
        source,
    };
    // SAFETY: loading libpmix runs its initialisers, which only set up the library's own
    // state. The library is never unloaded (its progress thread may outlive finalize).
    let lib = unsafe { Library::new(PMIX_LIBRARY) }.map_err(load)?;
    Ok(Box::leak(Box::new(lib)))
}

fn symbol<T: Copy>(lib: &'static Library, name: &[u8]) -> Result<T, PmiError> {
    // SAFETY: every `T` this is called with is the C prototype of the named function in
    // pmix.h, and the library stays loaded for the life of the process.
    unsafe { lib.get::<T>(name) }
        .map(|s| *s)
        .map_err(|source| PmiError::Load {
            kind: PmiKind::Pmix,
            source,
        })
}

impl Pmix {
    /// Loads the library and initialises the client.
    pub(super) fn init(timeout: Duration) -> Result<Pmix, PmiError> {
        let lib = load()?;
        let init: InitFn = symbol(lib, b"PMIx_Init\0")?;
        let mut pmix = Pmix {
            me: Proc {
                nspace: [0; NSPACE_LEN],
                rank: 0,
            },
            size: 0,
            timeout,
            put: symbol(lib, b"PMIx_Put\0")?,
            commit: symbol(lib, b"PMIx_Commit\0")?,
            fence: symbol(lib, b"PMIx_Fence\0")?,
            get: symbol(lib, b"PMIx_Get\0")?,
            finalize: symbol(lib, b"PMIx_Finalize\0")?,
            error_string: symbol(lib, b"PMIx_Error_string\0")?,
            finalized: false,
        };
        // SAFETY: `me` is a valid pmix_proc_t to fill in; no info array.
        let rc = unsafe { init(&mut pmix.me, std::ptr::null_mut(), 0) };
        pmix.check("PMIx_Init", rc)?;
        let job = Proc {
            rank: RANK_WILDCARD,
            ..pmix.me
        };
        let size = pmix.get_value(&job, "pmix.job.size", |v| integer(&v))?;
        pmix.size = size.ok_or_else(|| PmiError::BadValue {
            kind: PmiKind::Pmix,
            rank: RANK_WILDCARD,
            key: "pmix.job.size".into(),
            what: "a value that is not a 32-bit count".into(),
            expected: "an unsigned integer",
        })?;
        Ok(pmix)
    }

    fn check(&self, call: &'static str, rc: c_int) -> Result<(), PmiError> {
        if rc == SUCCESS {
            return Ok(());
        }
        // SAFETY: PMIx_Error_string returns a pointer to a static string (or NULL).
        let s = unsafe { (self.error_string)(rc) };
        let message = if s.is_null() {
            format!("status {rc}")
        } else {
            // SAFETY: non-NULL: a NUL-terminated static string.
            unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
        };
        Err(PmiError::status(PmiKind::Pmix, call, rc, message))
    }

    /// Starts `procs` through the server's `PMIx_Spawn`, one application each (each
    /// has variables of its own), on the host it names (`pmix.host`) if any; returns
    /// the new namespace and, per process, its host and process id where the server
    /// tells them.
    pub(super) fn spawn(&self, procs: &[SpawnProc]) -> Result<Spawned, PmiError> {
        let spawn: SpawnFn = symbol(load()?, b"PMIx_Spawn\0")?;
        let text = |s: &str| {
            CString::new(s).map_err(|_| PmiError::Unencodable {
                kind: PmiKind::Pmix,
                what: s.into(),
                max: None,
            })
        };
        // Everything the applications point to, kept alive across the call.
        struct Owned {
            cmd: CString,
            argv: Vec<CString>,
            env: Vec<CString>,
            cwd: CString,
            host: Option<Info>,
        }
        let mut owned = Vec::with_capacity(procs.len());
        for p in procs {
            let host = if p.host.is_empty() {
                None
            } else {
                Some(text(&p.host)?)
            };
            owned.push((
                Owned {
                    cmd: text(&p.program)?,
                    argv: std::iter::once(p.program.as_str())
                        .chain(p.args.iter().map(String::as_str))
                        .map(text)
                        .collect::<Result<_, _>>()?,
                    env: p
                        .env
                        .iter()
                        .map(|(k, v)| text(&format!("{k}={v}")))
                        .collect::<Result<_, _>>()?,
                    cwd: text(&p.wdir)?,
                    host: None,
                },
                host,
            ));
        }
        for (o, host) in &mut owned {
            o.host = host
                .as_ref()
                .map(|h| Info::new("pmix.host", TYPE_STRING, h.as_ptr() as u64));
        }
        let ptrs: Vec<(Vec<*const c_char>, Vec<*const c_char>)> = owned
            .iter()
            .map(|(o, _)| {
                let nul = std::iter::once(std::ptr::null());
                (
                    o.argv
                        .iter()
                        .map(|a| a.as_ptr())
                        .chain(nul.clone())
                        .collect(),
                    o.env.iter().map(|e| e.as_ptr()).chain(nul).collect(),
                )
            })
            .collect();
        let apps: Vec<App> = owned
            .iter()
            .zip(&ptrs)
            .map(|((o, _), (argv, env))| App {
                cmd: o.cmd.as_ptr(),
                argv: argv.as_ptr(),
                env: env.as_ptr(),
                cwd: if o.cwd.is_empty() {
                    std::ptr::null()
                } else {
                    o.cwd.as_ptr()
                },
                maxprocs: 1,
                info: o
                    .host
                    .as_ref()
                    .map_or(std::ptr::null(), |i| i as *const Info),
                ninfo: usize::from(o.host.is_some()),
            })
            .collect();
        let mut nspace = [0 as c_char; NSPACE_LEN + 1];
        // SAFETY: `apps` and every string and array they point to (in `owned`, `ptrs`)
        // live across the call, the arrays NULL-terminated; `nspace` has room for a
        // namespace and its NUL (PMIX_MAX_NSLEN + 1).
        let rc = unsafe {
            spawn(
                std::ptr::null(),
                0,
                apps.as_ptr(),
                apps.len(),
                nspace.as_mut_ptr(),
            )
        };
        self.check("PMIx_Spawn", rc)?;
        // SAFETY: NUL-terminated within its length (zeroed beyond what PMIx wrote).
        let namespace = unsafe { CStr::from_ptr(nspace.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let mut child = Proc {
            nspace: [0; NSPACE_LEN],
            rank: 0,
        };
        for (d, s) in child.nspace.iter_mut().zip(&nspace[..NSPACE_LEN - 1]) {
            *d = *s;
        }
        let where_ = (0..procs.len() as u32)
            .map(|rank| {
                let p = Proc {
                    nspace: child.nspace,
                    rank,
                };
                let pid = self
                    .get_value(&p, "pmix.ppid", |v| match v.kind {
                        TYPE_PID | TYPE_INT | TYPE_UINT32 | TYPE_UINT => {
                            u32::try_from(v.data[0] as u32 as i32).ok()
                        }
                        _ => None,
                    })
                    .ok()
                    .flatten();
                let host = self
                    .get_value(&p, "pmix.hname", |v| {
                        (v.kind == TYPE_STRING && v.data[0] != 0).then(|| {
                            // SAFETY: a PMIx string value points to a NUL-terminated string.
                            unsafe { CStr::from_ptr(v.data[0] as *const c_char) }
                                .to_string_lossy()
                                .into_owned()
                        })
                    })
                    .ok()
                    .flatten();
                (host, pid)
            })
            .collect();
        Ok(Spawned { namespace, where_ })
    }

    /// Gets `key` of `proc` and hands the value to `read` before releasing it.
    fn get_value<T>(
        &self,
        proc: &Proc,
        key: &str,
        read: impl FnOnce(Value) -> T,
    ) -> Result<T, PmiError> {
        let k = cstring(key)?;
        let mut val: *mut Value = std::ptr::null_mut();
        // SAFETY: `proc` and `k` are valid for the call; PMIx allocates `*val`.
        let rc = unsafe { (self.get)(proc, k.as_ptr(), std::ptr::null(), 0, &mut val) };
        self.check("PMIx_Get", rc)?;
        if val.is_null() {
            return Err(PmiError::BadValue {
                kind: PmiKind::Pmix,
                rank: proc.rank,
                key: key.into(),
                what: "no value".into(),
                expected: "a value",
            });
        }
        // SAFETY: PMIx returned a valid, initialised pmix_value_t it allocated.
        let v = unsafe { *val };
        let out = read(v);
        // SAFETY: the value and a string it holds were allocated with malloc by PMIx
        // (PMIX_VALUE_RELEASE does the same); nothing refers to them any more.
        unsafe {
            if v.kind == TYPE_STRING && v.data[0] != 0 {
                libc::free(v.data[0] as *mut libc::c_void);
            }
            libc::free(val.cast());
        }
        Ok(out)
    }
}

/// A count from an integer value of any of the types servers use for sizes.
fn integer(v: &Value) -> Option<u32> {
    match v.kind {
        TYPE_UINT32 | TYPE_UINT => Some(v.data[0] as u32),
        TYPE_INT => u32::try_from(v.data[0] as u32 as i32).ok(),
        TYPE_SIZE | TYPE_UINT64 => u32::try_from(v.data[0]).ok(),
        _ => None,
    }
}

fn cstring(s: &str) -> Result<CString, PmiError> {
    if s.len() >= KEY_LEN {
        return Err(PmiError::Unencodable {
            kind: PmiKind::Pmix,
            what: s.into(),
            max: Some(KEY_LEN - 1),
        });
    }
    CString::new(s).map_err(|_| PmiError::Unencodable {
        kind: PmiKind::Pmix,
        what: s.into(),
        max: Some(KEY_LEN - 1),
    })
}

impl Pmi for Pmix {
    fn kind(&self) -> PmiKind {
        PmiKind::Pmix
    }

    fn rank(&self) -> u32 {
        self.me.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        let k = cstring(key)?;
        let v = CString::new(value).map_err(|_| PmiError::Unencodable {
            kind: PmiKind::Pmix,
            what: value.into(),
            max: None,
        })?;
        let mut val = Value {
            kind: TYPE_STRING,
            data: [v.as_ptr() as u64, 0, 0],
        };
        // SAFETY: key and value outlive the call; PMIx copies the value.
        let rc = unsafe { (self.put)(SCOPE_GLOBAL, k.as_ptr(), &mut val) };
        self.check("PMIx_Put", rc)
    }

    fn fence(&mut self) -> Result<(), PmiError> {
        // SAFETY: no arguments.
        let rc = unsafe { (self.commit)() };
        self.check("PMIx_Commit", rc)?;
        let all = Proc {
            rank: RANK_WILDCARD,
            ..self.me
        };
        let secs = self.timeout.as_secs().clamp(1, i32::MAX as u64);
        let info = [
            Info::new("pmix.collect", TYPE_BOOL, 1),
            Info::new("pmix.timeout", TYPE_INT, secs),
        ];
        // SAFETY: one process name (the whole namespace) and two infos, valid for the
        // call.
        let rc = unsafe { (self.fence)(&all, 1, info.as_ptr(), info.len()) };
        self.check("PMIx_Fence", rc)
    }

    fn get(&mut self, rank: u32, key: &str) -> Result<String, PmiError> {
        let proc = Proc { rank, ..self.me };
        let got = self.get_value(&proc, key, |v| {
            if v.kind != TYPE_STRING || v.data[0] == 0 {
                return Err(format!("a value of PMIx type {}", v.kind));
            }
            // SAFETY: a PMIx string value points to a NUL-terminated string.
            let s = unsafe { CStr::from_ptr(v.data[0] as *const c_char) };
            Ok(s.to_string_lossy().into_owned())
        })?;
        got.map_err(|what| PmiError::BadValue {
            kind: PmiKind::Pmix,
            rank,
            key: key.into(),
            what,
            expected: "a string",
        })
    }

    fn finalize(&mut self) -> Result<(), PmiError> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        // SAFETY: no info array.
        let rc = unsafe { (self.finalize)(std::ptr::null(), 0) };
        self.check("PMIx_Finalize", rc)
    }
}
