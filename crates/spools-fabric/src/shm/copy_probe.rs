//! The start-up probe that decides how large shared-memory transfers are copied.

use std::time::Instant;

use spools_boot::config::SingleCopyChoice as Choice;

use crate::caps::SingleCopy;

const PROBE_BYTES: usize = 1 << 20;

fn median(mut v: Vec<u128>) -> u128 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Copies `src` into `dst` (as much as both hold) in this process with
/// `process_vm_readv`.
fn cma_self(dst: &mut [u8], src: &[u8]) -> std::io::Result<()> {
    let n = dst.len().min(src.len());
    super::cma::read_one(std::process::id(), src.as_ptr() as u64, &mut dst[..n])
}

/// Lets same-host ranks read this process with `process_vm_readv` where Yama's
/// `ptrace_scope` 1 (Ubuntu's default) would refuse them (they are siblings, not its
/// parent): `PR_SET_PTRACER_ANY`, as Open MPI's CMA does, unless the configuration turned
/// single copy off. Any process of the same user may then read this rank's memory, as it
/// may everywhere without Yama; scopes 2 and 3 still refuse, and the exchange engine
/// falls back to its rings.
pub(crate) fn allow_peer_reads(cfg: Choice) {
    if cfg != Choice::Pipeline {
        // Without Yama the call fails (EINVAL) and nothing is needed.
        let _ = rustix::process::set_ptracer(rustix::process::PTracer::Any);
    }
}

/// Measures kernel-assisted single copy against a plain copy of 1 MiB and chooses.
/// Returns the mechanism and the reason in words.
pub(crate) fn choose(cfg: Choice) -> (SingleCopy, String) {
    if cfg == Choice::Pipeline {
        return (
            SingleCopy::None,
            "pipelined copy through the rings (set by configuration)".into(),
        );
    }
    let src = vec![0x5au8; PROBE_BYTES];
    let mut dst = vec![0u8; PROBE_BYTES];
    if let Err(e) = cma_self(&mut dst, &src) {
        return (
            SingleCopy::None,
            format!("pipelined copy: process_vm_readv is not permitted here ({e})"),
        );
    }
    let mut cma = Vec::new();
    let mut copy = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let ok = cma_self(&mut dst, &src).is_ok();
        cma.push(if ok {
            t.elapsed().as_nanos()
        } else {
            u128::MAX
        });
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        copy.push(t.elapsed().as_nanos().max(1));
    }
    let (c, m) = (median(cma), median(copy));
    let gbps = |ns: u128| PROBE_BYTES as f64 / ns.max(1) as f64;
    let figures = format!(
        "1 MiB: process_vm_readv {:.1} GB/s, memcpy {:.1} GB/s",
        gbps(c),
        gbps(m)
    );
    // A pipelined transfer runs two copies in parallel (sender in, receiver out), so its
    // rate is about one memcpy's: one read must beat that for a lone point-to-point
    // transfer to gain. In a collective every rank sends and receives at once, each
    // core's copies are the limit, and one read per transfer instead of two copies
    // gains where a read takes less than two memcpys (2 ranks on 2 cores, 9 GB/s against
    // 17: alltoall 64 KiB 19.1 -> 11.4 us, bcast 1 MiB 128 -> 78), and loses where it
    // takes more (a later 2-core machine, 12 GB/s against 50: alltoall 64 KiB 9.6 -> 6.9
    // us through the rings, bcast 1 MiB 70 -> 48).
    if cfg == Choice::Cma || c < m {
        let why = if cfg == Choice::Cma {
            "set by configuration"
        } else {
            "faster by probe"
        };
        (
            SingleCopy::Cma,
            format!("cross-memory attach for every rendezvous within the host, {why} ({figures})"),
        )
    } else if c >= 2 * m {
        (
            SingleCopy::None,
            format!("pipelined copy through the rings: two copies are faster than one read, by probe ({figures})"),
        )
    } else {
        (
            SingleCopy::CmaCollectives,
            format!("cross-memory attach for collectives' rendezvous within the host; point-to-point through the rings, faster by probe ({figures})"),
        )
    }
}
