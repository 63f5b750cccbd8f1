//! The part of libfabric's ABI that Spools uses, declared here and bound at run time to
//! `libfabric.so.1` (so that a Spools binary runs where libfabric is absent, as with
//! PMIx and HDF5).
//!
//! libfabric exports only a handful of functions (`fi_getinfo`, `fi_fabric`, ...); every
//! other call (`fi_domain`, `fi_send`, `fi_cq_read`, ...) is an inline function of its
//! headers that calls through the operation tables each object carries. The structures
//! below follow the layouts of `rdma/fabric.h`, `fi_domain.h`, `fi_endpoint.h` and
//! `fi_eq.h`, which libfabric keeps stable across 1.x (new members only ever go at the
//! end, behind each table's `size`); the API version asked for is 1.5, the oldest with
//! everything used here. The sizes asserted at the end were measured with `sizeof`
//! against libfabric 1.17's headers.

#![allow(non_camel_case_types, dead_code)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use libloading::Library;

/// The library opened.
pub(crate) const LIBRARY: &str = "libfabric.so.1";

/// `FI_VERSION(1, 5)`.
pub(crate) const API_VERSION: u32 = (1 << 16) | 5;

// Capabilities and flags (`fabric.h`).
pub(crate) const FI_MSG: u64 = 1 << 1;
pub(crate) const FI_RMA: u64 = 1 << 2;
pub(crate) const FI_READ: u64 = 1 << 8;
pub(crate) const FI_WRITE: u64 = 1 << 9;
pub(crate) const FI_RECV: u64 = 1 << 10;
pub(crate) const FI_SEND: u64 = 1 << 11;
pub(crate) const FI_TRANSMIT: u64 = FI_SEND;
pub(crate) const FI_REMOTE_READ: u64 = 1 << 12;
pub(crate) const FI_REMOTE_WRITE: u64 = 1 << 13;
pub(crate) const FI_SOURCE: u64 = 1 << 57;
pub(crate) const FI_CONTEXT: u64 = 1 << 59;
pub(crate) const FI_CONTEXT2: u64 = 1 << 52;
pub(crate) const FI_ORDER_SAS: u64 = 1 << 8;
pub(crate) const FI_ADDR_UNSPEC: u64 = u64::MAX;
pub(crate) const FI_COMPLETION: u64 = 1 << 24;
pub(crate) const FI_DELIVERY_COMPLETE: u64 = 1 << 28;

// Memory registration modes (`domain_attr.mr_mode`).
pub(crate) const FI_MR_BASIC: c_int = 1;
pub(crate) const FI_MR_SCALABLE: c_int = 2;
pub(crate) const FI_MR_LOCAL: c_int = 1 << 2;
pub(crate) const FI_MR_RAW: c_int = 1 << 3;
pub(crate) const FI_MR_VIRT_ADDR: c_int = 1 << 4;
pub(crate) const FI_MR_ALLOCATED: c_int = 1 << 5;
pub(crate) const FI_MR_PROV_KEY: c_int = 1 << 6;
pub(crate) const FI_MR_ENDPOINT: c_int = 1 << 9;

// Enumerations (C `enum`s are `int`).
pub(crate) const FI_EP_RDM: c_int = 3;
pub(crate) const FI_THREAD_DOMAIN: c_int = 3;
pub(crate) const FI_PROGRESS_AUTO: c_int = 1;
pub(crate) const FI_PROGRESS_MANUAL: c_int = 2;
pub(crate) const FI_AV_TABLE: c_int = 2;
pub(crate) const FI_CQ_FORMAT_MSG: c_int = 2;
pub(crate) const FI_WAIT_NONE: c_int = 0;
pub(crate) const FI_WAIT_FD: c_int = 3;

// `fi_control` commands.
pub(crate) const FI_GETWAIT: c_int = 5;
pub(crate) const FI_ENABLE: c_int = 6;

// Errors (negated in return values).
pub(crate) const FI_EAGAIN: isize = libc::EAGAIN as isize;
pub(crate) const FI_EAVAIL: isize = 259;

/// `struct fid`.
#[repr(C)]
pub(crate) struct fid {
    pub(crate) fclass: usize,
    pub(crate) context: *mut c_void,
    pub(crate) ops: *mut fi_ops,
}

/// `struct fi_ops`.
#[repr(C)]
pub(crate) struct fi_ops {
    pub(crate) size: usize,
    pub(crate) close: unsafe extern "C" fn(*mut fid) -> c_int,
    pub(crate) bind: unsafe extern "C" fn(*mut fid, *mut fid, u64) -> c_int,
    pub(crate) control: unsafe extern "C" fn(*mut fid, c_int, *mut c_void) -> c_int,
}

/// `struct fi_tx_attr`.
#[repr(C)]
pub(crate) struct fi_tx_attr {
    pub(crate) caps: u64,
    pub(crate) mode: u64,
    pub(crate) op_flags: u64,
    pub(crate) msg_order: u64,
    pub(crate) comp_order: u64,
    pub(crate) inject_size: usize,
    pub(crate) size: usize,
    pub(crate) iov_limit: usize,
    pub(crate) rma_iov_limit: usize,
    pub(crate) tclass: u32,
}

/// `struct fi_rx_attr`.
#[repr(C)]
pub(crate) struct fi_rx_attr {
    pub(crate) caps: u64,
    pub(crate) mode: u64,
    pub(crate) op_flags: u64,
    pub(crate) msg_order: u64,
    pub(crate) comp_order: u64,
    pub(crate) total_buffered_recv: usize,
    pub(crate) size: usize,
    pub(crate) iov_limit: usize,
}

/// `struct fi_ep_attr`.
#[repr(C)]
pub(crate) struct fi_ep_attr {
    pub(crate) ep_type: c_int,
    pub(crate) protocol: u32,
    pub(crate) protocol_version: u32,
    pub(crate) max_msg_size: usize,
    pub(crate) msg_prefix_size: usize,
    pub(crate) max_order_raw_size: usize,
    pub(crate) max_order_war_size: usize,
    pub(crate) max_order_waw_size: usize,
    pub(crate) mem_tag_format: u64,
    pub(crate) tx_ctx_cnt: usize,
    pub(crate) rx_ctx_cnt: usize,
    pub(crate) auth_key_size: usize,
    pub(crate) auth_key: *mut u8,
}

/// `struct fi_domain_attr` (up to `mr_key_size`, the last member read or written; the
/// library allocates the whole structure).
#[repr(C)]
pub(crate) struct fi_domain_attr {
    pub(crate) domain: *mut c_void,
    pub(crate) name: *mut c_char,
    pub(crate) threading: c_int,
    pub(crate) control_progress: c_int,
    pub(crate) data_progress: c_int,
    pub(crate) resource_mgmt: c_int,
    pub(crate) av_type: c_int,
    pub(crate) mr_mode: c_int,
    pub(crate) mr_key_size: usize,
}

/// `struct fi_fabric_attr`.
#[repr(C)]
pub(crate) struct fi_fabric_attr {
    pub(crate) fabric: *mut c_void,
    pub(crate) name: *mut c_char,
    pub(crate) prov_name: *mut c_char,
    pub(crate) prov_version: u32,
    pub(crate) api_version: u32,
}

/// `struct fi_info`.
#[repr(C)]
pub(crate) struct fi_info {
    pub(crate) next: *mut fi_info,
    pub(crate) caps: u64,
    pub(crate) mode: u64,
    pub(crate) addr_format: u32,
    pub(crate) src_addrlen: usize,
    pub(crate) dest_addrlen: usize,
    pub(crate) src_addr: *mut c_void,
    pub(crate) dest_addr: *mut c_void,
    pub(crate) handle: *mut fid,
    pub(crate) tx_attr: *mut fi_tx_attr,
    pub(crate) rx_attr: *mut fi_rx_attr,
    pub(crate) ep_attr: *mut fi_ep_attr,
    pub(crate) domain_attr: *mut fi_domain_attr,
    pub(crate) fabric_attr: *mut fi_fabric_attr,
    pub(crate) nic: *mut c_void,
}

/// `struct fi_ops_fabric` (up to `trywait`).
#[repr(C)]
pub(crate) struct fi_ops_fabric {
    pub(crate) size: usize,
    pub(crate) domain: unsafe extern "C" fn(
        *mut fid_fabric,
        *mut fi_info,
        *mut *mut fid_domain,
        *mut c_void,
    ) -> c_int,
    pub(crate) passive_ep: *const c_void,
    pub(crate) eq_open: *const c_void,
    pub(crate) wait_open: *const c_void,
    pub(crate) trywait: unsafe extern "C" fn(*mut fid_fabric, *mut *mut fid, c_int) -> c_int,
}

/// `struct fid_fabric`.
#[repr(C)]
pub(crate) struct fid_fabric {
    pub(crate) fid: fid,
    pub(crate) ops: *mut fi_ops_fabric,
    pub(crate) api_version: u32,
}

/// `struct fi_av_attr`.
#[repr(C)]
pub(crate) struct fi_av_attr {
    pub(crate) av_type: c_int,
    pub(crate) rx_ctx_bits: c_int,
    pub(crate) count: usize,
    pub(crate) ep_per_node: usize,
    pub(crate) name: *const c_char,
    pub(crate) map_addr: *mut c_void,
    pub(crate) flags: u64,
}

/// `struct fi_cq_attr`.
#[repr(C)]
pub(crate) struct fi_cq_attr {
    pub(crate) size: usize,
    pub(crate) flags: u64,
    pub(crate) format: c_int,
    pub(crate) wait_obj: c_int,
    pub(crate) signaling_vector: c_int,
    pub(crate) wait_cond: c_int,
    pub(crate) wait_set: *mut c_void,
}

/// `struct fi_ops_domain` (up to `endpoint`).
#[repr(C)]
pub(crate) struct fi_ops_domain {
    pub(crate) size: usize,
    pub(crate) av_open: unsafe extern "C" fn(
        *mut fid_domain,
        *mut fi_av_attr,
        *mut *mut fid_av,
        *mut c_void,
    ) -> c_int,
    pub(crate) cq_open: unsafe extern "C" fn(
        *mut fid_domain,
        *mut fi_cq_attr,
        *mut *mut fid_cq,
        *mut c_void,
    ) -> c_int,
    pub(crate) endpoint:
        unsafe extern "C" fn(*mut fid_domain, *mut fi_info, *mut *mut fid_ep, *mut c_void) -> c_int,
}

/// `struct fi_ops_mr` (up to `reg`).
#[repr(C)]
pub(crate) struct fi_ops_mr {
    pub(crate) size: usize,
    #[allow(clippy::type_complexity)]
    pub(crate) reg: unsafe extern "C" fn(
        *mut fid,
        *const c_void,
        usize,
        u64,
        u64,
        u64,
        u64,
        *mut *mut fid_mr,
        *mut c_void,
    ) -> c_int,
}

/// `struct fid_domain`.
#[repr(C)]
pub(crate) struct fid_domain {
    pub(crate) fid: fid,
    pub(crate) ops: *mut fi_ops_domain,
    pub(crate) mr: *mut fi_ops_mr,
}

/// `struct fid_mr`.
#[repr(C)]
pub(crate) struct fid_mr {
    pub(crate) fid: fid,
    pub(crate) mem_desc: *mut c_void,
    pub(crate) key: u64,
}

/// `struct fi_ops_av` (up to `insert`).
#[repr(C)]
pub(crate) struct fi_ops_av {
    pub(crate) size: usize,
    pub(crate) insert: unsafe extern "C" fn(
        *mut fid_av,
        *const c_void,
        usize,
        *mut u64,
        u64,
        *mut c_void,
    ) -> c_int,
}

/// `struct fid_av`.
#[repr(C)]
pub(crate) struct fid_av {
    pub(crate) fid: fid,
    pub(crate) ops: *mut fi_ops_av,
}

/// `struct fi_cq_msg_entry`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct fi_cq_msg_entry {
    pub(crate) op_context: *mut c_void,
    pub(crate) flags: u64,
    pub(crate) len: usize,
}

/// `struct fi_cq_err_entry`.
#[repr(C)]
pub(crate) struct fi_cq_err_entry {
    pub(crate) op_context: *mut c_void,
    pub(crate) flags: u64,
    pub(crate) len: usize,
    pub(crate) buf: *mut c_void,
    pub(crate) data: u64,
    pub(crate) tag: u64,
    pub(crate) olen: usize,
    pub(crate) err: c_int,
    pub(crate) prov_errno: c_int,
    pub(crate) err_data: *mut c_void,
    pub(crate) err_data_size: usize,
}

/// `struct fi_ops_cq` (up to `readerr`).
#[repr(C)]
pub(crate) struct fi_ops_cq {
    pub(crate) size: usize,
    pub(crate) read: unsafe extern "C" fn(*mut fid_cq, *mut c_void, usize) -> isize,
    pub(crate) readfrom: *const c_void,
    pub(crate) readerr: unsafe extern "C" fn(*mut fid_cq, *mut fi_cq_err_entry, u64) -> isize,
}

/// `struct fid_cq`.
#[repr(C)]
pub(crate) struct fid_cq {
    pub(crate) fid: fid,
    pub(crate) ops: *mut fi_ops_cq,
}

/// `struct fi_ops_cm` (up to `getname`).
#[repr(C)]
pub(crate) struct fi_ops_cm {
    pub(crate) size: usize,
    pub(crate) setname: *const c_void,
    pub(crate) getname: unsafe extern "C" fn(*mut fid, *mut c_void, *mut usize) -> c_int,
}

/// `struct fi_ops_msg` (up to `inject`).
#[repr(C)]
pub(crate) struct fi_ops_msg {
    pub(crate) size: usize,
    pub(crate) recv: unsafe extern "C" fn(
        *mut fid_ep,
        *mut c_void,
        usize,
        *mut c_void,
        u64,
        *mut c_void,
    ) -> isize,
    pub(crate) recvv: *const c_void,
    pub(crate) recvmsg: *const c_void,
    pub(crate) send: unsafe extern "C" fn(
        *mut fid_ep,
        *const c_void,
        usize,
        *mut c_void,
        u64,
        *mut c_void,
    ) -> isize,
    pub(crate) sendv: *const c_void,
    pub(crate) sendmsg: *const c_void,
    pub(crate) inject: unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, u64) -> isize,
}

/// `struct fi_rma_iov`.
#[repr(C)]
pub(crate) struct fi_rma_iov {
    pub(crate) addr: u64,
    pub(crate) len: usize,
    pub(crate) key: u64,
}

/// `struct fi_msg_rma`.
#[repr(C)]
pub(crate) struct fi_msg_rma {
    pub(crate) msg_iov: *const libc::iovec,
    pub(crate) desc: *mut *mut c_void,
    pub(crate) iov_count: usize,
    pub(crate) addr: u64,
    pub(crate) rma_iov: *const fi_rma_iov,
    pub(crate) rma_iov_count: usize,
    pub(crate) context: *mut c_void,
    pub(crate) data: u64,
}

/// `struct fi_ops_rma` (up to `writemsg`).
#[repr(C)]
pub(crate) struct fi_ops_rma {
    pub(crate) size: usize,
    pub(crate) read: *const c_void,
    pub(crate) readv: *const c_void,
    pub(crate) readmsg: unsafe extern "C" fn(*mut fid_ep, *const fi_msg_rma, u64) -> isize,
    pub(crate) write: *const c_void,
    pub(crate) writev: *const c_void,
    pub(crate) writemsg: unsafe extern "C" fn(*mut fid_ep, *const fi_msg_rma, u64) -> isize,
}

/// `struct fid_ep`.
#[repr(C)]
pub(crate) struct fid_ep {
    pub(crate) fid: fid,
    pub(crate) ops: *mut c_void,
    pub(crate) cm: *mut fi_ops_cm,
    pub(crate) msg: *mut fi_ops_msg,
    pub(crate) rma: *mut fi_ops_rma,
    pub(crate) tagged: *mut c_void,
    pub(crate) atomic: *mut c_void,
}

type GetinfoFn = unsafe extern "C" fn(
    u32,
    *const c_char,
    *const c_char,
    u64,
    *const fi_info,
    *mut *mut fi_info,
) -> c_int;
type FreeinfoFn = unsafe extern "C" fn(*mut fi_info);
type DupinfoFn = unsafe extern "C" fn(*const fi_info) -> *mut fi_info;
type FabricFn =
    unsafe extern "C" fn(*mut fi_fabric_attr, *mut *mut fid_fabric, *mut c_void) -> c_int;
type StrerrorFn = unsafe extern "C" fn(c_int) -> *const c_char;
type VersionFn = unsafe extern "C" fn() -> u32;

/// The exported functions of `libfabric.so.1`.
pub(crate) struct Lib {
    pub(crate) getinfo: GetinfoFn,
    pub(crate) freeinfo: FreeinfoFn,
    pub(crate) dupinfo: DupinfoFn,
    pub(crate) fabric: FabricFn,
    strerror: StrerrorFn,
    pub(crate) version: VersionFn,
}

impl Lib {
    /// libfabric's text for error `rc` (negative or positive).
    pub(crate) fn strerror(&self, rc: isize) -> String {
        let code = rc.unsigned_abs().min(c_int::MAX as usize) as c_int;
        // SAFETY: fi_strerror returns a static string for any code.
        let s = unsafe { (self.strerror)(code) };
        if s.is_null() {
            return format!("error {code}");
        }
        // SAFETY: non-null, NUL-terminated and static (above).
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    }

    /// The library's version as `major.minor`.
    pub(crate) fn version_string(&self) -> String {
        // SAFETY: fi_version takes no argument and has no precondition.
        let v = unsafe { (self.version)() };
        format!("{}.{}", v >> 16, v & 0xffff)
    }
}

/// `libfabric.so.1`, opened once per process; the error says why it is not there.
///
/// # Errors
/// The loader's message when the library or one of its functions is missing.
pub(crate) fn lib() -> Result<&'static Lib, String> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Lib, String> {
    // SAFETY: loading libfabric runs its initialisers, which set up its own state only.
    // It is never unloaded: the objects it hands out live as long as the process.
    let lib: &'static Library = match unsafe { Library::new(LIBRARY) } {
        Ok(l) => Box::leak(Box::new(l)),
        Err(e) => return Err(format!("{LIBRARY} cannot be loaded: {e}")),
    };
    fn sym<T: Copy>(lib: &'static Library, name: &str) -> Result<T, String> {
        // SAFETY: each symbol is read with the signature of libfabric's header (the
        // types above), and the library stays loaded for the life of the process.
        unsafe { lib.get::<T>(name.as_bytes()) }
            .map(|s| *s)
            .map_err(|e| format!("{LIBRARY} has no {name}: {e}"))
    }
    Ok(Lib {
        getinfo: sym(lib, "fi_getinfo")?,
        freeinfo: sym(lib, "fi_freeinfo")?,
        dupinfo: sym(lib, "fi_dupinfo")?,
        fabric: sym(lib, "fi_fabric")?,
        strerror: sym(lib, "fi_strerror")?,
        version: sym(lib, "fi_version")?,
    })
}

// The sizes checked against libfabric 1.17's headers (`sizeof` in C).
const _: () = assert!(std::mem::size_of::<fi_cq_msg_entry>() == 24);
const _: () = assert!(std::mem::size_of::<fi_cq_err_entry>() == 80);
const _: () = assert!(std::mem::size_of::<fi_av_attr>() == 48);
const _: () = assert!(std::mem::size_of::<fi_cq_attr>() == 40);
const _: () = assert!(std::mem::size_of::<fi_info>() == 120);
const _: () = assert!(std::mem::size_of::<fi_tx_attr>() == 80);
const _: () = assert!(std::mem::size_of::<fi_rx_attr>() == 64);
const _: () = assert!(std::mem::size_of::<fi_rma_iov>() == 24);
const _: () = assert!(std::mem::size_of::<fi_msg_rma>() == 64);
