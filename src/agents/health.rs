//! Runtime facts, modes, health, redaction and the Prometheus exposition. Pure.

use serde::Serialize;
use serde_json::{Map, Value};

use super::{Agent, BUCKETS_MS, Histogram, Inbox, RunStatus};

/// CanopyKit's thresholds.
pub const RELAY_BLIND_WINDOW_S: f64 = 30.0;
pub const RELAY_MAX_PENDING: u64 = 5;
pub const RELAY_MAX_UNACKED: u64 = 10;
pub const SUPPORT_BLIND_WINDOW_S: f64 = 300.0;
pub const SUPPORT_MAX_BACKLOG: u64 = 25;

/// What a mode and health are computed from.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    pub running: bool,
    pub wake_source: String,
    pub poll_interval_seconds: f64,
    /// The longest time an event can wait before the agent notices it (`None`: unbounded, no
    /// run loop).
    pub blind_window_seconds: Option<f64>,
    pub feed: &'static str,
    pub pending_inbox: u64,
    pub unacked_mentions: u64,
    pub consecutive_errors: u32,
    pub event_to_claim_p95_ms: Option<u64>,
}

/// The backlog of one agent.
pub fn backlog(inbox: &Inbox, agent: &str) -> (u64, u64) {
    let pending = inbox.items.values().filter(|i| i.agent == agent).count() as u64;
    let unacked = inbox.mentions.values().filter(|m| m.agent == agent).count() as u64;
    (pending, unacked)
}

/// The snapshot of an agent, with its run loop's status (`run-status.json`). `alive` says
/// whether that run loop's process still exists.
pub fn snapshot(agent: &Agent, run: Option<&RunStatus>, inbox: &Inbox, alive: bool) -> Snapshot {
    let (pending, unacked) = backlog(inbox, &agent.name);
    let running = alive && run.is_some_and(|r| r.status == "running");
    let (wake_source, poll) = match run {
        Some(r) if running => (r.wake_source.clone(), r.poll_interval_seconds),
        _ => ("none".to_string(), 0.0),
    };
    Snapshot {
        running,
        blind_window_seconds: running.then_some(poll),
        wake_source,
        poll_interval_seconds: poll,
        feed: "agent_scoped",
        pending_inbox: pending,
        unacked_mentions: unacked,
        consecutive_errors: run.map_or(0, |r| r.consecutive_errors),
        event_to_claim_p95_ms: agent.metrics.event_to_claim.percentile(95.0),
    }
}

/// The mode and why: `relay_grade`, `support` or `background` (CanopyKit's thresholds).
pub fn mode(s: &Snapshot) -> (&'static str, Vec<String>) {
    let mut reasons = Vec::new();
    let Some(blind) = s.blind_window_seconds else {
        return (
            "background",
            vec!["no run loop is running: the blind window is unbounded".into()],
        );
    };
    let backlog = s.pending_inbox + s.unacked_mentions;
    let relay = blind <= RELAY_BLIND_WINDOW_S
        && s.pending_inbox <= RELAY_MAX_PENDING
        && s.unacked_mentions <= RELAY_MAX_UNACKED
        && s.feed == "agent_scoped";
    if relay {
        reasons.push(format!(
            "{} wake path, blind window {blind:.2} s <= {RELAY_BLIND_WINDOW_S} s, pending {} <= {RELAY_MAX_PENDING}, unacked {} <= {RELAY_MAX_UNACKED}, agent-scoped feed",
            s.wake_source, s.pending_inbox, s.unacked_mentions
        ));
        return ("relay_grade", reasons);
    }
    if blind > RELAY_BLIND_WINDOW_S {
        reasons.push(format!(
            "blind window {blind:.2} s > {RELAY_BLIND_WINDOW_S} s"
        ));
    }
    if s.pending_inbox > RELAY_MAX_PENDING {
        reasons.push(format!("pending {} > {RELAY_MAX_PENDING}", s.pending_inbox));
    }
    if s.unacked_mentions > RELAY_MAX_UNACKED {
        reasons.push(format!(
            "unacked {} > {RELAY_MAX_UNACKED}",
            s.unacked_mentions
        ));
    }
    if blind <= SUPPORT_BLIND_WINDOW_S && backlog <= SUPPORT_MAX_BACKLOG {
        return ("support", reasons);
    }
    if backlog > SUPPORT_MAX_BACKLOG {
        reasons.push(format!("backlog {backlog} > {SUPPORT_MAX_BACKLOG}"));
    }
    ("background", reasons)
}

/// Health and its issues: `healthy`, `degraded`, `recovering`, `unhealthy`.
pub fn health(s: &Snapshot) -> (&'static str, Vec<String>) {
    let backlog = s.pending_inbox + s.unacked_mentions;
    let mut issues = Vec::new();
    if backlog > SUPPORT_MAX_BACKLOG {
        issues.push(format!(
            "backlog {backlog} is over the ceiling {SUPPORT_MAX_BACKLOG}"
        ));
    }
    if s.consecutive_errors >= 5 {
        issues.push(format!("{} errors in a row", s.consecutive_errors));
    }
    if !s.running && s.pending_inbox > 0 {
        issues.push(format!(
            "{} items wait and no run loop is running",
            s.pending_inbox
        ));
    }
    if !issues.is_empty() {
        return ("unhealthy", issues);
    }
    if s.consecutive_errors > 0 {
        return (
            "recovering",
            vec![format!(
                "{} recent errors; the loop is backing off and retrying",
                s.consecutive_errors
            )],
        );
    }
    if s.pending_inbox > RELAY_MAX_PENDING {
        issues.push(format!(
            "pending {} is approaching the ceiling",
            s.pending_inbox
        ));
    }
    if s.unacked_mentions > RELAY_MAX_UNACKED {
        issues.push(format!("{} unacknowledged mentions", s.unacked_mentions));
    }
    if let Some(p) = s.event_to_claim_p95_ms.filter(|p| *p > 5_000) {
        issues.push(format!("event_to_claim p95 is {p} ms"));
    }
    if issues.is_empty() {
        ("healthy", issues)
    } else {
        ("degraded", issues)
    }
}

// ---------------------------------------------------------------------------------------------
// Redaction

/// True for a key whose value is a secret: words like secret, password, authorization, cookie,
/// credential, `api`+`key` (X-API-Key, api_key, apikey) or a `token` word on its own
/// (access_token, token), but not counts like `max_tokens`.
pub fn secret_key(key: &str) -> bool {
    let words: Vec<String> = key
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let has = |w: &str| words.iter().any(|x| x == w);
    has("secret")
        || has("password")
        || has("passwd")
        || has("authorization")
        || has("cookie")
        || has("credential")
        || has("credentials")
        || has("apikey")
        || has("token")
        || has("bearer")
        || (has("api") && has("key"))
        || (has("private") && has("key"))
}

/// Redact secrets in a value: values under secret keys, and `Header: value` / `Bearer x`
/// inside strings.
pub fn redact(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                if secret_key(k) && !v.is_null() {
                    out.insert(k.clone(), Value::String("[redacted]".into()));
                } else {
                    out.insert(k.clone(), redact(v));
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(redact).collect()),
        Value::String(s) => Value::String(redact_text(s)),
        other => other.clone(),
    }
}

/// Redact `Name: value` and `Name=value` pairs whose name is a secret key, and bearer tokens,
/// in free text.
pub fn redact_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut redact_next = false;
    for (i, tok) in s.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if redact_next && !tok.is_empty() {
            if tok.eq_ignore_ascii_case("bearer") || tok.eq_ignore_ascii_case("basic") {
                out.push_str(tok);
            } else {
                out.push_str("[redacted]");
                redact_next = false;
            }
            continue;
        }
        if let Some((k, v)) = tok.split_once(['=', ':'])
            && secret_key(k)
            && !k.is_empty()
        {
            let sep = &tok[k.len()..k.len() + 1];
            if v.is_empty() {
                out.push_str(tok);
                redact_next = true;
            } else {
                out.push_str(&format!("{k}{sep}[redacted]"));
            }
            continue;
        }
        if tok.eq_ignore_ascii_case("bearer") {
            redact_next = true;
        }
        out.push_str(tok);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Prometheus

fn histogram(out: &mut String, agent: &str, name: &str, h: &Histogram) {
    let mut cum = 0;
    for (i, le) in BUCKETS_MS.iter().enumerate() {
        cum += h.buckets.get(i).copied().unwrap_or(0);
        out.push_str(&format!(
            "{name}_bucket{{agent=\"{agent}\",le=\"{}\"}} {cum}\n",
            *le as f64 / 1000.0
        ));
    }
    out.push_str(&format!(
        "{name}_bucket{{agent=\"{agent}\",le=\"+Inf\"}} {}\n",
        h.count
    ));
    out.push_str(&format!(
        "{name}_sum{{agent=\"{agent}\"}} {}\n",
        h.sum_ms as f64 / 1000.0
    ));
    out.push_str(&format!("{name}_count{{agent=\"{agent}\"}} {}\n", h.count));
}

/// The Prometheus text exposition of every agent's metrics.
pub fn prometheus(agents: &[&Agent], inbox: &Inbox) -> String {
    let mut out = String::new();
    type Hist = fn(&Agent) -> &Histogram;
    let hists: [(&str, &str, Hist); 3] = [
        (
            "conductor_event_to_seen_seconds",
            "Time from an inbox item's creation to its agent seeing it.",
            |a| &a.metrics.event_to_seen,
        ),
        (
            "conductor_event_to_claim_seconds",
            "Time from an inbox item's creation to its claim.",
            |a| &a.metrics.event_to_claim,
        ),
        (
            "conductor_claim_to_complete_seconds",
            "Time from a claim to the item's completion.",
            |a| &a.metrics.claim_to_complete,
        ),
    ];
    for (name, help, get) in hists {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} histogram\n"));
        for a in agents {
            histogram(&mut out, &a.name, name, get(a));
        }
    }
    type Num = fn(&Agent, &Inbox) -> u64;
    let scalars: [(&str, &str, &str, Num); 5] = [
        (
            "conductor_pending_inbox",
            "gauge",
            "Actionable inbox items (pending or seen).",
            |a, i| backlog(i, &a.name).0,
        ),
        (
            "conductor_unacked_mentions",
            "gauge",
            "Mentions not yet acknowledged.",
            |a, i| backlog(i, &a.name).1,
        ),
        (
            "conductor_timeout_recoveries_total",
            "counter",
            "Expired claims taken over.",
            |a, _| a.metrics.timeout_recoveries,
        ),
        (
            "conductor_items_completed_total",
            "counter",
            "Inbox items completed with a reference.",
            |a, _| a.metrics.completed,
        ),
        (
            "conductor_run_errors_total",
            "counter",
            "Run loop errors (failed children, invalid artifacts, timeouts).",
            |a, _| a.metrics.errors,
        ),
    ];
    for (name, kind, help, get) in scalars {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        for a in agents {
            out.push_str(&format!(
                "{name}{{agent=\"{}\"}} {}\n",
                a.name,
                get(a, inbox)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redaction_catches_header_names_but_not_token_counts() {
        let v = redact(
            &json!({"X-API-Key": "k1", "api_key": "k2", "Authorization": "Bearer abc",
            "max_tokens": 512, "tokens": 3, "nested": [{"password": "p"}],
            "cmd": "curl -H X-API-Key: s3cret -H Authorization: Bearer xyz"}),
        );
        assert_eq!(v["X-API-Key"], "[redacted]");
        assert_eq!(v["api_key"], "[redacted]");
        assert_eq!(v["Authorization"], "[redacted]");
        assert_eq!(v["max_tokens"], 512);
        assert_eq!(v["tokens"], 3);
        assert_eq!(v["nested"][0]["password"], "[redacted]");
        let cmd = v["cmd"].as_str().unwrap();
        assert!(!cmd.contains("s3cret") && !cmd.contains("xyz"), "{cmd}");
    }

    fn snap(blind: Option<f64>, pending: u64, unacked: u64) -> Snapshot {
        Snapshot {
            running: blind.is_some(),
            wake_source: "watcher".into(),
            poll_interval_seconds: 0.0,
            blind_window_seconds: blind,
            feed: "agent_scoped",
            pending_inbox: pending,
            unacked_mentions: unacked,
            consecutive_errors: 0,
            event_to_claim_p95_ms: Some(12),
        }
    }

    #[test]
    fn modes_follow_canopykits_thresholds() {
        assert_eq!(mode(&snap(Some(0.0), 0, 0)).0, "relay_grade");
        assert_eq!(mode(&snap(Some(0.0), 6, 0)).0, "support");
        assert_eq!(mode(&snap(Some(31.0), 0, 0)).0, "support");
        assert_eq!(mode(&snap(Some(301.0), 0, 0)).0, "background");
        assert_eq!(mode(&snap(Some(0.0), 20, 6)).0, "background");
        assert_eq!(mode(&snap(None, 0, 0)).0, "background");
        assert_eq!(health(&snap(Some(0.0), 0, 0)).0, "healthy");
        assert_eq!(health(&snap(Some(0.0), 6, 0)).0, "degraded");
        assert_eq!(health(&snap(None, 1, 0)).0, "unhealthy");
        let mut s = snap(Some(0.0), 0, 0);
        s.consecutive_errors = 2;
        assert_eq!(health(&s).0, "recovering");
    }
}
