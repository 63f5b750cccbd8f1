//! The host list of a multi-host job (`--hosts`, `--agent`): where its ranks run
//! ([`HostPlan`]), how it is parsed and checked ([`HostsError`]), and how many ranks one
//! host takes ([`MAX_LOCAL_RANKS`]).

use std::net::IpAddr;

use thiserror::Error;

/// Most ranks `spools run` starts on one host: far more than any host has cores, and few
/// enough that the processes, their output pipes and their supervision stay within what
/// a host gives one user.
pub const MAX_LOCAL_RANKS: u32 = 4096;

/// The agent used when `--agent` is not given.
pub const DEFAULT_AGENT: &str = "ssh -o BatchMode=yes {host} {shcmd}";
/// Most hosts in one `--hosts` list.
pub const MAX_HOSTS: usize = 4096;
/// Longest host name taken (as DNS allows).
pub const MAX_HOST_NAME: usize = 253;

/// One host of the list and how many ranks it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSlot {
    /// The host's name, as the agent takes it.
    pub name: String,
    /// Ranks started there.
    pub ranks: u32,
}

/// Where the ranks of a multi-host job run and how they are started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPlan {
    /// The hosts, in rank order.
    pub hosts: Vec<HostSlot>,
    /// The agent template, split into words.
    pub agent: Vec<String>,
    /// The address the ranks reach the launcher at; `None`: per host, the address of the
    /// launcher's interface routing to it.
    pub bootstrap_ip: Option<IpAddr>,
}

/// A `--hosts` list or an `--agent` template that cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum HostsError {
    /// The list is empty.
    #[error("--hosts: empty list (expected HOST:RANKS[,HOST:RANKS...], e.g. h1:2,h2:2)")]
    Empty,
    /// An entry is not `HOST:RANKS` with a plain host name and a positive count.
    #[error("--hosts: {entry:?} is not HOST:RANKS (a host name of letters, digits, '.', '-', '_' and a count from 1 to {MAX_LOCAL_RANKS})")]
    BadEntry {
        /// The entry as given.
        entry: String,
    },
    /// The same host twice.
    #[error("--hosts: host {host:?} is listed twice (give it the sum of its ranks once)")]
    Duplicate {
        /// The host.
        host: String,
    },
    /// Too many hosts.
    #[error("--hosts: {count} hosts, at most {MAX_HOSTS}")]
    TooMany {
        /// How many were given.
        count: usize,
    },
    /// `-n` disagrees with the sum of the list.
    #[error("-n {given} but --hosts lists {listed} ranks")]
    Count {
        /// `-n`.
        given: u32,
        /// The sum of the list.
        listed: u64,
    },
    /// The agent template has no `{host}`, or is empty.
    #[error("--agent {template:?}: the template must contain {{host}} (e.g. 'ssh -o BatchMode=yes {{host}} {{shcmd}}' or 'ip netns exec {{host}} {{cmd}}')")]
    NoHost {
        /// The template.
        template: String,
    },
    /// The agent template has both `{cmd}` and `{shcmd}`, or one of them twice.
    #[error("--agent {template:?}: at most one {{cmd}} or {{shcmd}}")]
    TwoCommands {
        /// The template.
        template: String,
    },
}

impl HostPlan {
    /// Parses `--hosts` and `--agent` (`None`: [`DEFAULT_AGENT`]).
    ///
    /// # Errors
    /// [`HostsError`] for a malformed list or template.
    pub fn parse(
        hosts: &str,
        agent: Option<&str>,
        bootstrap_ip: Option<IpAddr>,
    ) -> Result<HostPlan, HostsError> {
        Ok(HostPlan {
            hosts: parse_hosts(hosts)?,
            agent: parse_agent(agent.unwrap_or(DEFAULT_AGENT))?,
            bootstrap_ip,
        })
    }

    /// The total number of ranks.
    pub fn ranks(&self) -> u64 {
        self.hosts.iter().map(|h| u64::from(h.ranks)).sum()
    }

    /// The host that runs `rank`.
    pub fn host_of(&self, rank: u32) -> Option<&str> {
        let mut first = 0u64;
        for h in &self.hosts {
            first += u64::from(h.ranks);
            if u64::from(rank) < first {
                return Some(&h.name);
            }
        }
        None
    }

    /// Checks the list against the job's size.
    ///
    /// # Errors
    /// [`HostsError::Count`] when they differ.
    pub fn check(&self, ranks: u32) -> Result<(), HostsError> {
        if self.ranks() != u64::from(ranks) {
            return Err(HostsError::Count {
                given: ranks,
                listed: self.ranks(),
            });
        }
        Ok(())
    }

    /// The agent as one line, for messages.
    pub fn agent_line(&self) -> String {
        self.agent.join(" ")
    }
}

fn plain_host(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_HOST_NAME
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// Parses `HOST:RANKS[,HOST:RANKS...]`.
///
/// # Errors
/// [`HostsError`] for an empty list, a malformed entry, a host listed twice.
pub fn parse_hosts(list: &str) -> Result<Vec<HostSlot>, HostsError> {
    if list.trim().is_empty() {
        return Err(HostsError::Empty);
    }
    let entries: Vec<&str> = list.split(',').collect();
    if entries.len() > MAX_HOSTS {
        return Err(HostsError::TooMany {
            count: entries.len(),
        });
    }
    let mut hosts: Vec<HostSlot> = Vec::with_capacity(entries.len());
    for entry in entries {
        let bad = || HostsError::BadEntry {
            entry: entry.to_string(),
        };
        let (name, ranks) = entry.trim().rsplit_once(':').ok_or_else(bad)?;
        let ranks: u32 = ranks.parse().map_err(|_| bad())?;
        if !plain_host(name) || ranks == 0 || ranks > MAX_LOCAL_RANKS {
            return Err(bad());
        }
        if hosts.iter().any(|h| h.name == name) {
            return Err(HostsError::Duplicate {
                host: name.to_string(),
            });
        }
        hosts.push(HostSlot {
            name: name.to_string(),
            ranks,
        });
    }
    Ok(hosts)
}

/// Splits an agent template into words and checks its placeholders.
///
/// # Errors
/// [`HostsError::NoHost`], [`HostsError::TwoCommands`].
pub fn parse_agent(template: &str) -> Result<Vec<String>, HostsError> {
    let words: Vec<String> = template.split_whitespace().map(str::to_string).collect();
    if !words.iter().any(|w| w.contains("{host}")) {
        return Err(HostsError::NoHost {
            template: template.to_string(),
        });
    }
    let commands = words
        .iter()
        .filter(|w| *w == "{cmd}" || *w == "{shcmd}")
        .count();
    if commands > 1 {
        return Err(HostsError::TwoCommands {
            template: template.to_string(),
        });
    }
    Ok(words)
}
