//! The host's CPUs as /sys describes them (socket, last-level cache, core) and where
//! `spools run --bind core` puts each rank.
//!
//! The reading is written over a reader of /sys's files ([`host_cpus`]), so that it is
//! tested on made-up trees; [`this_host`] reads the real one. A rank is bound to a whole
//! core (every hardware thread of it) while the ranks fit on the cores the launcher may
//! use, else to one hardware thread while they fit on those; ranks are placed compactly,
//! in the order socket, L3 group, core, so that consecutive ranks (the groups of the
//! shared-memory collectives) share a cache. More ranks than hardware threads are not
//! bound (an oversubscribed job needs the scheduler to move them).

use std::collections::BTreeMap;

use thiserror::Error;

/// One CPU (hardware thread) of the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct HostCpu {
    /// Its socket (`physical_package_id`; 0 where /sys does not say).
    pub socket: u32,
    /// Its L3 group: the lowest CPU sharing its level-3 cache (its socket's first CPU
    /// where /sys names no level-3 cache).
    pub l3: u32,
    /// Its core within the socket (`core_id`; the CPU's own number where not given).
    pub core: u32,
    /// The CPU's number.
    pub cpu: u32,
}

/// Why a CPU list (`0-3,8,10-11`, as /sys and /proc write them) does not parse.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CpuListError {
    /// An item is neither a number nor a range `a-b` with `a <= b`.
    #[error("CPU list {list:?}: bad item {item:?}")]
    BadItem {
        /// The whole list.
        list: String,
        /// The item.
        item: String,
    },
}

/// Most CPUs a list may name (Linux's `CONFIG_NR_CPUS` is at most 8192).
const MAX_CPU: u32 = 8192;

/// The CPUs of a list such as `0-3,8,10-11`, in the list's order.
///
/// ```
/// use spools_launch::cpus::parse_cpu_list;
/// assert_eq!(parse_cpu_list("0-2,8").unwrap(), vec![0, 1, 2, 8]);
/// assert!(parse_cpu_list("3-1").is_err());
/// ```
///
/// # Errors
/// [`CpuListError::BadItem`] for an item that is not a CPU number below 8192 or a range
/// of them.
pub fn parse_cpu_list(list: &str) -> Result<Vec<u32>, CpuListError> {
    let mut out = Vec::new();
    for item in list.trim().split(',').filter(|i| !i.is_empty()) {
        let bad = || CpuListError::BadItem {
            list: list.trim().to_string(),
            item: item.to_string(),
        };
        let num = |s: &str| s.parse::<u32>().ok().filter(|&c| c < MAX_CPU);
        let (a, b) = match item.split_once('-') {
            Some((a, b)) => (num(a).ok_or_else(bad)?, num(b).ok_or_else(bad)?),
            None => {
                let a = num(item).ok_or_else(bad)?;
                (a, a)
            }
        };
        if a > b {
            return Err(bad());
        }
        out.extend(a..=b);
    }
    Ok(out)
}

/// The `allowed` CPUs as `read` (a file's text by its path under /sys, e.g.
/// `devices/system/cpu/cpu0/topology/core_id`) describes them, in compact order: by
/// socket, L3 group, core, CPU. What /sys does not say falls back as [`HostCpu`] says.
///
/// ```
/// use spools_launch::cpus::host_cpus;
/// // Nothing known: one socket, one L3 group, a core per CPU.
/// let cpus = host_cpus(|_| None, &[1, 0]);
/// assert_eq!(cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(), vec![0, 1]);
/// ```
pub fn host_cpus(read: impl Fn(&str) -> Option<String>, allowed: &[u32]) -> Vec<HostCpu> {
    let num = |path: String| read(&path).and_then(|s| s.trim().parse::<u32>().ok());
    let mut out: Vec<HostCpu> = allowed
        .iter()
        .map(|&cpu| {
            let base = format!("devices/system/cpu/cpu{cpu}");
            let socket = num(format!("{base}/topology/physical_package_id")).unwrap_or(0);
            let core = num(format!("{base}/topology/core_id")).unwrap_or(cpu);
            // The cache of level 3 among index0, index1, ... (the first missing ends it).
            let l3 = (0..16)
                .map_while(|i| num(format!("{base}/cache/index{i}/level")).map(|l| (i, l)))
                .find(|&(_, level)| level == 3)
                .and_then(|(i, _)| read(&format!("{base}/cache/index{i}/shared_cpu_list")))
                .and_then(|list| parse_cpu_list(&list).ok())
                .and_then(|v| v.into_iter().min());
            HostCpu {
                socket,
                l3: l3.unwrap_or(u32::MAX),
                core,
                cpu,
            }
        })
        .collect();
    // No level-3 cache named: the socket's first allowed CPU stands for its group.
    let mut first: BTreeMap<u32, u32> = BTreeMap::new();
    for c in &out {
        let f = first.entry(c.socket).or_insert(c.cpu);
        *f = (*f).min(c.cpu);
    }
    for c in &mut out {
        if c.l3 == u32::MAX {
            c.l3 = first.get(&c.socket).copied().unwrap_or(c.cpu);
        }
    }
    out.sort_unstable_by_key(|c| (c.socket, c.l3, c.core, c.cpu));
    out.dedup();
    out
}

/// The CPUs this process may run on, as this host's /sys describes them (see
/// [`host_cpus`]); empty where the affinity mask cannot be read.
pub fn this_host() -> Vec<HostCpu> {
    let Ok(set) = rustix::thread::sched_getaffinity(None) else {
        return Vec::new();
    };
    let allowed: Vec<u32> = (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| set.is_set(c))
        .filter_map(|c| u32::try_from(c).ok())
        .collect();
    host_cpus(
        |path| std::fs::read_to_string(std::path::Path::new("/sys").join(path)).ok(),
        &allowed,
    )
}

/// Where each of `ranks` ranks runs on `cpus` (in compact order, as [`host_cpus`] gives
/// them): rank `r` on the CPUs of `sets[r]`. A whole core each while they fit on the
/// cores; one hardware thread each while they fit on those, spread over every core
/// (consecutive ranks on one core's threads); `None` for more ranks than CPUs (not
/// bound).
///
/// ```
/// use spools_launch::cpus::{bind_plan, HostCpu};
/// // One socket, two cores with two hardware threads each (0 and 2 on core 0).
/// let cpu = |cpu, core| HostCpu { socket: 0, l3: 0, core, cpu };
/// let cpus = [cpu(0, 0), cpu(2, 0), cpu(1, 1), cpu(3, 1)];
/// assert_eq!(bind_plan(&cpus, 2), Some(vec![vec![0, 2], vec![1, 3]]));
/// assert_eq!(bind_plan(&cpus, 3), Some(vec![vec![0], vec![2], vec![1]]));
/// assert_eq!(bind_plan(&cpus, 5), None);
/// ```
pub fn bind_plan(cpus: &[HostCpu], ranks: usize) -> Option<Vec<Vec<u32>>> {
    if ranks > cpus.len() {
        return None;
    }
    let mut cores: Vec<Vec<u32>> = Vec::new();
    for (i, c) in cpus.iter().enumerate() {
        let same = i > 0 && {
            let p = &cpus[i - 1];
            (p.socket, p.l3, p.core) == (c.socket, c.l3, c.core)
        };
        match cores.last_mut() {
            Some(core) if same => core.push(c.cpu),
            _ => cores.push(vec![c.cpu]),
        }
    }
    if ranks <= cores.len() {
        return Some(cores.into_iter().take(ranks).collect());
    }
    // More ranks than cores: dealt to the cores in turn, each up to its threads (the first
    // cores get one more where they do not divide evenly), then consecutive ranks on one
    // core's threads.
    let mut per_core = vec![0usize; cores.len()];
    let mut left = ranks;
    while left > 0 {
        let before = left;
        for (k, core) in per_core.iter_mut().zip(&cores) {
            if left > 0 && *k < core.len() {
                *k += 1;
                left -= 1;
            }
        }
        if left == before {
            return None;
        }
    }
    Some(
        cores
            .iter()
            .zip(per_core)
            .flat_map(|(core, k)| core.iter().take(k).map(|&c| vec![c]))
            .collect(),
    )
}

/// How `spools run` places ranks on the host's CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Bind {
    /// Not at all: the scheduler moves them (the default).
    #[default]
    None,
    /// Each rank on a core of its own, compactly ([`bind_plan`]).
    Core,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A /sys of 2 sockets, each with 2 L3 groups of 2 cores with 2 hardware threads;
    /// CPU numbers alternate between the sockets (as on many 2-socket servers), and a
    /// core's second thread is numbered after every first one.
    fn two_sockets() -> HashMap<String, String> {
        let mut m = HashMap::new();
        for cpu in 0u32..16 {
            let socket = cpu % 2;
            let core = (cpu % 8) / 2; // 0..4 within the socket
            let l3 = core / 2;
            let base = format!("devices/system/cpu/cpu{cpu}");
            m.insert(
                format!("{base}/topology/physical_package_id"),
                format!("{socket}\n"),
            );
            m.insert(format!("{base}/topology/core_id"), format!("{core}\n"));
            for (i, level) in [(0, 1), (1, 1), (2, 2), (3, 3)] {
                m.insert(format!("{base}/cache/index{i}/level"), format!("{level}\n"));
            }
            // The CPUs sharing this L3: both threads of both cores of the group.
            let members: Vec<String> = (0..16u32)
                .filter(|&o| o % 2 == socket && ((o % 8) / 2) / 2 == l3)
                .map(|o| o.to_string())
                .collect();
            m.insert(
                format!("{base}/cache/index3/shared_cpu_list"),
                members.join(","),
            );
        }
        m
    }

    #[test]
    fn lists_parse_and_bad_ones_are_refused() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<u32>::new());
        for bad in ["a", "1-", "-1", "5-2", "99999", "1,,x"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn compact_order_is_socket_then_cache_then_core() {
        let sys = two_sockets();
        let all: Vec<u32> = (0..16).collect();
        let cpus = host_cpus(|p| sys.get(p).cloned(), &all);
        let order: Vec<u32> = cpus.iter().map(|c| c.cpu).collect();
        // Socket 0: L3 group of cores 0 and 1 (CPUs 0, 8 and 2, 10), then of cores 2 and 3.
        assert_eq!(
            order,
            vec![0, 8, 2, 10, 4, 12, 6, 14, 1, 9, 3, 11, 5, 13, 7, 15]
        );
        assert_eq!(cpus[0].l3, 0);
        assert_eq!(cpus[4].l3, 4);
        assert_eq!(cpus[8].socket, 1);
        // Four ranks: whole cores, the first two sharing an L3 group.
        let plan = bind_plan(&cpus, 4).unwrap();
        assert_eq!(
            plan,
            vec![vec![0, 8], vec![2, 10], vec![4, 12], vec![6, 14]]
        );
        // Twelve ranks: more than the 8 cores, one hardware thread each, on every core
        // (the first four cores get two ranks, the others one).
        let plan = bind_plan(&cpus, 12).unwrap();
        assert_eq!(plan.len(), 12);
        assert!(plan.iter().all(|s| s.len() == 1));
        assert_eq!(plan[1], vec![8]);
        let core_of = |cpu: u32| {
            let c = cpus.iter().find(|c| c.cpu == cpu).unwrap();
            (c.socket, c.core)
        };
        let used: std::collections::BTreeSet<_> = plan.iter().map(|s| core_of(s[0])).collect();
        assert_eq!(used.len(), 8, "{plan:?}");
        let all: std::collections::BTreeSet<u32> = plan.iter().map(|s| s[0]).collect();
        assert_eq!(all.len(), 12, "no CPU twice: {plan:?}");
        // Cores of unequal threads (a mask that leaves out one thread of a core): every
        // rank still gets a CPU.
        let cpu = |cpu, core| HostCpu {
            socket: 0,
            l3: 0,
            core,
            cpu,
        };
        let uneven = [cpu(0, 0), cpu(1, 1), cpu(3, 1)];
        assert_eq!(bind_plan(&uneven, 3), Some(vec![vec![0], vec![1], vec![3]]));
        assert_eq!(bind_plan(&cpus, 17), None);
    }

    #[test]
    fn only_the_allowed_cpus_are_used() {
        let sys = two_sockets();
        let cpus = host_cpus(|p| sys.get(p).cloned(), &[1, 3, 9]);
        assert_eq!(
            cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(),
            vec![1, 9, 3]
        );
        assert_eq!(
            bind_plan(&cpus, 2).unwrap(),
            vec![vec![1, 9], vec![3]],
            "CPUs 1 and 9 are one core's two threads"
        );
    }

    #[test]
    fn a_sys_without_caches_groups_by_socket() {
        let mut sys = HashMap::new();
        sys.insert(
            "devices/system/cpu/cpu5/topology/physical_package_id".to_string(),
            "1".to_string(),
        );
        let cpus = host_cpus(|p| sys.get(p).cloned(), &[5, 2, 3]);
        let got: Vec<(u32, u32, u32)> = cpus.iter().map(|c| (c.cpu, c.socket, c.l3)).collect();
        assert_eq!(got, vec![(2, 0, 2), (3, 0, 2), (5, 1, 5)]);
    }

    #[test]
    fn this_host_names_every_allowed_cpu_once() {
        let cpus = this_host();
        assert!(!cpus.is_empty(), "this process may run somewhere");
        let mut ids: Vec<u32> = cpus.iter().map(|c| c.cpu).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), cpus.len());
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap();
        assert_eq!(
            ids,
            parse_cpu_list(line).unwrap(),
            "the affinity mask's CPUs"
        );
    }
}
