//! Host identity: ranks with the same identity can share memory.

use std::os::unix::fs::MetadataExt;

/// An identity shared exactly by the processes that can map the same `/dev/shm` objects:
/// the host name, the kernel's boot id and the device and inode of `/dev/shm`.
///
/// `SPOOLS_HOST_ID`, when set, is added to it: ranks with different values count as on
/// different hosts (they talk over TCP and collectives treat them as separate hosts). It
/// serves hosts where detection is wrong and tests of multi-host behaviour on one machine.
pub fn host_identity() -> String {
    let detected = detected_identity();
    match std::env::var("SPOOLS_HOST_ID") {
        Ok(id) if !id.is_empty() => format!("{detected}/{id}"),
        _ => detected,
    }
}

fn detected_identity() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".into());
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let shm = std::fs::metadata("/dev/shm")
        .map(|m| format!("{}:{}", m.dev(), m.ino()))
        .unwrap_or_default();
    format!("{name}/{boot}/{shm}")
}

/// The host as the files it holds name it: the host name, followed by `/ID` when
/// `SPOOLS_HOST_ID` sets one (hosts told apart only by that variable share a name).
pub fn host_label() -> String {
    match std::env::var("SPOOLS_HOST_ID") {
        Ok(id) if !id.is_empty() => format!("{}/{id}", host_name()),
        _ => host_name(),
    }
}

/// The host name alone, for messages.
pub fn host_name() -> String {
    host_identity()
        .split('/')
        .next()
        .unwrap_or("unknown-host")
        .to_string()
}
