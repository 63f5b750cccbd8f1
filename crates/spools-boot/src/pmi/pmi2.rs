//! PMI2, through `libpmi2.so.0` (Slurm's) opened at run time.

use std::ffi::{c_char, c_int, CStr, CString};

use libloading::Library;

use super::kind::PMI2_LIBRARY;
use super::{Pmi, PmiError, PmiKind};

/// PMI2's limits (`pmi2.h`): keys, values and job ids.
const MAX_KEYLEN: usize = 64;
const MAX_VALLEN: usize = 1024;
const JOBID_LEN: usize = 256;
const SUCCESS: c_int = 0;

type InitFn = unsafe extern "C" fn(*mut c_int, *mut c_int, *mut c_int, *mut c_int) -> c_int;
type JobIdFn = unsafe extern "C" fn(*mut c_char, c_int) -> c_int;
type PutFn = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
type FenceFn = unsafe extern "C" fn() -> c_int;
type GetFn = unsafe extern "C" fn(
    *const c_char,
    c_int,
    *const c_char,
    *mut c_char,
    c_int,
    *mut c_int,
) -> c_int;
type FinalizeFn = unsafe extern "C" fn() -> c_int;

/// A PMI2 client session.
pub(super) struct Pmi2 {
    rank: u32,
    size: u32,
    jobid: CString,
    put: PutFn,
    fence: FenceFn,
    get: GetFn,
    finalize: FinalizeFn,
    finalized: bool,
}

fn symbol<T: Copy>(lib: &'static Library, name: &[u8]) -> Result<T, PmiError> {
    // SAFETY: every `T` this is called with is the C prototype of the named function in
    // pmi2.h, and the library stays loaded for the life of the process.
    unsafe { lib.get::<T>(name) }
        .map(|s| *s)
        .map_err(|source| PmiError::Load {
            kind: PmiKind::Pmi2,
            source,
        })
}

/// PMI2's status names (`pmi2.h`).
fn status_name(rc: c_int) -> &'static str {
    match rc {
        -1 => "PMI2_FAIL",
        1 => "PMI2_ERR_INIT",
        2 => "PMI2_ERR_NOMEM",
        3 => "PMI2_ERR_INVALID_ARG",
        4 => "PMI2_ERR_INVALID_KEY",
        5 => "PMI2_ERR_INVALID_KEY_LENGTH",
        6 => "PMI2_ERR_INVALID_VAL",
        7 => "PMI2_ERR_INVALID_VAL_LENGTH",
        8 => "PMI2_ERR_INVALID_LENGTH",
        9 => "PMI2_ERR_INVALID_NUM_ARGS",
        10 => "PMI2_ERR_INVALID_ARGS",
        11 => "PMI2_ERR_INVALID_NUM_PARSED",
        12 => "PMI2_ERR_INVALID_KEYVALP",
        13 => "PMI2_ERR_INVALID_SIZE",
        14 => "PMI2_ERR_OTHER",
        _ => "an unknown PMI2 status",
    }
}

fn check(call: &'static str, rc: c_int) -> Result<(), PmiError> {
    if rc == SUCCESS {
        return Ok(());
    }
    Err(PmiError::status(
        PmiKind::Pmi2,
        call,
        rc,
        status_name(rc).to_string(),
    ))
}

fn encode(s: &str, max: usize) -> Result<CString, PmiError> {
    let bad = || PmiError::Unencodable {
        kind: PmiKind::Pmi2,
        what: s.into(),
        max: Some(max - 1),
    };
    // The wire protocol separates fields with ';' and '='.
    if s.len() >= max || s.contains([';', '=']) {
        return Err(bad());
    }
    CString::new(s).map_err(|_| bad())
}

impl Pmi2 {
    /// Loads the library and initialises the client.
    pub(super) fn init() -> Result<Pmi2, PmiError> {
        // SAFETY: loading libpmi2 runs no initialiser with effects beyond the library;
        // it is never unloaded.
        let lib = unsafe { Library::new(PMI2_LIBRARY) }.map_err(|source| PmiError::Load {
            kind: PmiKind::Pmi2,
            source,
        })?;
        let lib: &'static Library = Box::leak(Box::new(lib));
        let init: InitFn = symbol(lib, b"PMI2_Init\0")?;
        let job_id: JobIdFn = symbol(lib, b"PMI2_Job_GetId\0")?;
        let (mut spawned, mut size, mut rank, mut appnum) = (0, 0, 0, 0);
        // SAFETY: four valid ints to fill in.
        check("PMI2_Init", unsafe {
            init(&mut spawned, &mut size, &mut rank, &mut appnum)
        })?;
        let mut id = [0 as c_char; JOBID_LEN];
        // SAFETY: a buffer of JOBID_LEN bytes, its length given.
        check("PMI2_Job_GetId", unsafe {
            job_id(id.as_mut_ptr(), JOBID_LEN as c_int)
        })?;
        id[JOBID_LEN - 1] = 0;
        // SAFETY: NUL-terminated just above at the latest.
        let jobid = unsafe { CStr::from_ptr(id.as_ptr()) }.to_owned();
        let count = |what: &'static str, v: c_int| {
            u32::try_from(v).map_err(|_| PmiError::BadValue {
                kind: PmiKind::Pmi2,
                rank: 0,
                key: what.into(),
                what: v.to_string(),
                expected: "a count",
            })
        };
        Ok(Pmi2 {
            rank: count("rank", rank)?,
            size: count("size", size)?,
            jobid,
            put: symbol(lib, b"PMI2_KVS_Put\0")?,
            fence: symbol(lib, b"PMI2_KVS_Fence\0")?,
            get: symbol(lib, b"PMI2_KVS_Get\0")?,
            finalize: symbol(lib, b"PMI2_Finalize\0")?,
            finalized: false,
        })
    }
}

impl Pmi for Pmi2 {
    fn kind(&self) -> PmiKind {
        PmiKind::Pmi2
    }

    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        let (k, v) = (encode(key, MAX_KEYLEN)?, encode(value, MAX_VALLEN)?);
        // SAFETY: two NUL-terminated strings valid for the call.
        check("PMI2_KVS_Put", unsafe {
            (self.put)(k.as_ptr(), v.as_ptr())
        })
    }

    fn fence(&mut self) -> Result<(), PmiError> {
        // SAFETY: no arguments.
        check("PMI2_KVS_Fence", unsafe { (self.fence)() })
    }

    fn get(&mut self, rank: u32, key: &str) -> Result<String, PmiError> {
        let k = encode(key, MAX_KEYLEN)?;
        let mut buf = vec![0 as c_char; MAX_VALLEN + 1];
        let mut len: c_int = 0;
        let src = c_int::try_from(rank).unwrap_or(c_int::MAX);
        // SAFETY: the job id and key are NUL-terminated; `buf` holds MAX_VALLEN + 1
        // bytes and MAX_VALLEN is given as its size.
        check("PMI2_KVS_Get", unsafe {
            (self.get)(
                self.jobid.as_ptr(),
                src,
                k.as_ptr(),
                buf.as_mut_ptr(),
                MAX_VALLEN as c_int,
                &mut len,
            )
        })?;
        buf[MAX_VALLEN] = 0;
        // SAFETY: NUL-terminated just above at the latest.
        let s = unsafe { CStr::from_ptr(buf.as_ptr()) };
        Ok(s.to_string_lossy().into_owned())
    }

    fn finalize(&mut self) -> Result<(), PmiError> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        // SAFETY: no arguments.
        check("PMI2_Finalize", unsafe { (self.finalize)() })
    }
}
