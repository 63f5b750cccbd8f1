//! `spools info`: the effective configuration, the transports and their capabilities.

use std::io::Write;

use anyhow::{Context, Result};
use spools::Caps;

use crate::out;

fn caps(w: &mut impl Write, c: &Caps) -> std::io::Result<()> {
    writeln!(w, "  max message     {} B", c.max_message)?;
    writeln!(w, "  max inline      {} B", c.max_inline)?;
    writeln!(
        w,
        "  ordered         {} (per sender, lane and priority)",
        c.ordered
    )?;
    writeln!(w, "  lanes           {}", c.lanes)?;
    writeln!(
        w,
        "  single copy     {:?}: {}",
        c.single_copy, c.single_copy_reason
    )
}

/// libfabric: the library, the providers this host offers, and the one in use.
fn ofi(w: &mut impl Write, world: &spools::World) -> std::io::Result<()> {
    match spools_fabric::ofi::providers() {
        Ok((version, ps)) => {
            writeln!(w, "ofi: libfabric {version}, providers with reliable ordered messages on this host (libfabric's preference first; * high-speed, taken between hosts by SPOOLS_TRANSPORT=auto):")?;
            for p in &ps {
                writeln!(
                    w,
                    "  {}{:<22} {}",
                    if p.high_speed { "*" } else { " " },
                    p.name,
                    p.domains.join(", ")
                )?;
            }
        }
        Err(e) => writeln!(w, "ofi: unavailable: {e}")?,
    }
    match (world.ofi(), world.ofi_caps()) {
        (Some(o), Some(c)) => {
            let (prov, domain) = o.provider();
            writeln!(w, "  in use          {prov} on {domain}")?;
            caps(w, c)
        }
        _ => writeln!(w, "  in use          none (the network transport is tcp)"),
    }
}

/// Rank 0's CPUs as /sys describes them (what `spools run --bind core` places ranks on).
fn host(w: &mut impl Write) -> std::io::Result<()> {
    let cpus = spools_launch::cpus::this_host();
    let count = |key: fn(&spools_launch::cpus::HostCpu) -> (u32, u32, u32)| {
        cpus.iter()
            .map(key)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    let list: Vec<String> = cpus.iter().map(|c| c.cpu.to_string()).collect();
    writeln!(w, "# host (rank 0's affinity mask, as /sys describes it)")?;
    let rows = [
        ("cpus", list.len(), "hardware threads this rank may run on"),
        (
            "cores",
            count(|c| (c.socket, c.l3, c.core)),
            "physical cores among them",
        ),
        (
            "l3_groups",
            count(|c| (c.socket, c.l3, 0)),
            "groups sharing a last-level cache",
        ),
        ("sockets", count(|c| (c.socket, 0, 0)), "sockets"),
    ];
    for (k, v, what) in rows {
        writeln!(w, "{k:<15} = {v:<24} # {what}")?;
    }
    writeln!(
        w,
        "{:<15} = {:<24} # the order spools run --bind core places ranks in (socket, L3 group, core)",
        "compact_order",
        list.join(",")
    )
}

pub(crate) fn run() -> Result<()> {
    let world = spools::init().context("starting the runtime")?;
    let mut w = out::stdout();
    if world.rank() == 0 {
        let cfg = world.worker().config();
        writeln!(w, "# Spools {}", env!("CARGO_PKG_VERSION"))?;
        writeln!(
            w,
            "# job: {} rank(s), launcher {}, bootstrap {}, job id {:016x}, init took {:.2} ms",
            world.size(),
            world.launcher().name(),
            world.bootstrap(),
            world.job(),
            world.init_time().as_secs_f64() * 1e3
        )?;
        match &cfg.file {
            Some(f) => writeln!(
                w,
                "# configuration: defaults < {} < SPOOLS_* environment",
                f.display()
            )?,
            None => writeln!(
                w,
                "# configuration: defaults < SPOOLS_* environment (SPOOLS_CONFIG not set)"
            )?,
        }
        writeln!(w, "{cfg}")?;
        writeln!(w)?;
        writeln!(w, "# log")?;
        writeln!(
            w,
            "{:<15} = {:<24} # what the runtime logs on stderr (SPOOLS_LOG)",
            "level",
            spools_boot::logger::level().to_string().to_lowercase()
        )?;
        writeln!(w)?;
        writeln!(w, "# MPI")?;
        writeln!(
            w,
            "{:<15} = {:<24} # the MPI standard ABI library spools run puts first on its ranks' LD_LIBRARY_PATH (SPOOLS_MPI_LIB=DIR chooses another); MPI_Get_library_version names the one a rank loaded",
            "libmpi_abi",
            crate::mpilib::describe()
        )?;
        writeln!(w)?;
        writeln!(w, "# parallel I/O")?;
        for (k, v, what) in spools_io::settings() {
            writeln!(w, "{k:<15} = {v:<24} # {what}")?;
        }
        writeln!(
            w,
            "{:<15} = {:<24} # collective buffer per aggregator: files are written and read in rounds of this size (SPOOLS_COLL_BUFFER)",
            "coll_buffer",
            spools_boot::config::show_size(cfg.coll_buffer)
        )?;
        writeln!(w)?;
        writeln!(w, "# collectives")?;
        let sm = match cfg.coll_sm_limit {
            0 => "off".to_owned(),
            n => format!("up to {}", spools_boot::config::show_size(n)),
        };
        writeln!(
            w,
            "{:<15} = {sm:<24} # barrier, bcast, reduce, allreduce within a host through shared flags and slots (coll_sm_limit); larger, or between hosts: messages",
            "shared_memory"
        )?;
        let fences = if spools_fabric::shm::SharedArea::light_fences() {
            "yes"
        } else {
            "no"
        };
        writeln!(
            w,
            "{:<15} = {fences:<24} # this process registered for asymmetric fences (membarrier global expedited): where every member did (and, with coll_sm_fences = auto, ranks do not outnumber CPUs; light: busy or not; locked: never; here {}), the collectives' flags are release stores and a member about to sleep runs the barrier",
            "light_fences",
            cfg.coll_sm_fences
        )?;
        writeln!(w)?;
        host(&mut w)?;
        writeln!(w)?;
        writeln!(w, "# transports")?;
        match world.shm() {
            Some(shm) => {
                let g = shm.geometry();
                writeln!(w, "shm: ranks on this host {:?}", shm.local_ranks())?;
                writeln!(
                    w,
                    "  rings           {} B low / {} B high priority, {} B cells, {} lanes per sender",
                    g.ring_low, g.ring_high, g.cell, g.lanes
                )?;
                if let Some(c) = world.shm_caps() {
                    caps(&mut w, c)?;
                }
                for n in shm.notes() {
                    writeln!(w, "  note            {n}")?;
                }
                if shm.local_ranks().len() < 2 {
                    let (choice, why) = spools_fabric::shm::probe_single_copy(cfg.single_copy);
                    writeln!(
                        w,
                        "  probe           with peers on this host: {choice:?}: {why}"
                    )?;
                }
            }
            None => writeln!(w, "shm: off (SPOOLS_TRANSPORT={})", cfg.transport)?,
        }
        if let (Some(tcp), Some(c)) = (world.tcp(), world.tcp_caps()) {
            writeln!(w, "tcp: listening on {}", tcp.listen_addr())?;
            caps(&mut w, c)?;
        }
        ofi(&mut w, &world)?;
        writeln!(w)?;
        writeln!(w, "# routes from rank 0")?;
        for r in 0..world.size() {
            writeln!(w, "  rank {r}: {:?}", world.worker().route(r)?)?;
        }
        w.flush()?;
    }
    world.finalize().context("finalising")?;
    Ok(())
}
