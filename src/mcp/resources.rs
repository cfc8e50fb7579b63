//! The state agents read, as MCP resources: `conductor://status`, `conductor://inbox/{agent}`
//! and `conductor://workflow/{session}/snapshot`. A subscriber gets
//! `notifications/resources/updated` when the journal shows an event touching what it reads
//! and the content did change: one thread waits on the store's watcher (no polling), reads the
//! new events, and re-reads only the resources they concern.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{Resource, ResourceTemplate};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};

use super::tools::{Cancel, Tools};
use conductor::app::events::View;
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::store::event::Event;
use conductor::store::watch::Wake;
use conductor::time::Timestamp;

pub const STATUS: &str = "conductor://status";
const INBOX: &str = "conductor://inbox/";
const WORKFLOW: &str = "conductor://workflow/";
const SNAPSHOT: &str = "/snapshot";
const JSON: &str = "application/json";

/// What a URI names.
fn parse(uri: &str) -> Result<View> {
    let bad = || {
        Error::invalid(
            Reason::InvalidInput,
            format!(
                "unknown resource `{}` (known: {STATUS}, {INBOX}{{agent}}, {WORKFLOW}{{session}}{SNAPSHOT})",
                conductor::text::printable(uri)
            ),
        )
    };
    if uri == STATUS {
        return Ok(View::Status);
    }
    if let Some(a) = uri.strip_prefix(INBOX) {
        return match a {
            "" => Err(bad()),
            a if a.contains('/') => Err(bad()),
            a => Ok(View::Inbox(a.to_string())),
        };
    }
    if let Some(rest) = uri.strip_prefix(WORKFLOW)
        && let Some(s) = rest.strip_suffix(SNAPSHOT)
        && !s.is_empty()
        && !s.contains('/')
    {
        return Ok(View::Snapshot(s.to_string()));
    }
    Err(bad())
}

/// The templates for the per-agent and per-session resources.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(format!("{INBOX}{{agent}}"), "inbox")
            .with_description("An agent's actionable inbox items (mentions, DMs, tasks).")
            .with_mime_type(JSON),
        ResourceTemplate::new(
            format!("{WORKFLOW}{{session}}{SNAPSHOT}"),
            "workflow-snapshot",
        )
        .with_description(
            "A workflow session's snapshot (findings, files, pending tasks, values) and state.",
        )
        .with_mime_type(JSON),
    ]
}

/// Every resource there is now: status, each registered agent's inbox, each live workflow
/// session's snapshot.
pub fn list(tools: &Tools) -> Result<Vec<Resource>> {
    let store = tools.store()?;
    let now = Timestamp::now();
    let mut out = vec![
        Resource::new(STATUS, "status")
            .with_description(
                "Live sessions, their tasks and claims, conflicts; `you` is this session.",
            )
            .with_mime_type(JSON),
    ];
    let agents: conductor::agents::Agents = store.read_doc(now)?;
    for name in agents.agents.keys() {
        out.push(
            Resource::new(format!("{INBOX}{name}"), format!("inbox of {name}"))
                .with_mime_type(JSON),
        );
    }
    let sessions: conductor::workflows::Sessions = store.read_doc(now)?;
    for s in &sessions.sessions {
        out.push(
            Resource::new(
                format!("{WORKFLOW}{}{SNAPSHOT}", s.id),
                format!("snapshot of workflow {}", s.id),
            )
            .with_description(conductor::text::printable_max(&s.task, 200))
            .with_mime_type(JSON),
        );
    }
    Ok(out)
}

/// A resource's content (JSON text).
pub fn read(tools: &Tools, uri: &str) -> Result<String> {
    let answer = |name: &str, args: Value| -> Result<Value> {
        let a = tools.call(name, args, &Cancel::default());
        if a.error {
            let msg = a.json["message"].as_str().unwrap_or(&a.text).to_string();
            return Err(Error::invalid(Reason::InvalidInput, msg));
        }
        Ok(a.json)
    };
    let v = match parse(uri)? {
        View::Status => answer("status", json!({}))?,
        View::Inbox(agent) => answer("inbox", json!({"agent": agent}))?,
        View::Snapshot(id) => {
            let store = tools.store()?;
            let s = conductor::workflows::find_session(&store, Timestamp::now(), &id)?;
            json!({"session": s.id, "task": s.task, "status": s.status,
                   "current_state": s.current_state, "snapshot": s.snapshot})
        }
    };
    Ok(v.to_string())
}

/// The subscriptions of one client, and the thread that watches the journal for them.
#[derive(Default)]
pub struct Subscriptions {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// URI → what the subscriber last could have read.
    subs: BTreeMap<String, (View, String)>,
    peer: Option<Peer<RoleServer>>,
    watching: bool,
}

impl Subscriptions {
    /// Subscribe `uri`; the first subscription starts the journal watch.
    pub fn subscribe(
        self: &Arc<Self>,
        tools: &Arc<Tools>,
        uri: &str,
        peer: Peer<RoleServer>,
        rt: tokio::runtime::Handle,
    ) -> Result<()> {
        let res = parse(uri)?;
        // Watch before reading, so a change in between is not missed.
        let start = {
            let mut g = self.inner.lock().expect("not poisoned");
            g.peer = Some(peer);
            !std::mem::replace(&mut g.watching, true)
        };
        if start && let Err(e) = self.start(tools.clone(), rt) {
            self.inner.lock().expect("not poisoned").watching = false;
            return Err(e);
        }
        let text = read(tools, uri)?;
        self.inner
            .lock()
            .expect("not poisoned")
            .subs
            .insert(uri.to_string(), (res, text));
        Ok(())
    }

    pub fn unsubscribe(&self, uri: &str) {
        self.inner.lock().expect("not poisoned").subs.remove(uri);
    }

    fn start(self: &Arc<Self>, tools: Arc<Tools>, rt: tokio::runtime::Handle) -> Result<()> {
        let store = tools.store()?;
        let watcher = store.watcher(|n| n == conductor::store::journal::ACTIVE)?;
        let mut tail = store.tail(Some(store.last_event_seq()?))?;
        let me = Arc::clone(self);
        std::thread::spawn(move || {
            loop {
                if watcher.wait(None) == Wake::Stop {
                    return;
                }
                let mut events = Vec::new();
                // A journal we cannot follow (rotated past us): re-read every subscription.
                let lost = tail
                    .read(|e| {
                        events.push(e);
                        true
                    })
                    .is_err();
                if lost && let Ok(s) = tools.store() {
                    match s.last_event_seq().and_then(|q| s.tail(Some(q))) {
                        Ok(t) => tail = t,
                        Err(_) => continue,
                    }
                }
                me.check(&tools, &events, lost, &rt);
            }
        });
        Ok(())
    }

    /// Re-read the subscriptions `events` touch; notify those whose content changed.
    fn check(&self, tools: &Tools, events: &[Event], all: bool, rt: &tokio::runtime::Handle) {
        let due: Vec<(String, View)> = {
            let g = self.inner.lock().expect("not poisoned");
            g.subs
                .iter()
                .filter(|(_, (r, _))| all || events.iter().any(|e| r.touched_by(e)))
                .map(|(u, (r, _))| (u.clone(), r.clone()))
                .collect()
        };
        for (uri, _) in due {
            // A resource that went away (a finished session) reads as its error, once.
            let text =
                read(tools, &uri).unwrap_or_else(|e| json!({"error": e.to_string()}).to_string());
            let peer = {
                let mut g = self.inner.lock().expect("not poisoned");
                let Some((_, last)) = g.subs.get_mut(&uri) else {
                    continue;
                };
                if *last == text {
                    continue;
                }
                *last = text;
                g.peer.clone()
            };
            if let Some(peer) = peer {
                let uri = uri.clone();
                rt.spawn(async move {
                    let _ = peer
                        .notify_resource_updated(
                            rmcp::model::ResourceUpdatedNotificationParam::new(uri),
                        )
                        .await;
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse_and_bad_ones_are_refused() {
        assert_eq!(parse("conductor://status").unwrap(), View::Status);
        assert_eq!(
            parse("conductor://inbox/bob").unwrap(),
            View::Inbox("bob".into())
        );
        assert_eq!(
            parse("conductor://workflow/wf-1/snapshot").unwrap(),
            View::Snapshot("wf-1".into())
        );
        for bad in [
            "conductor://inbox/",
            "conductor://inbox/a/b",
            "conductor://workflow//snapshot",
            "conductor://workflow/x",
            "file:///etc/passwd",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
