//! The live inbox, one file per agent: `runtime/agents/<name>/inbox.json` holds that agent's
//! actionable items and unacknowledged mentions ([`AgentInbox`], the same item and mention
//! shapes as before), and `runtime-inbox.json` keeps only the id counter (its `items` and
//! `mentions` stay empty). A post rewrites the counter and the inboxes of the agents it
//! addresses, never anyone else's, so one agent's backlog costs nobody else.
//!
//! The operations still work on one [`Inbox`] model: a transaction loads the part it needs
//! ([`Scope`]), runs the pure operation, and [`write`] splits the result by agent again. An
//! item or mention created for an agent whose file was not loaded is added to that file as it
//! is on disk (under the agents' lock, which every inbox file shares, so cross-agent operations
//! stay one transaction).
//!
//! Appending: a post does not read an addressed agent's file. When the file exists, the entries
//! the post made for that agent are appended to `runtime/agents/<name>/inbox-added.jsonl` (one
//! `{"item": ...}` or `{"mention": ...}` per line), so adding costs the same at 1 and at 2,000
//! pending items. Every reader ([`read`], [`snapshot`]) reads the two files as one inbox; the
//! first transaction that loads the agent's inbox and changes it folds the added lines into
//! `inbox.json` and empties the other file, in one commit.
//!
//! Migration: a `runtime-inbox.json` from before the split (items or mentions in it) is read as
//! part of every inbox; the first transaction that writes the inbox moves its entries into the
//! agents' files and empties it, in one commit (all renames or none, like any transaction).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{AGENT_DIR, Inbox, Item, Mention, VERSION, agent_file, check_version, parse, to_bytes};
use crate::error::Result;
use crate::store::{Document, Store, Tx, corrupt};
use crate::time::Timestamp;

/// `runtime/agents/<name>/inbox.json`.
pub const INBOX_FILE: &str = "inbox.json";

/// `runtime/agents/<name>/inbox-added.jsonl`: entries added since `inbox.json` was last written.
pub const ADDED_FILE: &str = "inbox-added.jsonl";

/// Never reached in practice: an agent's own next transaction folds the added lines.
const ADDED_CAP: u64 = 1 << 40;

/// One line of [`ADDED_FILE`].
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Added {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    item: Option<Item>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mention: Option<Mention>,
}

/// One agent's live inbox.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentInbox {
    pub version: String,
    pub agent: String,
    /// Actionable items by id.
    pub items: BTreeMap<String, Item>,
    /// Unacknowledged mentions by id.
    pub mentions: BTreeMap<String, Mention>,
}

impl AgentInbox {
    /// Parse and check one agent's file: every entry is filed under its id and belongs to the
    /// agent the file is named after; items are actionable.
    pub fn decode(path: &Path, agent: &str, bytes: &[u8]) -> crate::store::Result<AgentInbox> {
        let d: AgentInbox = parse(path, bytes)?;
        check_version(path, &d.version)?;
        let bad = |what: &str| Err(corrupt(path, what.to_string()));
        if d.agent != agent {
            return bad(&format!(
                "the inbox of `{}` is filed under `{agent}`",
                d.agent
            ));
        }
        for (k, i) in &d.items {
            if *k != i.id || i.agent != agent || !i.status.actionable() {
                return bad(&format!("inbox item `{k}` is misfiled or not actionable"));
            }
        }
        for (k, m) in &d.mentions {
            if *k != m.id || m.agent != agent {
                return bad(&format!("mention `{k}` is misfiled"));
            }
        }
        Ok(d)
    }

    /// Add the entries of the agent's [`ADDED_FILE`] (its complete lines), checked like the
    /// file's own.
    pub fn add_lines(&mut self, path: &Path, bytes: &[u8]) -> crate::store::Result<()> {
        let text = String::from_utf8_lossy(bytes);
        let complete = match text.rfind('\n') {
            Some(end) => &text[..end],
            None => "",
        };
        for line in complete.split('\n').filter(|l| !l.trim().is_empty()) {
            let a: Added = parse(path, line.as_bytes())?;
            let bad = |what: String| Err(corrupt(path, what));
            if let Some(i) = a.item {
                if i.agent != self.agent || !i.status.actionable() {
                    return bad(format!(
                        "inbox item `{}` is misfiled or not actionable",
                        i.id
                    ));
                }
                self.items.insert(i.id.clone(), i);
            }
            if let Some(m) = a.mention {
                if m.agent != self.agent {
                    return bad(format!("mention `{}` is misfiled", m.id));
                }
                self.mentions.insert(m.id.clone(), m);
            }
        }
        Ok(())
    }
}

/// Which agents' inboxes a transaction or a reader loads.
#[derive(Clone, Debug)]
pub enum Scope {
    /// None: only the id counter (a post, which only adds).
    Nobody,
    /// These agents.
    Agents(Vec<String>),
    /// Everyone (operations by item or mention id, overviews).
    All,
}

impl Scope {
    pub fn one(agent: &str) -> Scope {
        Scope::Agents(vec![agent.to_string()])
    }
}

/// What a transaction loaded, so [`write`] rewrites exactly what changed.
pub struct Loaded {
    /// The agents loaded (`None`: all of them).
    agents: Option<BTreeSet<String>>,
    /// The bytes of each agent's file as read (`None`: no file).
    files: BTreeMap<String, Option<Vec<u8>>>,
    /// The agents loaded whose [`ADDED_FILE`] has lines.
    added: BTreeSet<String>,
    /// The counter document held entries from before the split.
    legacy: bool,
}

/// The agents that have an inbox file.
fn agents_with_files(store: &Store) -> Result<Vec<String>> {
    let base = format!("{}/{}/", AGENT_DIR[0], AGENT_DIR[1]);
    let suffix = format!("/{INBOX_FILE}");
    Ok(store
        .files_below(AGENT_DIR, &[INBOX_FILE])?
        .into_iter()
        .filter_map(|f| {
            f.strip_prefix(&base)
                .and_then(|r| r.strip_suffix(&suffix))
                .filter(|n| !n.contains('/'))
                .map(str::to_string)
        })
        .collect())
}

fn decode_file(store: &Store, agent: &str, bytes: &[u8]) -> Result<AgentInbox> {
    let f = agent_file(agent, INBOX_FILE)?;
    let path = store.home().dir().join(f.rel());
    Ok(AgentInbox::decode(&path, agent, bytes)?)
}

/// An agent's inbox from its file and the lines added since (`added`: that file's bytes).
fn decode_both(
    store: &Store,
    agent: &str,
    bytes: &[u8],
    added: Option<&[u8]>,
) -> Result<AgentInbox> {
    let mut a = decode_file(store, agent, bytes)?;
    if let Some(lines) = added.filter(|b| !b.is_empty()) {
        let f = agent_file(agent, ADDED_FILE)?;
        a.add_lines(&store.home().dir().join(f.rel()), lines)?;
    }
    Ok(a)
}

fn merge(inbox: &mut Inbox, a: AgentInbox) {
    inbox.items.extend(a.items);
    inbox.mentions.extend(a.mentions);
}

fn keep_scope(inbox: &mut Inbox, agents: &Option<BTreeSet<String>>) {
    if let Some(set) = agents {
        inbox.items.retain(|_, i| set.contains(&i.agent));
        inbox.mentions.retain(|_, m| set.contains(&m.agent));
    }
}

/// Read the inbox of `scope` in a transaction holding the agents' lock. A home from before the
/// split is loaded whole (its first write migrates it).
pub fn read(tx: &mut Tx, store: &Store, scope: &Scope) -> Result<(Inbox, Loaded)> {
    let mut inbox: Inbox = tx.read()?;
    let legacy = !inbox.items.is_empty() || !inbox.mentions.is_empty();
    let agents: Option<BTreeSet<String>> = match (scope, legacy) {
        (Scope::All, _) | (_, true) => None,
        (Scope::Nobody, false) => Some(BTreeSet::new()),
        (Scope::Agents(a), false) => Some(a.iter().cloned().collect()),
    };
    let names: Vec<String> = match &agents {
        None => agents_with_files(store)?,
        Some(set) => set.iter().cloned().collect(),
    };
    let mut files = BTreeMap::new();
    let mut added = BTreeSet::new();
    for name in names {
        let f = agent_file(&name, INBOX_FILE)?;
        let bytes = tx.read_at(&f)?;
        if let Some(b) = &bytes {
            let lines = tx.read_at(&agent_file(&name, ADDED_FILE)?)?;
            if lines.as_ref().is_some_and(|l| !l.is_empty()) {
                added.insert(name.clone());
            }
            merge(&mut inbox, decode_both(store, &name, b, lines.as_deref())?);
        }
        files.insert(name, bytes);
    }
    Ok((
        inbox,
        Loaded {
            agents,
            files,
            added,
            legacy,
        },
    ))
}

/// Stage the inbox after an operation: the counter document (emptied of entries) and every
/// agent's file whose content changed; entries for agents not loaded are added to their files.
pub fn write(tx: &mut Tx, _store: &Store, inbox: &Inbox, loaded: &Loaded) -> Result<()> {
    let mut by_agent: BTreeMap<&str, AgentInbox> = BTreeMap::new();
    let entry = |by: &mut BTreeMap<&str, AgentInbox>, agent: &str| -> AgentInbox {
        by.remove(agent).unwrap_or_else(|| AgentInbox {
            version: VERSION.into(),
            agent: agent.to_string(),
            items: BTreeMap::new(),
            mentions: BTreeMap::new(),
        })
    };
    for i in inbox.items.values() {
        let mut a = entry(&mut by_agent, &i.agent);
        a.items.insert(i.id.clone(), i.clone());
        by_agent.insert(&i.agent, a);
    }
    for m in inbox.mentions.values() {
        let mut a = entry(&mut by_agent, &m.agent);
        a.mentions.insert(m.id.clone(), m.clone());
        by_agent.insert(&m.agent, a);
    }
    // Loaded agents whose inbox is now empty keep an empty file.
    for name in loaded.files.keys() {
        if !by_agent.contains_key(name.as_str()) {
            let a = entry(&mut by_agent, name);
            by_agent.insert(name, a);
        }
    }
    let loaded_agent = |n: &str| loaded.agents.as_ref().is_none_or(|s| s.contains(n));
    for (name, doc) in by_agent {
        let f = agent_file(name, INBOX_FILE)?;
        let before = match loaded.files.get(name) {
            Some(b) => b.clone(),
            None => None,
        };
        if !loaded_agent(name) && tx.exists_at(&f)? {
            // Not loaded: what the operation made is appended, the file is not even read.
            let lines: Vec<String> = doc
                .items
                .into_values()
                .map(|i| Added {
                    item: Some(i),
                    mention: None,
                })
                .chain(doc.mentions.into_values().map(|m| Added {
                    item: None,
                    mention: Some(m),
                }))
                .map(|a| serde_json::to_string(&a).expect("entries serialize"))
                .collect();
            if !lines.is_empty() {
                tx.append_capped(&agent_file(name, ADDED_FILE)?, &lines, ADDED_CAP)?;
            }
            continue;
        }
        let bytes = to_bytes(&doc);
        let empty_and_absent = before.is_none() && doc.items.is_empty() && doc.mentions.is_empty();
        let folded = loaded.added.contains(name);
        if (folded || before.as_deref() != Some(bytes.as_slice())) && !empty_and_absent {
            tx.write_at(&f, bytes)?;
            if folded {
                // The added lines are in the file now.
                tx.write_at(&agent_file(name, ADDED_FILE)?, Vec::new())?;
            }
        }
    }
    let mut counter = Inbox::empty(tx.now());
    counter.last_id = inbox.last_id;
    if loaded.legacy {
        tx.write(&counter)?;
    } else {
        tx.write_if_changed(&counter)?;
    }
    Ok(())
}

/// A snapshot of the inbox of `scope`, without locking (each file is replaced whole; files of
/// different agents may be from consecutive transactions).
pub fn snapshot(store: &Store, now: Timestamp, scope: &Scope) -> Result<Inbox> {
    let mut inbox: Inbox = store.read_doc(now)?;
    let agents: Option<BTreeSet<String>> = match scope {
        Scope::All => None,
        Scope::Nobody => Some(BTreeSet::new()),
        Scope::Agents(a) => Some(a.iter().cloned().collect()),
    };
    keep_scope(&mut inbox, &agents);
    let names: Vec<String> = match &agents {
        None => agents_with_files(store)?,
        Some(set) => set.iter().cloned().collect(),
    };
    for name in names {
        let (file, added) = (
            agent_file(&name, INBOX_FILE)?,
            agent_file(&name, ADDED_FILE)?,
        );
        let Some(mut b) = store.read_at(&file)? else {
            continue;
        };
        // The added lines go with the file they were read beside: a fold replaces both in one
        // commit, so when the file is the same after them, they belong together.
        let mut lines = None;
        for _ in 0..8 {
            lines = store.read_at(&added)?;
            if lines.is_none() {
                break;
            }
            match store.read_at(&file)? {
                Some(again) if again == b => break,
                Some(again) => b = again,
                None => break,
            }
        }
        merge(&mut inbox, decode_both(store, &name, &b, lines.as_deref())?);
    }
    Ok(inbox)
}

/// Run `f` on the agents and the inbox of `scope` under the agents' lock, and stage the
/// changes (the agents' document only when it changed).
pub fn transact<T>(
    store: &Store,
    now: Timestamp,
    scope: &Scope,
    mut f: impl FnMut(&mut Tx, &mut super::Agents, &mut Inbox) -> Result<T>,
) -> Result<T> {
    store.transaction(now, &[crate::store::Lock::Agents], |tx| {
        let mut agents: super::Agents = tx.read()?;
        let (mut inbox, loaded) = read(tx, store, scope)?;
        let v = f(tx, &mut agents, &mut inbox)?;
        tx.write_if_changed(&agents)?;
        write(tx, store, &inbox, &loaded)?;
        Ok(v)
    })
}
