//! `export` and `import`: everything a home or a store prefix holds, as one JSON bundle, so a
//! home moves into a shared store and back losing nothing.

use super::{LedgerFile, Store, atomic, corrupt, etcd, journal, ledger};
use crate::error::{Error, Result};

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
    /// Everything this home or store holds: the `documents` and `ledgers` named (what the
    /// domains keep; see `app::bundle`), and the journal.
    pub fn export(&self, documents: &[String], ledgers: &[LedgerFile]) -> Result<Bundle> {
        self.settle()?;
        // One consistent snapshot of a shared store, whatever is written meanwhile. (A file
        // home is exported as its files are; run it when nobody writes.)
        if let Some(r) = self.backend.etcd() {
            r.pin_snapshot()?;
        }
        let mut b = Bundle {
            conductor_export: 1,
            source: self.location(),
            ..Bundle::default()
        };
        for file in documents {
            if let Some(bytes) = self.read_doc_bytes(file)? {
                let text = String::from_utf8(bytes)
                    .map_err(|_| corrupt(&self.home.dir().join(file), "not UTF-8, so not JSON"))?;
                b.documents.insert(file.to_string(), text);
            }
        }
        for ledger in ledgers {
            let mut lines = Vec::new();
            self.read_ledger_file(*ledger, |_, line| {
                if let ledger::Line::Complete(t) = line {
                    lines.push(t);
                }
                Ok::<_, Error>(true)
            })?;
            if !lines.is_empty() {
                b.ledgers.insert(ledger.name.to_string(), lines);
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
        Ok(b)
    }

    /// The files named `names` that exist one level below the folder `dir` (`dir/<any>/<name>`,
    /// as the agents' run files `runtime/agents/<agent>/<file>`), as paths relative to the home.
    pub fn files_below(&self, dir: [&str; 2], names: &[&str]) -> Result<Vec<String>> {
        let base = format!("{}/{}/", dir[0], dir[1]);
        let mut out = Vec::new();
        match self.backend.etcd() {
            Some(r) => {
                let prefix = r.doc_key(&base);
                r.scan(&prefix, |kv| {
                    if let Some(rel) = kv.key.strip_prefix(&r.doc_key("")) {
                        out.push(rel.to_string());
                    }
                    Ok::<_, Error>(true)
                })?;
            }
            None => {
                let Ok(agents) = std::fs::read_dir(self.home.dir().join(&base)) else {
                    return Ok(out);
                };
                for a in agents.flatten() {
                    let name = a.file_name().to_string_lossy().into_owned();
                    for f in names {
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

    /// True when this home or store holds none of `documents`, no line of `ledgers` and no
    /// event.
    pub fn is_empty(&self, documents: &[&str], ledgers: &[LedgerFile]) -> Result<bool> {
        match self.backend.etcd() {
            Some(r) => Ok(r
                .range(&r.root(), &etcd::prefix_end(&r.root()), 1)?
                .0
                .is_empty()),
            None => Ok(documents
                .iter()
                .chain(ledgers.iter().map(|l| &l.name))
                .chain(&[journal::ACTIVE])
                .all(|f| !self.home.dir().join(f).exists())
                && journal::segments(self.home.dir())?.is_empty()),
        }
    }

    /// Write a bundle, already checked by the caller, into this home or store, which must hold
    /// none of `documents` and `ledgers` (nothing is ever replaced). Documents keep their exact
    /// bytes and events their numbers.
    pub fn import(&self, b: &Bundle, documents: &[&str], ledgers: &[LedgerFile]) -> Result<()> {
        let refuse = |why: String| Error::refused(crate::error::Refusal::TargetNotEmpty, why);
        match self.backend.etcd() {
            Some(r) => {
                if !self.is_empty(documents, ledgers)? {
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
                if !self.is_empty(documents, ledgers)? {
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
