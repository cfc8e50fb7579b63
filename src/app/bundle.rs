//! `export` and `import` over every domain: the store moves the bytes (`store::Bundle`), this
//! module says which documents and ledgers there are and refuses a bundle that conductor could
//! not read back.

use std::path::Path;

use super::{DOCUMENTS, LEDGERS, document_names};
use crate::error::Reason;
use crate::error::{Error, Result};
use crate::store::{Bundle, Store};

/// Everything this home or store holds.
pub fn export(store: &Store) -> Result<Bundle> {
    let mut files: Vec<String> = document_names().iter().map(|f| f.to_string()).collect();
    files.extend(agent_run_files(store)?);
    let mut b = store.export(&files, LEDGERS)?;
    // `queue.json` with the dispatcher's change log folded in (see `queue::changes`).
    use crate::store::Document;
    let file = <crate::queue::QueueDoc as Document>::FILE;
    if let Some(text) = b.documents.get_mut(file) {
        let doc = <crate::queue::QueueDoc as Document>::decode(
            &store.home().dir().join(file),
            text.as_bytes(),
        )?;
        *text = String::from_utf8(doc.encode()).expect("JSON is UTF-8");
    }
    // `status.json` whole, also where a shared store keeps it in pages (issue 36 §2).
    let file = <crate::protocol::State as Document>::FILE;
    match store.read_doc_text::<crate::protocol::State>(crate::time::Timestamp::now())? {
        Some(bytes) => {
            b.documents.insert(
                file.to_string(),
                String::from_utf8(bytes).expect("JSON is UTF-8"),
            );
        }
        None => {
            b.documents.shift_remove(file);
        }
    }
    Ok(b)
}

/// The agents' per-agent run files that exist (`runtime/agents/<name>/<file>`).
pub fn agent_run_files(store: &Store) -> Result<Vec<String>> {
    crate::agents::checks::run_file_names(store)
}

/// Write a bundle into this home or store, which must be empty (nothing is ever replaced),
/// after checking every document and line of it.
pub fn import(store: &Store, b: &Bundle) -> Result<()> {
    check_bundle(store.home().dir(), b)?;
    use crate::store::Document;
    type State = crate::protocol::State;
    let file = <State as Document>::FILE;
    // A shared store keeps `status.json` in pages: written apart, in as many requests as it
    // takes (whole, 20,000 claims are more than etcd takes in one).
    let paged = match b.documents.get(file) {
        Some(text) if !store.state_in_files() => Some(<State as Document>::decode(
            &store.home().dir().join(file),
            text.as_bytes(),
        )?),
        _ => None,
    };
    match paged {
        Some(state) => {
            let mut rest = Bundle {
                conductor_export: b.conductor_export,
                source: b.source.clone(),
                documents: b.documents.clone(),
                ledgers: b.ledgers.clone(),
                events: b.events.clone(),
            };
            rest.documents.shift_remove(file);
            // The rest first (it refuses a prefix that holds anything), then the state (it
            // refuses one that holds a state).
            store.import(&rest, &document_names(), LEDGERS)?;
            store.import_paged(&state, crate::time::Timestamp::now())?;
        }
        None => store.import(b, &document_names(), LEDGERS)?,
    }
    Ok(())
}

/// Refuse a bundle with a document or ledger conductor does not know, a document that does not
/// decode, or a line that is not one line: an import never writes what conductor could not read.
fn check_bundle(dir: &Path, b: &Bundle) -> Result<()> {
    let check = |check: super::Check, file: &str, text: &str| {
        check(dir, text).map_err(|e| {
            let detail = match e {
                Error::Store(crate::store::Error::CorruptState { detail, .. }) => detail,
                other => other.to_string(),
            };
            Error::invalid(
                Reason::InvalidInput,
                format!("the bundle's {file} is not valid conductor state: {detail}"),
            )
        })
    };
    if b.conductor_export != 1 {
        return Err(Error::invalid(
            Reason::InvalidInput,
            format!(
                "not a conductor export (version {}; this build reads 1)",
                b.conductor_export
            ),
        ));
    }
    for (file, text) in &b.documents {
        if let Some((known, c)) = DOCUMENTS.iter().find(|(f, _)| f == file) {
            check(*c, known, text)?;
            continue;
        }
        match file.as_str() {
            // An agent's inbox: decoded like the runtime decodes it.
            other if agent_run_file(other) && other.ends_with(INBOX_SUFFIX) => {
                let agent = other.split('/').nth(2).unwrap_or_default();
                crate::agents::inbox_files::AgentInbox::decode(
                    &dir.join(other),
                    agent,
                    text.as_bytes(),
                )
                .map_err(|e| {
                    Error::invalid(
                        Reason::InvalidInput,
                        format!("the bundle's {other} is not valid conductor state: {e}"),
                    )
                })?;
            }
            // An agent's run files: a safe path (checked like the runtime checks it).
            other if agent_run_file(other) => {}
            other => {
                return Err(Error::invalid(
                    Reason::InvalidInput,
                    format!(
                        "the bundle holds an unknown document `{}`",
                        crate::text::printable(other)
                    ),
                ));
            }
        }
    }
    for (name, lines) in &b.ledgers {
        if !LEDGERS.iter().any(|l| l.name == name) {
            return Err(Error::invalid(
                Reason::InvalidInput,
                format!(
                    "the bundle holds an unknown ledger `{}`",
                    crate::text::printable(name)
                ),
            ));
        }
        if lines.iter().any(|l| l.contains('\n')) {
            return Err(Error::invalid(
                Reason::InvalidInput,
                format!("a line of {name} spans several lines"),
            ));
        }
    }
    let mut last = 0;
    for e in &b.events {
        let seq = serde_json::from_str::<crate::store::event::Event>(e)
            .map_err(|err| {
                Error::invalid(
                    Reason::InvalidInput,
                    format!("an event in the bundle is not an event: {err}"),
                )
            })?
            .seq;
        if seq <= last {
            return Err(Error::invalid(
                Reason::InvalidInput,
                "the bundle's events are not in seq order",
            ));
        }
        last = seq;
    }
    Ok(())
}

/// `/inbox.json`: the end of an agent's inbox file's path.
const INBOX_SUFFIX: &str = "/inbox.json";

/// True for `runtime/agents/<name>/run-status.json`, `.../actions.jsonl` or `.../inbox.json`
/// with a safe name.
fn agent_run_file(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    match parts.as_slice() {
        [a, b, name, f] => {
            [*a, *b] == crate::agents::AGENT_DIR
                && [
                    crate::agents::RUN_STATUS_FILE,
                    crate::agents::ACTIONS_FILE,
                    crate::agents::inbox_files::INBOX_FILE,
                    crate::agents::inbox_files::ADDED_FILE,
                ]
                .contains(f)
                && crate::agents::agent_file(name, f).is_ok()
        }
        _ => false,
    }
}
