//! What `/proc` tells of the ranks' processes: their descendants, and whether one is
//! stopped, busy or exiting.

/// The live processes descended from `pid` (children, their children, ...), from
/// `/proc`: every process whose chain of parents reaches `pid`, children first.
pub fn descendants(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(u32, u32)> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            // After the command name: the state, then the parent's pid.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
            Some((p, ppid.parse().ok()?))
        })
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|&&(p, pp)| pp == parent && !found.contains(&p))
                .map(|&(p, _)| p)
                .collect::<Vec<_>>(),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// The state letter of a process or thread (`R`, `S`, `T`, ...) from its `stat` file
/// (`/proc/PID/stat`, `/proc/PID/task/TID/stat`).
pub(super) fn state_in(stat: &str) -> Option<String> {
    let stat = std::fs::read_to_string(stat).ok()?;
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .map(str::to_string)
}

/// Whether process `pid` is stopped (by a signal or a tracer).
pub(crate) fn is_stopped(pid: u32) -> bool {
    state_in(&format!("/proc/{pid}/stat")).is_some_and(|state| state == "T" || state == "t")
}

/// Whether a thread of process `pid`, or of a process descended from it, is running or
/// waiting for a CPU (state `R`): busy, rather than waiting for something.
pub(crate) fn is_busy(pid: u32) -> bool {
    let runs = |p: u32| {
        std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|t| state_in(&format!("{}/stat", t.path().display())).as_deref() == Some("R"))
    };
    // The process itself first: the walk of /proc for its descendants costs more.
    runs(pid) || descendants(pid).into_iter().any(runs)
}

/// Whether process `pid` is exiting or has exited: gone (reaped), a zombie, or flagged
/// `PF_EXITING` in `/proc/PID/stat`. The kernel sets that flag at the start of an exit,
/// before it closes the process's files, so a rank whose connection closed because it is
/// dying is always seen here, however late its exit status reaches the launcher.
pub(crate) fn is_exiting(pid: u32) -> bool {
    /// `PF_EXITING` of the kernel's per-task flags (`include/linux/sched.h`).
    const PF_EXITING: u64 = 0x4;
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let mut fields = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace())
        .into_iter()
        .flatten();
    let state = fields.next().unwrap_or("");
    // Fields after the state: ppid, pgrp, session, tty_nr, tpgid, then the flags.
    let flags = fields
        .nth(5)
        .and_then(|f| f.parse::<u64>().ok())
        .unwrap_or(0);
    state == "Z" || state == "X" || flags & PF_EXITING != 0
}

#[cfg(test)]
mod tests {
    use super::is_exiting;

    #[test]
    fn a_running_process_is_not_exiting_and_an_exited_one_is() {
        assert!(!is_exiting(std::process::id()), "this very process");
        let mut child = std::process::Command::new("true")
            .spawn()
            .unwrap_or_else(|e| panic!("spawn true: {e}"));
        let pid = child.id();
        // Not reaped yet: a zombie once it exited. Wait for that state (bounded).
        let start = std::time::Instant::now();
        while !is_exiting(pid) {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "`true` never exited"
            );
            std::thread::yield_now();
        }
        let _ = child.wait();
        assert!(is_exiting(pid), "a reaped process (no /proc entry)");
    }
}
