//! Which libfabric providers the tests of the libfabric transport run on.

use std::process::Command;

/// The providers every libfabric test runs on, where this machine has them: TCP under
/// the RxM layer (the reference provider, and the path IP networks take) and shared
/// memory. Not `udp;ofi_rxd`: with libfabric 1.17 messages sent over it fail to arrive
/// (the same transport code delivers them over the other two). In the conformance
/// suite's ordering test (five ranks, 384 messages each) it failed 3 times in 4 runs at
/// 820281d, a receiver waiting 60 s with 383, 374 and 349 of its 384 (each stream's
/// sequence numbers hold back what follows a missing message); every other test of the suite,
/// and the tagged, collective, active-message and watchdog tests, passed over it.
pub const OFI_TEST_PROVIDERS: [&str; 2] = ["tcp;ofi_rxm", "shm"];

/// The providers of [`OFI_TEST_PROVIDERS`] this machine offers with reliable datagram
/// endpoints, asked of `fi_info` (Debian's libfabric-bin, which
/// `scripts/install-libfabric.sh`, run by the test command, installs with the library).
/// None with `SPOOLS_TEST_OFI=0`, or when libfabric is not installed: the test says it
/// skipped, or, with `SPOOLS_REQUIRE_OFI=1` (CI), fails.
///
/// # Panics
/// With `SPOOLS_REQUIRE_OFI=1`, when `fi_info` cannot run or offers none of them.
#[allow(clippy::panic)]
pub fn ofi_providers() -> Vec<&'static str> {
    if std::env::var("SPOOLS_TEST_OFI").is_ok_and(|v| v == "0") {
        eprintln!("skipped: the libfabric backend's tests (SPOOLS_TEST_OFI=0)");
        return Vec::new();
    }
    let found: Vec<&'static str> = OFI_TEST_PROVIDERS
        .into_iter()
        .filter(|p| {
            Command::new("fi_info")
                .args(["-p", p, "-t", "FI_EP_RDM", "-c", "FI_MSG"])
                .output()
                .is_ok_and(|o| o.status.success() && !o.stdout.is_empty())
        })
        .collect();
    if found.is_empty() {
        if std::env::var("SPOOLS_REQUIRE_OFI").is_ok_and(|v| v == "1") {
            panic!("no libfabric provider of {OFI_TEST_PROVIDERS:?} (fi_info, from libfabric-bin) but SPOOLS_REQUIRE_OFI=1; scripts/install-libfabric.sh installs them");
        }
        eprintln!("skipped: libfabric (fi_info) offers none of {OFI_TEST_PROVIDERS:?}; run scripts/install-libfabric.sh, or set SPOOLS_REQUIRE_OFI=1 to make this a failure");
    }
    found
}

/// The provider the multi-host tests run over again, between network namespaces
/// (`tcp;ofi_rxm`: shared memory does not reach another host), when
/// [`ofi_providers`] has it; with it, `SPOOLS_TRANSPORT=auto` takes libfabric between
/// hosts and keeps shared memory within one.
pub fn ofi_between_hosts() -> Option<&'static str> {
    ofi_providers().into_iter().find(|p| p.starts_with("tcp"))
}

/// The networks between hosts the multi-host tests run over: Spools' TCP (`None`), then
/// [`ofi_between_hosts`] when the machine has it (as `SPOOLS_OFI_PROVIDER`, which
/// `SPOOLS_TRANSPORT=auto` takes between hosts).
pub fn networks_between_hosts() -> Vec<Option<&'static str>> {
    std::iter::once(None)
        .chain(ofi_between_hosts().map(Some))
        .collect()
}
