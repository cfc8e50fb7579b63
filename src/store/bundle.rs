//! `export` and `import`: everything a home or a store prefix holds, as one JSON bundle, so a
//! home moves into a shared store and back losing nothing.

use std::path::Path;

use super::{Document, LedgerFile, Lock, Store, atomic, corrupt, etcd, journal, ledger};
use crate::error::{Error, Result};
use crate::protocol::State;
use crate::time::Timestamp;

/// Every document file a home may hold, in every domain (what `export` carries).
pub const DOCUMENT_FILES: &[&str] = &[
    "status.json",
    "runtime-agents.json",
    "runtime-inbox.json",
    "runtime-channels.json",
    "workflows.json",
    "queue.json",
];

/// Every ledger file a home may hold, in every domain.
pub const LEDGER_FILES: &[&str] = &[
    "history.jsonl",
    "conflicts.log",
    "runtime-messages.jsonl",
    "runtime-inbox.jsonl",
    "runtime-mentions.jsonl",
    "runtime-conflicts.log",
    "workflows-finished.jsonl",
    "queue-finished.jsonl",
];

/// Everything a home (or a store prefix) holds, as `export` writes it and `import` reads it:
/// documents as their exact bytes, ledgers and the journal as their lines.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Bundle {
    pub conductor_export: u32,
    pub source: String,
    pub documents: indexmap::IndexMap<String, String>,
    pub ledgers: indexmap::IndexMap<String, Vec<String>>,
    pub events: Vec<String>,
}

impl Store {
    /// Everything this home or store holds.
    pub fn export(&self, now: Timestamp) -> Result<Bundle> {
        self.settle()?;
        // One consistent snapshot of a shared store, whatever is written meanwhile. (A file
        // home is exported as its files are; run it when nobody writes.)
        if let Some(r) = &self.remote {
            r.pin_snapshot()?;
        }
        let mut b = Bundle {
            conductor_export: 1,
            source: self.location(),
            ..Bundle::default()
        };
        let mut files: Vec<String> = DOCUMENT_FILES.iter().map(|f| f.to_string()).collect();
        files.extend(self.agent_run_files()?);
        for file in &files {
            if let Some(bytes) = self.read_doc_bytes(file)? {
                let text = String::from_utf8(bytes)
                    .map_err(|_| corrupt(&self.home.dir().join(file), "not UTF-8, so not JSON"))?;
                b.documents.insert(file.to_string(), text);
            }
        }
        for name in LEDGER_FILES {
            let ledger = LedgerFile {
                name,
                lock: Lock::Status,
            };
            let mut lines = Vec::new();
            self.read_ledger_file(ledger, |_, line| {
                if let ledger::Line::Complete(t) = line {
                    lines.push(t);
                }
                Ok(true)
            })?;
            if !lines.is_empty() {
                b.ledgers.insert(name.to_string(), lines);
            }
        }
        let start = self.oldest_event()?.map(|o| o - 1).unwrap_or(0);
        let mut tail = self.tail(Some(start))?;
        let mut events = Vec::new();
        tail.read(|e| {
            events.push(serde_json::to_string(&e).expect("events serialize"));
            true
        })?;
        b.events = events;
        let _ = now;
        Ok(b)
    }

    /// The runtime's per-agent run files that exist (`runtime/agents/<name>/<file>`).
    pub fn agent_run_files(&self) -> Result<Vec<String>> {
        let base = format!(
            "{}/{}/",
            crate::canopy::AGENT_DIR[0],
            crate::canopy::AGENT_DIR[1]
        );
        let mut out = Vec::new();
        match &self.remote {
            Some(r) => {
                let prefix = r.doc_key(&base);
                r.scan(&prefix, |kv| {
                    if let Some(rel) = kv.key.strip_prefix(&r.doc_key("")) {
                        out.push(rel.to_string());
                    }
                    Ok(true)
                })?;
            }
            None => {
                let Ok(agents) = std::fs::read_dir(self.home.dir().join(&base)) else {
                    return Ok(out);
                };
                for a in agents.flatten() {
                    let name = a.file_name().to_string_lossy().into_owned();
                    for f in [crate::canopy::RUN_STATUS_FILE, crate::canopy::ACTIONS_FILE] {
                        if a.path().join(f).is_file() {
                            out.push(format!("{base}{name}/{f}"));
                        }
                    }
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// True when this home or store holds no document, ledger line or event.
    pub fn is_empty(&self) -> Result<bool> {
        match &self.remote {
            Some(r) => Ok(r
                .range(&r.root(), &etcd::prefix_end(&r.root()), 1)?
                .0
                .is_empty()),
            None => Ok(DOCUMENT_FILES
                .iter()
                .chain(LEDGER_FILES)
                .chain(&[journal::ACTIVE])
                .all(|f| !self.home.dir().join(f).exists())
                && journal::segments(self.home.dir())?.is_empty()),
        }
    }

    /// Write a bundle into this home or store, which must be empty (nothing is ever replaced).
    /// Documents keep their exact bytes and events their numbers.
    pub fn import(&self, b: &Bundle) -> Result<()> {
        let refuse = |why: String| Error::invalid("target_not_empty", why);
        check_bundle(self.home.dir(), b)?;
        match &self.remote {
            Some(r) => {
                if !self.is_empty()? {
                    return Err(refuse(format!(
                        "{} already holds state; import only into an empty prefix (nothing is replaced)",
                        r.url()
                    )));
                }
                // First, in one transaction that only succeeds while the prefix has no
                // numbering record: the documents and the numbering record with the bundle's
                // last numbers, so a writer starting meanwhile reads the imported state and
                // numbers its lines and events after the imported ones.
                let lines: u64 = b.ledgers.values().map(|l| l.len() as u64).sum();
                let last_event = b
                    .events
                    .last()
                    .and_then(|e| serde_json::from_str::<serde_json::Value>(e).ok())
                    .and_then(|v| v["seq"].as_u64())
                    .unwrap_or(0);
                let mut first: Vec<(String, Vec<u8>)> = b
                    .documents
                    .iter()
                    .map(|(file, text)| (r.doc_key(file), text.clone().into_bytes()))
                    .collect();
                first.push((
                    r.meta_key(),
                    serde_json::json!({"event": last_event, "line": lines})
                        .to_string()
                        .into_bytes(),
                ));
                if !r.txn(&[(r.meta_key(), 0)], &first, &[])? {
                    return Err(refuse(format!(
                        "{} started being used during the import; nothing of the ledgers was imported",
                        r.url()
                    )));
                }
                // Then the ledgers and the journal, each key only if it does not exist yet, in
                // batches under etcd's limits (128 operations, 1.5 MiB per request).
                let mut puts: Vec<(String, Vec<u8>)> = Vec::new();
                let mut line = 0u64;
                for (name, ls) in &b.ledgers {
                    for l in ls {
                        line += 1;
                        puts.push((r.ledger_key(name, line), l.clone().into_bytes()));
                    }
                }
                for e in &b.events {
                    let seq = serde_json::from_str::<serde_json::Value>(e)
                        .ok()
                        .and_then(|v| v["seq"].as_u64())
                        .unwrap_or(0);
                    puts.push((r.journal_key(seq), e.clone().into_bytes()));
                }
                let mut batch: Vec<(String, Vec<u8>)> = Vec::new();
                let mut size = 0;
                let flush = |batch: &mut Vec<(String, Vec<u8>)>| -> Result<()> {
                    let absent: Vec<(String, i64)> =
                        batch.iter().map(|(k, _)| (k.clone(), 0)).collect();
                    if !batch.is_empty() && !r.txn(&absent, batch, &[])? {
                        return Err(refuse(format!(
                            "{} was written to during the import (a key it was importing exists)",
                            r.url()
                        )));
                    }
                    batch.clear();
                    Ok(())
                };
                for p in puts {
                    size += p.0.len() + p.1.len();
                    batch.push(p);
                    if batch.len() >= 60 || size > 512 * 1024 {
                        flush(&mut batch)?;
                        size = 0;
                    }
                }
                flush(&mut batch)?;
                Ok(())
            }
            None => {
                let _locks = self.lock_all()?;
                if !self.is_empty()? {
                    return Err(refuse(format!(
                        "{} already holds state; import only into an empty home (nothing is replaced)",
                        self.home.dir().display()
                    )));
                }
                let join = |lines: &[String]| {
                    let mut s = lines.join("\n");
                    s.push('\n');
                    s
                };
                for (name, lines) in b.ledgers.iter().filter(|(_, l)| !l.is_empty()) {
                    atomic::write_atomic(&self.home.dir().join(name), join(lines).as_bytes())?;
                }
                if !b.events.is_empty() {
                    atomic::write_atomic(
                        &self.home.dir().join(journal::ACTIVE),
                        join(&b.events).as_bytes(),
                    )?;
                }
                // Documents last: a home with status.json is a home in use.
                for (file, text) in &b.documents {
                    let path = self.home.dir().join(file);
                    if let Some(parent) = path.parent() {
                        atomic::create_private_dirs(parent)?;
                    }
                    atomic::write_atomic(&path, text.as_bytes())?;
                }
                Ok(())
            }
        }
    }
}

/// Refuse a bundle with a document or ledger conductor does not know, a document that does not
/// decode, or a line that is not one line: an import never writes what conductor could not read.
fn check_bundle(dir: &Path, b: &Bundle) -> Result<()> {
    fn check<D: Document>(dir: &Path, text: &str) -> Result<()> {
        D::decode(&dir.join(D::FILE), text.as_bytes())
            .map(|_| ())
            .map_err(|e| {
                let detail = match e {
                    Error::CorruptState { detail, .. } => detail,
                    other => other.to_string(),
                };
                Error::invalid(
                    "invalid_input",
                    format!(
                        "the bundle's {} is not valid conductor state: {detail}",
                        D::FILE
                    ),
                )
            })
    }
    if b.conductor_export != 1 {
        return Err(Error::invalid(
            "invalid_input",
            format!(
                "not a conductor export (version {}; this build reads 1)",
                b.conductor_export
            ),
        ));
    }
    for (file, text) in &b.documents {
        match file.as_str() {
            "status.json" => check::<State>(dir, text)?,
            "runtime-agents.json" => check::<crate::canopy::Agents>(dir, text)?,
            "runtime-inbox.json" => check::<crate::canopy::Inbox>(dir, text)?,
            "runtime-channels.json" => check::<crate::canopy::Channels>(dir, text)?,
            "workflows.json" => check::<crate::workflows::Sessions>(dir, text)?,
            "queue.json" => check::<crate::queue::QueueDoc>(dir, text)?,
            // An agent's run files: a safe path (checked like the runtime checks it).
            other if agent_run_file(other) => {}
            other => {
                return Err(Error::invalid(
                    "invalid_input",
                    format!(
                        "the bundle holds an unknown document `{}`",
                        crate::text::printable(other)
                    ),
                ));
            }
        }
    }
    for (name, lines) in &b.ledgers {
        if !LEDGER_FILES.contains(&name.as_str()) {
            return Err(Error::invalid(
                "invalid_input",
                format!(
                    "the bundle holds an unknown ledger `{}`",
                    crate::text::printable(name)
                ),
            ));
        }
        if lines.iter().any(|l| l.contains('\n')) {
            return Err(Error::invalid(
                "invalid_input",
                format!("a line of {name} spans several lines"),
            ));
        }
    }
    let mut last = 0;
    for e in &b.events {
        let seq = serde_json::from_str::<crate::store::event::Event>(e)
            .map_err(|err| {
                Error::invalid(
                    "invalid_input",
                    format!("an event in the bundle is not an event: {err}"),
                )
            })?
            .seq;
        if seq <= last {
            return Err(Error::invalid(
                "invalid_input",
                "the bundle's events are not in seq order",
            ));
        }
        last = seq;
    }
    Ok(())
}

/// True for `runtime/agents/<name>/run-status.json` or `.../actions.jsonl` with a safe name.
fn agent_run_file(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    match parts.as_slice() {
        [a, b, name, f] => {
            [*a, *b] == crate::canopy::AGENT_DIR
                && [crate::canopy::RUN_STATUS_FILE, crate::canopy::ACTIONS_FILE].contains(f)
                && crate::canopy::agent_file(name, f).is_ok()
        }
        _ => false,
    }
}
