//! `status --json` written straight from the state: the spec's status object borrowed from a
//! [`StatusReport`] (at 1,000 claims, building a JSON value of the whole state first cost
//! `status` a tenth of its time; issue 35).

use serde_json::json;

use super::status::{StatusReport, edit_watch_json};
use super::status_lines::landing_json;
use conductor::integrations::verdicts::Enforcement;
use conductor::protocol::ops::{LiveConflict, Summary};
use conductor::protocol::repositories;

/// The spec's status object borrowed from a [`StatusReport`], its keys in the order
/// [`StatusReport::to_json`] gives them, the optional ones left out when empty: serialized
/// straight to text, it gives the same bytes as that value.
#[derive(serde::Serialize)]
pub struct StatusJson<'a> {
    status: &'static str,
    instances: &'a [conductor::protocol::Instance],
    conflicts: &'a [LiveConflict],
    drift_warnings: &'a [conductor::protocol::DriftWarning],
    summary: &'a Summary,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    repositories: &'a [repositories::RepositoryClaims],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    state_warnings: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    landing: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    overlaps: &'a [conductor::protocol::overlaps::Report],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    unclaimed_edits: &'a [conductor::protocol::unclaimed::UnclaimedEdit],
    #[serde(skip_serializing_if = "Option::is_none")]
    edit_watch: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    enforcement: Option<serde_json::Value>,
}

impl StatusReport {
    pub fn as_json(&self) -> StatusJson<'_> {
        let mut v = StatusJson {
            status: "ok",
            instances: &self.state.instances,
            conflicts: &self.conflicts,
            drift_warnings: &self.state.drift_warnings,
            summary: &self.summary,
            repositories: &self.repositories,
            // What the next transaction repairs, then the side files that could not be read.
            state_warnings: self
                .warnings
                .iter()
                .chain(&self.unreadable)
                .map(String::as_str)
                .collect(),
            landing: None,
            overlaps: &self.overlaps,
            unclaimed_edits: &self.unclaimed,
            edit_watch: None,
            enforcement: None,
        };
        if !self.landing.is_empty() {
            v.landing = Some(landing_json(&self.landing));
        }
        // Turned off on purpose, the watcher is not news: the protocol's object stays as the
        // spec gives it (the text still says so). Running, or meant to run and not running, is.
        if let Some(w) = &self.edit_watch
            && !self.state.instances.is_empty()
            && (w.enabled || w.running.is_some())
        {
            v.edit_watch = Some(edit_watch_json(w));
        }
        if !self.enforcement.is_empty() {
            v.enforcement = Some(enforcement_json(&self.enforcement));
        }
        v
    }
}

/// Each session's enforcement: `{"state": ..., "detail": why it is unenforced, else null}`.
fn enforcement_json(
    enforcement: &std::collections::BTreeMap<String, Enforcement>,
) -> serde_json::Value {
    enforcement
        .iter()
        .map(|(id, e)| {
            let detail = match e {
                Enforcement::Unenforced(why) => json!(why),
                _ => serde_json::Value::Null,
            };
            (id.clone(), json!({"state": e.as_str(), "detail": detail}))
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::face::Report;
    use crate::face::status::{EditWatch, report};

    impl StatusReport {
        /// The status object as it was built before [`StatusJson`]: a JSON value, key by key.
        fn built_as_a_value(&self) -> serde_json::Value {
            let mut v = json!({"status": "ok", "instances": self.state.instances, "conflicts": self.conflicts,
               "drift_warnings": self.state.drift_warnings, "summary": self.summary});
            if !self.repositories.is_empty() {
                v["repositories"] = json!(self.repositories);
            }
            if !self.warnings.is_empty() {
                v["state_warnings"] = json!(self.warnings);
            }
            if !self.landing.is_empty() {
                v["landing"] = landing_json(&self.landing);
            }
            if !self.overlaps.is_empty() {
                v["overlaps"] = json!(self.overlaps);
            }
            if !self.unclaimed.is_empty() {
                v["unclaimed_edits"] = json!(self.unclaimed);
            }
            // Turned off on purpose, the watcher is not news: the protocol's object stays as the
            // spec gives it (the text still says so). Running, or meant to run and not running, is.
            if let Some(w) = &self.edit_watch
                && !self.state.instances.is_empty()
                && (w.enabled || w.running.is_some())
            {
                v["edit_watch"] = edit_watch_json(w);
            }
            if !self.enforcement.is_empty() {
                v["enforcement"] = enforcement_json(&self.enforcement);
            }
            v
        }
    }

    #[test]
    fn status_json_is_the_same_text_as_the_value_it_replaced() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/valid/status-1000-claims.json"
        );
        let state = conductor::protocol::codec::decode(
            std::path::Path::new(path),
            &std::fs::read(path).unwrap(),
        )
        .unwrap();
        let now = state.updated_at;
        let mut r = report(state, now, None);
        let plain = r.json_text();
        assert_eq!(plain, serde_json::to_string(&r.built_as_a_value()).unwrap());
        let first = r.state.instances[0].id.clone();
        r.warnings = vec!["a note".into()];
        r.enforcement
            .insert(first.clone(), Enforcement::Unenforced("no hooks".into()));
        r.enforcement
            .insert("zz-000001".into(), Enforcement::Enforced);
        r.landing = vec![
            serde_json::from_value(
                json!({"repo": "/r/.git", "worktree": "/r/wt/", "branch": "b",
                "base": "main", "merge_base": "abc", "instance_id": first, "project": "p",
                "task": "t", "priority": "P1", "since": now, "files": ["a.rs"]}),
            )
            .unwrap(),
        ];
        r.unclaimed = vec![
            serde_json::from_value(
                json!({"path": "/r/x.rs", "at": now, "sessions": [first], "count": 2}),
            )
            .unwrap(),
        ];
        r.edit_watch = Some(EditWatch {
            running: None,
            enabled: true,
        });
        let full = r.json_text();
        assert_eq!(full, serde_json::to_string(&r.built_as_a_value()).unwrap());
        assert_eq!(r.to_json(), r.built_as_a_value());
        for key in [
            "state_warnings",
            "enforcement",
            "landing",
            "unclaimed_edits",
            "edit_watch",
        ] {
            assert!(full.contains(&format!("\"{key}\":")), "{key}");
        }
    }
}
