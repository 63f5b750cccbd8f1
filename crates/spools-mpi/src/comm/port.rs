//! Ports and names: `MPI_Open_port`, `MPI_Close_port`, `MPI_Comm_accept`,
//! `MPI_Comm_connect`, `MPI_Comm_join`, `MPI_Publish_name`, `MPI_Lookup_name`,
//! `MPI_Unpublish_name`.
//!
//! A port is a listening socket with a secret of its own (`spools::Port`); its name
//! (`spools-port:ADDRESS:SECRET`) is all a program needs to connect, and a program
//! without it cannot. Accept and connect are collective over each side's communicator:
//! the roots meet at the port, the acceptor's root hosts a new job of both groups
//! (acceptors first) and the connector's root learns its ticket, each root broadcasts
//! the outcome to its group (a failure fails every rank of the group with
//! `MPI_ERR_PORT`, nobody waits), and everyone joins the job (`newjob.rs`).
//! `MPI_Comm_join` does the same for two processes over a socket they already share.
//!
//! Published names live on this host, per user: a file per service in
//! `$TMPDIR/spools-names-UID` (mode 0700), holding the port name.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr};
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use spools::{HostedJob, JobTicket, Port};

use crate::abi::*;
use crate::comm::newjob::Sides;
use crate::comm::{comm, CommObj};
use crate::env::errhandler::{on_comm, on_self};
use crate::env::error::{put_string, MpiError};
use crate::out::out;
use crate::runtime::rt;

/// The ports this process opened and has not closed, by name.
static OPEN: Mutex<Option<HashMap<String, Arc<Port>>>> = Mutex::new(None);

/// # Safety
/// `p` is NULL or NUL-terminated.
unsafe fn string(p: *const c_char, what: &str, call: &'static str) -> Result<String, MpiError> {
    if p.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: {what} is NULL"),
        ));
    }
    // SAFETY: NUL-terminated (the caller's contract).
    Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// `MPI_Open_port`: a new port of this process (see the module documentation).
#[no_mangle]
pub unsafe extern "C" fn MPI_Open_port(info: MPI_Info, port_name: *mut c_char) -> c_int {
    let _ = info;
    let call = "MPI_Open_port";
    let r = (|| {
        rt(call)?;
        if port_name.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: port_name is NULL"),
            ));
        }
        let port =
            Port::open().map_err(|e| MpiError::invalid(MPI_ERR_PORT, format!("{call}: {e}")))?;
        let name = port.name().to_string();
        OPEN.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(HashMap::new)
            .insert(name.clone(), Arc::new(port));
        // SAFETY: `port_name` holds MPI_MAX_PORT_NAME bytes (the caller's contract).
        unsafe {
            put_string(
                &name,
                port_name,
                MPI_MAX_PORT_NAME as usize,
                std::ptr::null_mut(),
            )
        };
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Close_port`: closes a port this process opened (`MPI_ERR_PORT` for another).
#[no_mangle]
pub unsafe extern "C" fn MPI_Close_port(port_name: *const c_char) -> c_int {
    let call = "MPI_Close_port";
    let r = (|| {
        rt(call)?;
        // SAFETY: the caller's contract.
        let name = unsafe { string(port_name, "port_name", call) }?;
        let closed = OPEN
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
            .and_then(|s| s.remove(name.trim()))
            .is_some();
        if !closed {
            return Err(MpiError::invalid(
                MPI_ERR_PORT,
                format!("{call}: {name:?} is not a port this process opened"),
            ));
        }
        Ok(())
    })();
    on_self(r)
}

/// The root's outcome of a meeting, for its group: `OK TICKET OTHERS [HOSTED]`.
fn outcome(r: Result<(JobTicket, u32), String>) -> String {
    match r {
        Ok((t, n)) => format!("OK {} {n}", t.to_line()),
        Err(e) => format!("ERR {e}"),
    }
}

/// The other side's count and the ticket, from the root's broadcast [`outcome`].
fn read_outcome(b: &[u8], call: &'static str) -> Result<(JobTicket, u32), MpiError> {
    let s = String::from_utf8_lossy(b);
    let f: Vec<&str> = s.splitn(5, ' ').collect();
    match f.as_slice() {
        ["OK", a, sec, job, n] => match (
            JobTicket::from_line(&format!("{a} {sec} {job}")),
            n.parse::<u32>(),
        ) {
            (Some(t), Ok(n)) => Ok((t, n)),
            _ => Err(MpiError::invalid(
                MPI_ERR_INTERN,
                format!("{call}: the root sent a malformed job ticket"),
            )),
        },
        _ => Err(MpiError::invalid(
            MPI_ERR_PORT,
            format!("{call}: {}", s.strip_prefix("ERR ").unwrap_or(&s)),
        )),
    }
}

/// The communicator and root of an accept or connect, checked.
fn side(
    comm_h: MPI_Comm,
    root: c_int,
    call: &'static str,
) -> Result<(Arc<CommObj>, u32), MpiError> {
    let c = comm(comm_h, call)?;
    if c.inter.is_some() {
        return Err(MpiError::invalid(
            MPI_ERR_COMM,
            format!("{call}: the communicator is an intercommunicator"),
        ));
    }
    let root = u32::try_from(root)
        .ok()
        .filter(|&r| r < c.comm.size())
        .ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_ROOT,
                format!("{call}: root {root} is not a rank of the communicator"),
            )
        })?;
    Ok((c, root))
}

/// Which side of a meeting at a port this group is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Accept,
    Connect,
}

/// `MPI_Comm_accept` and `MPI_Comm_connect`: the root meets the other program at the
/// port (`port_name`, significant there only) and broadcasts the outcome, then every
/// rank joins the new job, the acceptors as its first ranks.
fn meet(
    side: Side,
    port_name: *const c_char,
    root: c_int,
    comm_h: MPI_Comm,
    newcomm: *mut MPI_Comm,
    call: &'static str,
) -> Result<(), MpiError> {
    let (c, root) = self::side(comm_h, root, call)?;
    if newcomm.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: newcomm is NULL"),
        ));
    }
    let p = c.comm.size();
    let mut hosted: Option<HostedJob> = None;
    let msg = if c.comm.rank() == root {
        let cfg = crate::comm::world_of(&c.ctx, call)?
            .worker()
            .config()
            .clone();
        // SAFETY: the caller's contract (significant at the root only).
        let r = unsafe { string(port_name, "port_name", call) }
            .map_err(|e| e.to_string())
            .and_then(|name| match side {
                Side::Accept => {
                    let port = OPEN
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .as_ref()
                        .and_then(|m| m.get(name.trim()).cloned())
                        .ok_or_else(|| format!("{name:?} is not an open port of this process"))?;
                    let (job, theirs) = port
                        .accept(p, &cfg, rt(call).map_err(|e| e.to_string())?.ctx.job)
                        .map_err(|e| e.to_string())?;
                    let t = job.ticket().clone();
                    hosted = Some(job);
                    Ok((t, theirs))
                }
                Side::Connect => spools::connect_port(&name, p, &cfg).map_err(|e| e.to_string()),
            });
        outcome(r)
    } else {
        String::new()
    };
    let got = c.comm.bcast_bytes(root, msg.as_bytes())?;
    let (ticket, theirs) = read_outcome(&got, call)?;
    let sides = match side {
        Side::Accept => Sides {
            local: 0..p,
            remote: p..p + theirs,
        },
        Side::Connect => Sides {
            local: theirs..theirs + p,
            remote: 0..theirs,
        },
    };
    let h = crate::comm::newjob::join(&c, &ticket, sides, hosted, MPI_ERR_PORT, call)?;
    // SAFETY: the caller's contract.
    unsafe { out(newcomm, h, call) }
}

/// `MPI_Comm_accept`: collective over `comm`; waits at the port (named at `root`, one
/// this process opened) for a program to connect, and returns an intercommunicator to
/// it.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_accept(
    port_name: *const c_char,
    info: MPI_Info,
    root: c_int,
    comm_h: MPI_Comm,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let _ = info;
    let r = meet(
        Side::Accept,
        port_name,
        root,
        comm_h,
        newcomm,
        "MPI_Comm_accept",
    );
    on_comm(comm_h, r)
}

/// `MPI_Comm_connect`: collective over `comm`; connects to the port named at `root`
/// and returns an intercommunicator to the accepting program (`MPI_ERR_PORT` on every
/// rank when nobody listens there or the name is not a port's).
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_connect(
    port_name: *const c_char,
    info: MPI_Info,
    root: c_int,
    comm_h: MPI_Comm,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let _ = info;
    let r = meet(
        Side::Connect,
        port_name,
        root,
        comm_h,
        newcomm,
        "MPI_Comm_connect",
    );
    on_comm(comm_h, r)
}

/// `MPI_Comm_join`: the two processes at the ends of connected socket `fd` get an
/// intercommunicator of one process each (the socket is used for the meeting only and
/// left open).
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_join(fd: c_int, intercomm: *mut MPI_Comm) -> c_int {
    let call = "MPI_Comm_join";
    let r = (|| {
        let rt = rt(call)?;
        if intercomm.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: intercomm is NULL"),
            ));
        }
        if fd < 0 {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: fd {fd} is not a socket"),
            ));
        }
        // SAFETY: an open descriptor of the caller's for the call's duration; a
        // duplicate is used and closed, the caller's stays open.
        let owned = unsafe { BorrowedFd::borrow_raw(fd) }
            .try_clone_to_owned()
            .map_err(|e| MpiError::invalid(MPI_ERR_ARG, format!("{call}: fd {fd}: {e}")))?;
        let mut s = std::net::TcpStream::from(owned);
        let cfg = crate::comm::world_of(&rt.ctx, call)?
            .worker()
            .config()
            .clone();
        let (ticket, rank, hosted) = spools::join_socket(&mut s, &cfg, rt.ctx.job)
            .map_err(|e| MpiError::invalid(MPI_ERR_PORT, format!("{call}: {e}")))?;
        let sides = Sides {
            local: rank..rank + 1,
            remote: (1 - rank)..(2 - rank),
        };
        let h =
            crate::comm::newjob::join(&rt.self_comm, &ticket, sides, hosted, MPI_ERR_PORT, call)?;
        // SAFETY: the caller's contract.
        unsafe { out(intercomm, h, call) }
    })();
    on_self(r)
}

/// The directory of published names (created on first use, mode 0700), refused unless
/// it is a directory of this user's that nobody else may read or write (in a shared
/// `/tmp` another user could make it first).
fn names_dir(call: &'static str) -> Result<PathBuf, MpiError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let d = std::env::temp_dir().join(format!("spools-names-{uid}"));
    let fail =
        |why: String| MpiError::invalid(MPI_ERR_NAME, format!("{call}: {}: {why}", d.display()));
    match std::fs::DirBuilder::new().mode(0o700).create(&d) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(fail(format!("cannot make it: {e}"))),
    }
    let m = std::fs::symlink_metadata(&d).map_err(|e| fail(e.to_string()))?;
    if !m.file_type().is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
        return Err(fail(format!(
            "not a private directory of this user's (owner {}, mode {:o}): remove it",
            m.uid(),
            m.mode() & 0o7777
        )));
    }
    Ok(d)
}

/// Opens a published name's file for reading, not through a symbolic link.
fn open_name(f: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(f)
}

/// The port name published in file `f`.
fn read_name(f: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut s = String::new();
    open_name(f)?.read_to_string(&mut s)?;
    Ok(s)
}

/// The file of service `s`: its name in hexadecimal (any bytes are a service name).
fn service_file(s: &str, call: &'static str) -> Result<PathBuf, MpiError> {
    let hex: String = s.bytes().map(|b| format!("{b:02x}")).collect();
    if hex.is_empty() || hex.len() > 200 {
        return Err(MpiError::invalid(
            MPI_ERR_SERVICE,
            format!("{call}: service name {s:?} is empty or longer than 100 bytes"),
        ));
    }
    Ok(names_dir(call)?.join(hex))
}

/// What `MPI_Publish_name` and `MPI_Unpublish_name` read: the service, the port and
/// the service's file (once MPI is initialised).
///
/// # Safety
/// Both pointers NULL or NUL-terminated strings (the callers' contract).
unsafe fn service_args(
    service_name: *const c_char,
    port_name: *const c_char,
    call: &'static str,
) -> Result<(String, String, PathBuf), MpiError> {
    rt(call)?;
    // SAFETY: the caller's contract.
    let (service, port) = unsafe {
        (
            string(service_name, "service_name", call)?,
            string(port_name, "port_name", call)?,
        )
    };
    let f = service_file(&service, call)?;
    Ok((service, port, f))
}

/// `MPI_Publish_name`: publishes `port_name` as `service_name` for programs of this
/// user on this host (`MPI_ERR_SERVICE` if the service is published already).
#[no_mangle]
pub unsafe extern "C" fn MPI_Publish_name(
    service_name: *const c_char,
    info: MPI_Info,
    port_name: *const c_char,
) -> c_int {
    let _ = info;
    let call = "MPI_Publish_name";
    let r = (|| {
        // SAFETY: the caller's contract.
        let (service, port, f) = unsafe { service_args(service_name, port_name, call) }?;
        let tmp = f.with_extension(format!("tmp{}", std::process::id()));
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::remove_file(&tmp);
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)?
                .write_all(port.as_bytes())?;
            // The name appears whole or not at all, and only if no one published it.
            std::fs::hard_link(&tmp, &f)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            MpiError::invalid(
                MPI_ERR_SERVICE,
                format!("{call}: cannot publish {service:?}: {e}"),
            )
        })?;
        let _ = std::fs::remove_file(&tmp);
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Lookup_name`: the port published as `service_name` (`MPI_ERR_NAME` if none).
#[no_mangle]
pub unsafe extern "C" fn MPI_Lookup_name(
    service_name: *const c_char,
    info: MPI_Info,
    port_name: *mut c_char,
) -> c_int {
    let _ = info;
    let call = "MPI_Lookup_name";
    let r = (|| {
        rt(call)?;
        // SAFETY: the caller's contract.
        let service = unsafe { string(service_name, "service_name", call) }?;
        if port_name.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: port_name is NULL"),
            ));
        }
        let f = service_file(&service, call)?;
        let port = read_name(&f).map_err(|_| {
            MpiError::invalid(
                MPI_ERR_NAME,
                format!("{call}: no port is published as {service:?}"),
            )
        })?;
        // SAFETY: MPI_MAX_PORT_NAME bytes (the caller's contract).
        unsafe {
            put_string(
                &port,
                port_name,
                MPI_MAX_PORT_NAME as usize,
                std::ptr::null_mut(),
            )
        };
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Unpublish_name`: withdraws `service_name` (`MPI_ERR_SERVICE` if it is not
/// published, or published for another port).
#[no_mangle]
pub unsafe extern "C" fn MPI_Unpublish_name(
    service_name: *const c_char,
    info: MPI_Info,
    port_name: *const c_char,
) -> c_int {
    let _ = info;
    let call = "MPI_Unpublish_name";
    let r = (|| {
        // SAFETY: the caller's contract.
        let (service, port, f) = unsafe { service_args(service_name, port_name, call) }?;
        match read_name(&f) {
            Ok(p) if p == port => std::fs::remove_file(&f).map_err(|e| {
                MpiError::invalid(MPI_ERR_SERVICE, format!("{call}: {service:?}: {e}"))
            }),
            Ok(_) => Err(MpiError::invalid(
                MPI_ERR_SERVICE,
                format!("{call}: {service:?} is published for another port"),
            )),
            Err(_) => Err(MpiError::invalid(
                MPI_ERR_SERVICE,
                format!("{call}: {service:?} is not published"),
            )),
        }
    })();
    on_self(r)
}
