//! MPI 4 sessions: `MPI_Session_init` joins the job (if `MPI_Init` has not), process
//! sets `mpi://WORLD` and `mpi://SELF`, groups from them, and communicators from such
//! groups (`MPI_Comm_create_from_group`).

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::abi::*;
use crate::env::error::{code_of, put_string, valid_errhandler, MpiError};
use crate::handles::{Kind, Table};
use crate::out::out;

/// A session: its error handler and the info it was made with.
struct SessionObj {
    errhandler: AtomicUsize,
    info: Mutex<Vec<(String, String)>>,
}

static SESSIONS: Table<SessionObj> = Table::new(Kind::Session);

/// Sessions open now.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// At the process's exit: a program of sessions only (no `MPI_Init`) that finalised
/// every session leaves the job as `MPI_Finalize` would (else the launcher takes its
/// exit for a rank that died without finalising).
extern "C" fn leave_at_exit() {
    if OPEN.load(Ordering::Acquire) == 0 {
        crate::env::init::leave_sessions_only();
    }
}

/// The process sets every session knows.
const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

fn session(h: MPI_Session) -> Result<std::sync::Arc<SessionObj>, MpiError> {
    SESSIONS.get(h).ok_or(MpiError::Handle {
        class: MPI_ERR_SESSION,
        what: "session",
        handle: h,
    })
}

/// Reports `r` on session `h`: its error handler decides (`MPI_ERRORS_RETURN` and user
/// handlers return the code; the fatal ones end the job).
fn on_session(h: MPI_Session, r: Result<(), MpiError>) -> c_int {
    let Err(e) = r else { return MPI_SUCCESS };
    let eh = SESSIONS
        .get(h)
        .map_or(MPI_ERRORS_RETURN, |s| s.errhandler.load(Ordering::Relaxed));
    match eh {
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => crate::runtime::fatal(&e.to_string(), e.class()),
        _ => code_of(&e),
    }
}

/// `MPI_Session_init`: joins the job if this process has not yet.
#[no_mangle]
pub unsafe extern "C" fn MPI_Session_init(
    info: MPI_Info,
    errhandler: MPI_Errhandler,
    session: *mut MPI_Session,
) -> c_int {
    let r = (|| {
        crate::env::init::ensure_started()?;
        if !valid_errhandler(errhandler) {
            return Err(MpiError::Handle {
                class: MPI_ERR_ERRHANDLER,
                what: "error handler",
                handle: errhandler,
            });
        }
        let obj = SessionObj {
            errhandler: AtomicUsize::new(errhandler),
            info: Mutex::new(crate::env::info::entries(info)?),
        };
        let h = SESSIONS
            .insert(obj)
            .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many sessions"))?;
        OPEN.fetch_add(1, Ordering::AcqRel);
        static HOOKED: std::sync::Once = std::sync::Once::new();
        HOOKED.call_once(|| {
            extern "C" {
                fn atexit(f: extern "C" fn()) -> c_int;
            }
            // SAFETY: C's atexit with a function of the type it takes.
            unsafe { atexit(leave_at_exit) };
        });
        // SAFETY: the caller's contract.
        unsafe { out(session, h, "MPI_Session_init") }
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => code_of(&e),
    }
}

/// `MPI_Session_finalize`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Session_finalize(session: *mut MPI_Session) -> c_int {
    if session.is_null() {
        return code_of(&MpiError::invalid(
            MPI_ERR_ARG,
            "MPI_Session_finalize: NULL",
        ));
    }
    // SAFETY: non-NULL (the caller's contract).
    let h = unsafe { *session };
    let r = SESSIONS.remove(h).map(drop).ok_or(MpiError::Handle {
        class: MPI_ERR_SESSION,
        what: "session",
        handle: h,
    });
    if r.is_ok() {
        OPEN.fetch_sub(1, Ordering::AcqRel);
    }
    if r.is_ok() {
        // SAFETY: as above.
        unsafe { *session = MPI_SESSION_NULL };
    }
    on_session(h, r)
}

/// `MPI_Session_get_num_psets`: `mpi://WORLD` and `mpi://SELF`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Session_get_num_psets(
    session: MPI_Session,
    info: MPI_Info,
    npset_names: *mut c_int,
) -> c_int {
    let _ = info;
    // SAFETY: the caller's contract.
    let r = session_ok(session).and_then(|()| unsafe {
        out(
            npset_names,
            PSETS.len() as c_int,
            "MPI_Session_get_num_psets",
        )
    });
    on_session(session, r)
}

fn session_ok(h: MPI_Session) -> Result<(), MpiError> {
    session(h).map(drop)
}

/// `MPI_Session_get_nth_pset`: with `*pset_len` 0, the length it needs (with the NUL).
#[no_mangle]
pub unsafe extern "C" fn MPI_Session_get_nth_pset(
    session: MPI_Session,
    info: MPI_Info,
    n: c_int,
    pset_len: *mut c_int,
    pset_name: *mut c_char,
) -> c_int {
    let _ = info;
    let r = (|| {
        session_ok(session)?;
        let name = usize::try_from(n)
            .ok()
            .and_then(|n| PSETS.get(n))
            .ok_or_else(|| {
                MpiError::invalid(
                    MPI_ERR_ARG,
                    format!("MPI_Session_get_nth_pset: no process set number {n}"),
                )
            })?;
        if pset_len.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Session_get_nth_pset: NULL pset_len",
            ));
        }
        // SAFETY: non-NULL (the caller's contract).
        let cap = unsafe { *pset_len };
        if cap > 0 {
            // SAFETY: `cap` writable bytes (the caller's contract).
            unsafe { put_string(name, pset_name, cap as usize, std::ptr::null_mut()) };
        }
        // SAFETY: as above.
        unsafe { *pset_len = name.len() as c_int + 1 };
        Ok(())
    })();
    on_session(session, r)
}

/// The job ranks of a process set.
fn pset(name: *const c_char, call: &'static str) -> Result<Vec<u32>, MpiError> {
    if name.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: NULL process set name"),
        ));
    }
    // SAFETY: NUL-terminated (MPI's contract).
    let n = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .to_lowercase();
    let rt = crate::runtime::rt(call)?;
    match n.as_str() {
        "mpi://world" => Ok(rt
            .ctx
            .labels_of(&crate::comm::group::members(&rt.world_comm)?)),
        "mpi://self" => Ok(vec![rt.rank]),
        _ => Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: no process set {n:?} (mpi://WORLD, mpi://SELF)"),
        )),
    }
}

/// `MPI_Session_get_pset_info`: `mpi_size` of the set.
#[no_mangle]
pub unsafe extern "C" fn MPI_Session_get_pset_info(
    session: MPI_Session,
    pset_name: *const c_char,
    info: *mut MPI_Info,
) -> c_int {
    let r = (|| {
        session_ok(session)?;
        let ranks = pset(pset_name, "MPI_Session_get_pset_info")?;
        let h = crate::env::info::make(vec![("mpi_size".into(), ranks.len().to_string())])?;
        // SAFETY: the caller's contract.
        unsafe { out(info, h, "MPI_Session_get_pset_info") }
    })();
    on_session(session, r)
}

/// `MPI_Session_get_info`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Session_get_info(
    session: MPI_Session,
    info_used: *mut MPI_Info,
) -> c_int {
    let r = (|| {
        let s = self::session(session)?;
        let mut v = s
            .info
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // The thread level the session has (the process's), under MPI 4.1's key and
        // MPI 4.0's.
        let level = match crate::runtime::runtime().map(|rt| rt.thread_level) {
            Some(MPI_THREAD_MULTIPLE) => "MPI_THREAD_MULTIPLE",
            Some(MPI_THREAD_SERIALIZED) => "MPI_THREAD_SERIALIZED",
            Some(MPI_THREAD_FUNNELED) => "MPI_THREAD_FUNNELED",
            _ => "MPI_THREAD_SINGLE",
        };
        for key in ["mpi_thread_support_level", "thread_level"] {
            v.retain(|(k, _)| k != key);
            v.push((key.to_string(), level.to_string()));
        }
        // SAFETY: the caller's contract.
        unsafe {
            out(
                info_used,
                crate::env::info::make(v)?,
                "MPI_Session_get_info",
            )
        }
    })();
    on_session(session, r)
}

/// `MPI_Session_set_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Session_set_errhandler(
    session: MPI_Session,
    errhandler: MPI_Errhandler,
) -> c_int {
    let r = (|| {
        let s = self::session(session)?;
        if !valid_errhandler(errhandler) {
            return Err(MpiError::Handle {
                class: MPI_ERR_ERRHANDLER,
                what: "error handler",
                handle: errhandler,
            });
        }
        s.errhandler.store(errhandler, Ordering::Relaxed);
        Ok(())
    })();
    on_session(session, r)
}

/// `MPI_Session_get_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Session_get_errhandler(
    session: MPI_Session,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let r = self::session(session).and_then(|s| {
        // SAFETY: the caller's contract.
        unsafe {
            out(
                errhandler,
                s.errhandler.load(Ordering::Relaxed),
                "MPI_Session_get_errhandler",
            )
        }
    });
    on_session(session, r)
}

/// `MPI_Group_from_session_pset`: the group of `mpi://WORLD` or `mpi://SELF`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Group_from_session_pset(
    session: MPI_Session,
    pset_name: *const c_char,
    newgroup: *mut MPI_Group,
) -> c_int {
    let r = (|| {
        session_ok(session)?;
        let ranks = pset(pset_name, "MPI_Group_from_session_pset")?;
        // SAFETY: the caller's contract.
        unsafe { crate::comm::group::give_group(ranks, newgroup, "MPI_Group_from_session_pset") }
    })();
    on_session(session, r)
}

/// `MPI_Comm_create_from_group`: collective over the group's members, any group of the
/// job's processes (they agree on the context through the runtime's bridge, with
/// `stringtag` telling concurrent calls apart: `comm/context.rs`).
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_create_from_group(
    group: MPI_Group,
    stringtag: *const c_char,
    info: MPI_Info,
    errhandler: MPI_Errhandler,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let _ = info;
    let r = (|| {
        let call = "MPI_Comm_create_from_group";
        let rt = crate::runtime::rt(call)?;
        let g = crate::comm::group::members_of(group)?;
        let w = crate::comm::holding(&g, call)?;
        if !g.contains(&w.my_label()) {
            return Err(MpiError::invalid(
                MPI_ERR_GROUP,
                format!("{call}: this process is not in the group"),
            ));
        }
        let tag = if stringtag.is_null() {
            0
        } else {
            // SAFETY: a NUL-terminated string (the caller's contract).
            crate::comm::context::tag_of(unsafe { CStr::from_ptr(stringtag) }.to_bytes())
        };
        let jobs = w.jobs_of(&g).ok_or_else(|| {
            MpiError::invalid(MPI_ERR_GROUP, format!("{call}: a process outside the job"))
        })?;
        let ctx = crate::comm::context::agree(&w, &jobs, 0, tag, None, 1)?;
        let h = crate::comm::insert(rt.world_comm.child_in(
            w.clone(),
            w.bridge.with_context(ctx, jobs)?,
            None,
        ))?;
        let c = crate::comm::comm(h, call)?;
        c.errhandler.store(
            if valid_errhandler(errhandler) {
                errhandler
            } else {
                MPI_ERRORS_ARE_FATAL
            },
            Ordering::Relaxed,
        );
        // SAFETY: the caller's contract.
        unsafe { out(newcomm, h, call) }
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => crate::env::errhandler::raise(MPI_COMM_SELF, &e),
    }
}

/// `MPI_Session_create_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Session_create_errhandler(
    session_errhandler_fn: *const std::ffi::c_void,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    // The same calling convention as a communicator's handler (a handle pointer, a code
    // pointer).
    // SAFETY: the caller's contract.
    unsafe { crate::env::errhandler::MPI_Comm_create_errhandler(session_errhandler_fn, errhandler) }
}

/// `MPI_Session_call_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Session_call_errhandler(
    session: MPI_Session,
    errorcode: c_int,
) -> c_int {
    let r = session_ok(session);
    if r.is_err() {
        return on_session(session, r);
    }
    let eh = SESSIONS
        .get(session)
        .map_or(MPI_ERRORS_RETURN, |s| s.errhandler.load(Ordering::Relaxed));
    match eh {
        MPI_ERRORS_RETURN => MPI_SUCCESS,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => crate::runtime::fatal(
            &format!("MPI_Session_call_errhandler with error code {errorcode}"),
            errorcode,
        ),
        h => {
            if let Some(f) = crate::env::error::ERRHANDLERS.get(h) {
                let (mut s, mut code) = (session, errorcode);
                // SAFETY: a user function of the standard's errhandler type; pointers to
                // locals that live for the call.
                unsafe { f(&mut s, &mut code) };
            }
            MPI_SUCCESS
        }
    }
}
