//! The handler registry (GRIM section 5.4): names registered locally, one global
//! name-to-id table agreed by `sync_handlers`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::error::AmError;
use crate::message::ActiveMessage;

/// A handler: runs on the target when a short or bulk message for it arrives.
pub type Handler = Arc<dyn Fn(&ActiveMessage<'_>) + Send + Sync>;

/// A global handler id, the same on every rank after `sync_handlers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HandlerId(pub u32);

#[derive(Default)]
pub(crate) struct Registry {
    local: HashMap<String, Handler>,
    names: Vec<String>,
    by_id: Arc<Vec<Option<Handler>>>,
    ids: HashMap<String, u32>,
}

impl Registry {
    pub(crate) fn register(&mut self, name: &str, h: Handler) -> Result<(), AmError> {
        if self.local.contains_key(name) {
            return Err(AmError::DuplicateHandler(name.to_string()));
        }
        self.local.insert(name.to_string(), h.clone());
        if let Some(&id) = self.ids.get(name) {
            Arc::make_mut(&mut self.by_id)[id as usize] = Some(h);
        }
        Ok(())
    }

    /// This rank's names, encoded for the allgather (newline-separated).
    pub(crate) fn local_names(&self) -> Vec<u8> {
        let set: BTreeSet<&str> = self.local.keys().map(String::as_str).collect();
        set.into_iter().collect::<Vec<_>>().join("\n").into_bytes()
    }

    /// Rank 0's merge: the installed table, then the names it lacks, sorted. Ids once
    /// given never change, so a later `sync_handlers` leaves messages in flight valid.
    pub(crate) fn merge(&self, parts: &[Vec<u8>]) -> Vec<u8> {
        let mut set = BTreeSet::new();
        for p in parts {
            for n in String::from_utf8_lossy(p)
                .split('\n')
                .filter(|n| !n.is_empty() && !self.ids.contains_key(*n))
            {
                set.insert(n.to_string());
            }
        }
        let names: Vec<&str> = self
            .names
            .iter()
            .map(String::as_str)
            .chain(set.iter().map(String::as_str))
            .collect();
        names.join("\n").into_bytes()
    }

    /// Installs the global table broadcast by rank 0.
    pub(crate) fn install(&mut self, table: &[u8]) {
        self.names = String::from_utf8_lossy(table)
            .split('\n')
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect();
        self.ids = self
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i as u32))
            .collect();
        self.by_id = Arc::new(
            self.names
                .iter()
                .map(|n| self.local.get(n).cloned())
                .collect(),
        );
    }

    pub(crate) fn id(&self, name: &str) -> Result<HandlerId, AmError> {
        self.ids
            .get(name)
            .map(|&i| HandlerId(i))
            .ok_or_else(|| AmError::UnknownHandlerName(name.to_string()))
    }

    /// The id-indexed handler table, shared (the progress engine keeps a copy and
    /// refreshes it when the registry changes).
    pub(crate) fn snapshot(&self) -> Arc<Vec<Option<Handler>>> {
        self.by_id.clone()
    }

    pub(crate) fn name(&self, id: u32) -> String {
        self.names
            .get(id as usize)
            .cloned()
            .unwrap_or_else(|| format!("#{id}"))
    }

    pub(crate) fn table(&self) -> &[String] {
        &self.names
    }
}
