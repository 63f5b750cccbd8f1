//! Finding a libfabric provider: what Spools asks of one (the hints), the providers this
//! host offers, and which of them count as a high-speed interconnect.

use std::ffi::{c_char, CStr, CString};
use std::net::IpAddr;

use super::error::OfiError;
use super::ffi::{self, fi_info, Lib};

/// Core providers of high-speed interconnects: InfiniBand and RoCE (`verbs`), HPE
/// Slingshot (`cxi`), AWS EFA (`efa`), Intel/Cornelis Omni-Path (`psm2`, `psm3`, `opx`).
/// `SPOOLS_TRANSPORT=auto` takes libfabric between hosts when one of them is present.
pub const HIGH_SPEED: [&str; 6] = ["verbs", "cxi", "efa", "psm3", "opx", "psm2"];

/// Whether provider name `name` (`verbs;ofi_rxm`, `cxi`, ...) runs over a high-speed
/// interconnect.
///
/// ```
/// use spools_fabric::ofi::is_high_speed;
/// assert!(is_high_speed("verbs;ofi_rxm"));
/// assert!(is_high_speed("cxi"));
/// assert!(!is_high_speed("tcp;ofi_rxm"));
/// assert!(!is_high_speed("shm"));
/// ```
pub fn is_high_speed(name: &str) -> bool {
    name.split(';').any(|p| HIGH_SPEED.contains(&p))
}

/// A list of `fi_info` that libfabric returned, freed on drop.
pub(crate) struct InfoList {
    lib: &'static Lib,
    pub(crate) head: *mut fi_info,
}

impl Drop for InfoList {
    fn drop(&mut self) {
        if !self.head.is_null() {
            // SAFETY: the list came from fi_getinfo (or fi_dupinfo) and is freed once.
            unsafe { (self.lib.freeinfo)(self.head) };
        }
    }
}

impl InfoList {
    /// The entries, first (libfabric's preferred) first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &fi_info> {
        let mut p = self.head;
        std::iter::from_fn(move || {
            // SAFETY: every `next` of a list from fi_getinfo is null or a valid entry,
            // alive as long as the list (borrowed here).
            let i = unsafe { p.as_ref()? };
            p = i.next;
            Some(i)
        })
    }
}

/// The provider's name of an entry (`tcp;ofi_rxm`).
pub(crate) fn prov_name(i: &fi_info) -> String {
    // SAFETY: fi_getinfo fills fabric_attr and its prov_name (NUL-terminated) in every
    // entry it returns; both are checked for null.
    unsafe {
        match i.fabric_attr.as_ref() {
            Some(f) if !f.prov_name.is_null() => {
                CStr::from_ptr(f.prov_name).to_string_lossy().into_owned()
            }
            _ => String::from("?"),
        }
    }
}

/// The domain's name of an entry (`eth0`, `mlx5_0`).
pub(crate) fn domain_name(i: &fi_info) -> String {
    // SAFETY: as `prov_name`, for domain_attr and its name.
    unsafe {
        match i.domain_attr.as_ref() {
            Some(d) if !d.name.is_null() => CStr::from_ptr(d.name).to_string_lossy().into_owned(),
            _ => String::from("?"),
        }
    }
}

/// What Spools asks of a provider (`caps`: messages, and one-sided operations when
/// [`ffi::FI_RMA`] is in): reliable datagram endpoints with messages in
/// send-after-send order, completions it gives contexts for (`FI_CONTEXT`,
/// `FI_CONTEXT2`), one lock per domain (Spools serialises its calls), and registration
/// of its own buffers in whatever mode the provider needs (local, allocated, provider
/// keys, virtual addresses, bound to the endpoint).
fn hints(lib: &'static Lib, provider: Option<&str>, caps: u64) -> Result<InfoList, OfiError> {
    // SAFETY: fi_dupinfo(NULL) allocates an empty fi_info with all its attributes.
    let h = unsafe { (lib.dupinfo)(std::ptr::null()) };
    let list = InfoList { lib, head: h };
    // SAFETY: `h` and its attribute structures were just allocated by libfabric and are
    // owned by `list`; every string stored is strdup'ed, as fi_freeinfo frees them.
    unsafe {
        let i = h.as_mut().ok_or_else(|| OfiError::Call {
            call: "fi_allocinfo",
            code: -(libc::ENOMEM as i64),
            text: "out of memory".into(),
        })?;
        i.caps = caps;
        i.mode = ffi::FI_CONTEXT | ffi::FI_CONTEXT2;
        (*i.ep_attr).ep_type = ffi::FI_EP_RDM;
        (*i.tx_attr).msg_order = ffi::FI_ORDER_SAS;
        (*i.rx_attr).msg_order = ffi::FI_ORDER_SAS;
        (*i.domain_attr).threading = ffi::FI_THREAD_DOMAIN;
        (*i.domain_attr).mr_mode = ffi::FI_MR_LOCAL
            | ffi::FI_MR_ALLOCATED
            | ffi::FI_MR_PROV_KEY
            | ffi::FI_MR_VIRT_ADDR
            | ffi::FI_MR_ENDPOINT;
        if let Some(p) = provider {
            let c = CString::new(p).map_err(|_| OfiError::NoProvider {
                wanted: p.into(),
                why: "the name holds a NUL byte".into(),
            })?;
            (*i.fabric_attr).prov_name = libc::strdup(c.as_ptr());
        }
    }
    Ok(list)
}

/// Address formats of IP networks (`FI_SOCKADDR`, `FI_SOCKADDR_IN`, `FI_SOCKADDR_IN6`).
const SOCKADDR_FORMATS: [u32; 3] = [1, 2, 3];

/// The providers that offer what Spools needs (`caps`), libfabric's preferred first. With `node`,
/// when libfabric's first choice speaks IP, those on the interface of that address (the
/// one that reaches the job's rendezvous); other providers (`shm`, whose addresses are
/// names) and providers that have no such interface are asked without.
///
/// # Errors
/// [`OfiError::NoProvider`] when none does.
pub(crate) fn find(
    lib: &'static Lib,
    provider: Option<&str>,
    node: Option<IpAddr>,
    caps: u64,
) -> Result<InfoList, OfiError> {
    let h = hints(lib, provider, caps)?;
    let ask = |node: Option<&CString>| {
        let mut out: *mut fi_info = std::ptr::null_mut();
        let (node_p, flags): (*const c_char, u64) = match node {
            Some(c) => (c.as_ptr(), ffi::FI_SOURCE),
            None => (std::ptr::null(), 0),
        };
        // SAFETY: the hints are a valid fi_info; `out` receives a list we then own.
        let rc = unsafe {
            (lib.getinfo)(
                ffi::API_VERSION,
                node_p,
                std::ptr::null(),
                flags,
                h.head,
                &mut out,
            )
        };
        (rc, InfoList { lib, head: out })
    };
    let (rc, any) = ask(None);
    if rc != 0 || any.head.is_null() {
        return Err(OfiError::NoProvider {
            wanted: provider.map_or_else(|| "of any name".into(), |p| format!("'{p}'")),
            why: lib.strerror(rc as isize),
        });
    }
    let speaks_ip = any
        .iter()
        .next()
        .is_some_and(|i| SOCKADDR_FORMATS.contains(&i.addr_format));
    if let (true, Some(ip)) = (speaks_ip, node) {
        if let Ok(c) = CString::new(ip.to_string()) {
            let (rc, here) = ask(Some(&c));
            if rc == 0 && !here.head.is_null() {
                return Ok(here);
            }
        }
    }
    Ok(any)
}

/// One provider this host offers, as `spools info` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderInfo {
    /// Its name (`tcp;ofi_rxm`).
    pub name: String,
    /// Its domains (network interfaces or devices), in libfabric's order.
    pub domains: Vec<String>,
    /// Whether it runs over a high-speed interconnect ([`HIGH_SPEED`]).
    pub high_speed: bool,
}

/// The libfabric providers on this host that offer what Spools needs, libfabric's
/// preferred first, and the library's version.
///
/// # Errors
/// [`OfiError::Library`] when libfabric cannot be loaded; [`OfiError::NoProvider`] when
/// no provider qualifies.
pub fn providers() -> Result<(String, Vec<ProviderInfo>), OfiError> {
    let lib = ffi::lib().map_err(OfiError::Library)?;
    let list = find(lib, None, None, ffi::FI_MSG)?;
    let mut out: Vec<ProviderInfo> = Vec::new();
    for i in list.iter() {
        let (name, domain) = (prov_name(i), domain_name(i));
        match out.iter_mut().find(|p| p.name == name) {
            Some(p) => {
                if !p.domains.contains(&domain) {
                    p.domains.push(domain);
                }
            }
            None => out.push(ProviderInfo {
                high_speed: is_high_speed(&name),
                name,
                domains: vec![domain],
            }),
        }
    }
    Ok((lib.version_string(), out))
}
