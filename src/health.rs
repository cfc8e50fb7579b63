//! What every domain reports about its own health: one [`Finding`] per file or invariant looked
//! at. A floor below the domains, so that each can answer `doctor` without importing another
//! (`doctor` only gathers and renders them).

use serde::Serialize;

/// What a check found about one file (or one invariant).
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub file: String,
    pub ok: bool,
    /// What is wrong, or a short health note when `ok`.
    pub detail: String,
    /// What `--repair` did (or would do).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair: Option<String>,
}

impl Finding {
    /// A healthy file, with a short note.
    pub fn good(file: impl Into<String>, detail: impl Into<String>) -> Finding {
        Finding {
            file: file.into(),
            ok: true,
            detail: detail.into(),
            repair: None,
        }
    }

    /// A problem, and what fixes it.
    pub fn bad(
        file: impl Into<String>,
        detail: impl Into<String>,
        repair: impl Into<String>,
    ) -> Finding {
        Finding {
            file: file.into(),
            ok: false,
            detail: detail.into(),
            repair: Some(repair.into()),
        }
    }
}

/// A check's result as a finding: `ok` as the note when it passed, else the error and `fix`.
pub fn finding(file: String, r: std::result::Result<(), String>, ok: &str, fix: &str) -> Finding {
    match r {
        Ok(()) => Finding::good(file, ok),
        Err(detail) => Finding::bad(file, detail, fix),
    }
}

/// A domain's live document, when it exists: readable (its published schema first, when it has
/// one, since that names the field that is wrong; then the model), or what is wrong with it. A
/// bad document is reported, never rewritten: conductor does not overwrite what it cannot read.
pub fn document<D: crate::store::Document>(
    store: &crate::store::Store,
    now: crate::time::Timestamp,
    domain: &str,
    schema: Option<crate::schema::Schema>,
) -> Option<Finding> {
    let bytes = match store.read_doc_text::<D>(now) {
        Ok(None) => return None,
        Ok(Some(b)) => Ok(b),
        Err(e) => Err(e.to_string()),
    };
    let checked = match schema {
        Some(s) => bytes.and_then(|b| schema_check(&b, s)),
        None => bytes.map(|_| ()),
    };
    let read = checked.and_then(|()| {
        store
            .read_doc::<D>(now)
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    Some(finding(
        D::FILE.into(),
        read,
        "readable",
        &format!(
            "not rewritten by --repair; move it aside to start the {domain} afresh (its finished work stays in its ledgers)"
        ),
    ))
}

/// Check a JSON file against a schema: the first violation, on one line.
pub fn schema_check(
    bytes: &[u8],
    schema: crate::schema::Schema,
) -> std::result::Result<(), String> {
    let v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not JSON ({e})"))?;
    crate::schema::validate(schema, &v).map_err(|e| format!("fails {}: {e}", schema.file()))
}

/// One external program a feature runs: found on PATH or not, and what its absence turns off.
/// Informational: a missing tool is not a problem of the home.
#[derive(Debug, Serialize)]
pub struct Tool {
    /// The program's name, as looked up on PATH.
    pub tool: String,
    /// Where it was found (`None`: missing).
    pub path: Option<std::path::PathBuf>,
    /// What needs it.
    pub needed_for: String,
    /// What stops working without it.
    pub missing_disables: String,
}

/// The external programs the domains need, gathered (each program once).
#[derive(Debug, Default)]
pub struct Tools(pub Vec<Tool>);

impl Tools {
    /// A program a feature needs, looked up on PATH (once).
    pub fn need(&mut self, name: &str, needed_for: String, missing_disables: String) {
        if self.0.iter().any(|t| t.tool == name) {
            return;
        }
        self.0.push(Tool {
            tool: name.to_string(),
            path: which(name),
            needed_for,
            missing_disables,
        });
    }

    /// The program an agent command runs, for `who` (`queue jobs`): a tool of its own, or one
    /// more use of a tool already listed.
    pub fn agent_command(&mut self, who: &str, cmd: &str) {
        let Some(prog) = program_of(cmd) else {
            return;
        };
        if let Some(t) = self.0.iter_mut().find(|t| t.tool == prog) {
            if !t.needed_for.contains(who) {
                t.needed_for
                    .push_str(&format!("; the agent command of the {who}"));
            }
            return;
        }
        self.need(
            &prog,
            format!("the agent command of the {who} (`{cmd}`)"),
            format!("the {who} that run it: each fails with spawn_failed naming `{prog}`"),
        );
    }
}

/// The program `name` on `PATH` (or `name` itself when it holds a slash), if executable.
pub fn which(name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    let exec = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return exec(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| exec(p))
}

/// The program an agent command template runs: its first word (after `VAR=value` words and
/// `env`), when that is a plain word.
pub fn program_of(cmd: &str) -> Option<String> {
    cmd.split_whitespace()
        .find(|w| !(w.contains('=') && !w.starts_with('=')) && *w != "env" && *w != "exec")
        .filter(|w| !w.contains(['{', '$', '`', '(', '\'', '"']))
        .map(str::to_string)
}

/// A shared store's cluster (`doctor` against etcd): its health and revision as a finding, the
/// backend's description, and whether it is unavailable (nothing else can be checked then).
pub fn cluster(r: &crate::store::etcd::Etcd) -> (Finding, serde_json::Value, bool) {
    use serde_json::json;
    match r.health() {
        Ok(h) => {
            let up = h.members.iter().filter(|(_, up)| *up).count();
            let total = h.members.len();
            let down: Vec<&str> = h
                .members
                .iter()
                .filter(|(_, up)| !*up)
                .map(|(m, _)| m.as_str())
                .collect();
            let detail = format!(
                "etcd {} via {}: leader {}, {up}/{total} members answering{}, revision {}",
                h.version,
                h.endpoint,
                h.leader.as_deref().unwrap_or("none"),
                if down.is_empty() {
                    String::new()
                } else {
                    format!(" (down: {})", down.join("; "))
                },
                h.revision
            );
            let ok = h.leader.is_some() && up * 2 > total;
            (
                Finding {
                    file: format!("store {}", r.url()),
                    ok,
                    detail,
                    repair: (!ok)
                        .then(|| "start the members that are down: etcd needs a majority".into()),
                },
                json!({
                    "kind": "etcd", "store": r.url(), "endpoint": h.endpoint, "version": h.version,
                    "leader": h.leader, "revision": h.revision,
                    "members": h.members.iter().map(|(m, up)| json!({"member": m, "up": up})).collect::<Vec<_>>(),
                }),
                !ok,
            )
        }
        Err(e) => (
            Finding {
                file: format!("store {}", r.url()),
                ok: false,
                detail: e.to_string(),
                repair: Some(
                    "start the cluster's members (etcd needs a majority of them up)".into(),
                ),
            },
            json!({"kind": "etcd", "store": r.url()}),
            true,
        ),
    }
}

/// A shared store's security (`doctor` against etcd): TLS, what verified the server, who etcd
/// takes us for, and what that user's roles may do ("unknown" when etcd will not say). Clear
/// text to another machine (`--insecure-store`) is a problem; a loopback cluster without TLS
/// is not.
pub fn store_security(r: &crate::store::etcd::Etcd) -> (Finding, serde_json::Value) {
    use serde_json::json;
    let s = r.security();
    let tls = match &s.verified_with {
        Some(v) => format!("TLS on, server certificate verified against {v}"),
        None if s.insecure => "TLS off: plain http to another machine (--insecure-store)".into(),
        None => "TLS off (plain http on this machine)".into(),
    };
    let cert = match (&s.client_cn, s.tls) {
        (Some(cn), _) => format!(", client certificate CN {cn}"),
        (None, true) => ", client certificate without CN or none".to_string(),
        (None, false) => String::new(),
    };
    let who = match (&s.user, s.auth_enabled) {
        (_, Some(false)) => format!("authentication is not enabled on the cluster{cert}"),
        (Some(u), _) => format!("user {u} (password{cert})"),
        (None, _) => format!("no user (no credentials given{cert})"),
    };
    let roles = match &s.roles {
        _ if s.user.is_none() || s.auth_enabled == Some(false) => String::new(),
        Some(roles) if roles.is_empty() => "; no roles".to_string(),
        Some(roles) => roles
            .iter()
            .map(|(role, perms)| format!("; role {role}: {}", perms.join(", ")))
            .collect::<String>(),
        None => "; roles unknown (the user may not read them)".to_string(),
    };
    let finding = Finding {
        file: format!("store security {}", r.url()),
        ok: !s.insecure,
        detail: format!("{tls}; {who}{roles}"),
        repair: s.insecure.then(|| {
            "use https:// with the cluster's CA (docs/internals.md, Securing the store)".into()
        }),
    };
    let value = json!({
        "tls": s.tls,
        "verified_with": s.verified_with,
        "client_cn": s.client_cn,
        "user": s.user,
        "auth_enabled": s.auth_enabled,
        "insecure": s.insecure,
        "roles": match &s.roles {
            Some(roles) => json!(roles.iter().map(|(role, perms)| json!({"role": role, "permissions": perms})).collect::<Vec<_>>()),
            None => json!("unknown"),
        },
    });
    (finding, value)
}
