//! `conductor doctor [--repair]`: explain what is wrong with the files in the home, and fix it.

use serde_json::json;

use super::{Ctx, Report, print};
use conductor::error::Reason;
use conductor::error::Result;
use conductor::protocol::doctor::{self, Finding};
use conductor::schema::Schema;

/// Check (and repair) the home.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Checks status.json (JSON, version, schema, claim consistency), history.jsonl \
and conflicts.log line by line, sprint.json and config.json, the agent runtime's, the workflows' and \
the queue's documents, a commit left unfinished by a crashed writer, and leftover temp files. With --repair, a bad \
file is kept under <name>.corrupt-<timestamp> (never deleted) and replaced: status.json by a state rebuilt \
from every instance that can be read, a ledger by its valid lines.\n\nIt also checks the agent integrations \
(`conductor integrate`) in this directory and in ~: a hook whose conductor binary is gone would silently \
switch coordination off. Fix those by running `conductor integrate AGENT` again (--repair leaves agent \
settings alone).\n\nLast, it runs a real sandbox (bubblewrap, as `queue run --runner sandbox` would) with a probe that \
tries each escape, and prints one line per sandbox guarantee saying whether it holds on this machine (informational: \
it does not change the exit status).\n\nThen the external programs the features run: bubblewrap (the sandbox runner), jq (the \
protocol's shell recipes), the CLI of each agent whose hooks are installed, and the agent commands of live queue \
jobs and workflow sessions; each line says where the program is, or what its absence disables (informational too). \
With a shared store (etcd), the cluster's reachability and health come first (exit 11 when it cannot be reached).\n\nExit status: 0 healthy or repaired, 1 problems found."
)]
pub struct DoctorArgs {
    /// Move bad files aside and rebuild them.
    #[arg(long)]
    pub repair: bool,
}

struct DoctorReport {
    findings: Vec<Finding>,
    /// The other domains' documents: reported, never rewritten (conductor does not overwrite a
    /// file it cannot interpret).
    documents: Vec<Finding>,
    /// Agent integrations: reported, never repaired here.
    integrations: Vec<Finding>,
    repaired: bool,
    /// Where state lives: the home, or the shared store with its cluster's health.
    backend: serde_json::Value,
    /// The shared store could not be reached (exit 11).
    unavailable: bool,
    /// Which guarantees of the queue's sandbox runner hold on this machine (reported, never
    /// a problem of the home).
    sandbox: Vec<conductor::queue::sandbox::Guarantee>,
    /// The external programs the features need (reported, never a problem of the home).
    tools: Vec<super::doctor_tools::Tool>,
}

impl DoctorReport {
    fn healthy(&self) -> bool {
        self.findings.iter().all(|f| f.ok)
    }
    fn integrations_ok(&self) -> bool {
        self.integrations
            .iter()
            .chain(&self.documents)
            .all(|f| f.ok)
    }
}

impl Report for DoctorReport {
    fn to_json(&self) -> serde_json::Value {
        let status = if self.healthy() {
            "ok"
        } else if self.repaired {
            "repaired"
        } else {
            "problems"
        };
        let status = if self.integrations_ok() {
            status
        } else {
            "problems"
        };
        let status = if self.unavailable {
            "unavailable"
        } else {
            status
        };
        let sandbox: Vec<serde_json::Value> = self
            .sandbox
            .iter()
            .map(|g| json!({"guarantee": g.name, "holds": g.holds, "detail": g.detail}))
            .collect();
        json!({"status": status, "backend": self.backend, "findings": self.findings, "documents": self.documents, "integrations": self.integrations, "sandbox": sandbox, "tools": self.tools})
    }
    fn to_text(&self) -> String {
        let mut lines: Vec<String> = self
            .findings
            .iter()
            .map(|f| {
                let mark = if f.ok {
                    "ok "
                } else if self.repaired {
                    "FIXED"
                } else {
                    "BAD"
                };
                let mut s = format!("{mark:<5} {}: {}", f.file, f.detail);
                if let Some(r) = f.repair.as_ref().filter(|_| !f.ok) {
                    s.push_str(&format!(
                        "\n      {}: {r}",
                        if self.repaired { "repaired" } else { "fix" }
                    ));
                }
                s
            })
            .collect();
        for f in self.documents.iter().chain(&self.integrations) {
            let mark = if f.ok { "ok " } else { "BAD" };
            lines.push(format!("{mark:<5} {}: {}", f.file, f.detail));
            if let Some(r) = f.repair.as_ref().filter(|_| !f.ok) {
                lines.push(format!("      fix: {r}"));
            }
        }
        for g in &self.sandbox {
            let mark = if g.holds { "yes" } else { "no" };
            lines.push(format!("{mark:<5} sandbox: {}: {}", g.name, g.detail));
        }
        lines.extend(super::doctor_tools::lines(&self.tools));
        lines.push(if self.unavailable {
            "The shared store is unavailable; nothing was changed.".into()
        } else if self.healthy() {
            "Everything is in order.".into()
        } else if self.repaired {
            "Repaired. Nothing was deleted: the originals are kept beside the rebuilt files.".into()
        } else {
            "Problems found; nothing was changed. Run `conductor doctor --repair` to fix them."
                .into()
        });
        lines.join("\n")
    }
    fn exit_code(&self) -> u8 {
        if self.unavailable {
            return 11;
        }
        if !self.integrations_ok() {
            return 1;
        }
        if self.healthy() || self.repaired {
            0
        } else {
            1
        }
    }
}

/// Run `doctor`.
pub fn run(ctx: &Ctx, args: DoctorArgs) -> Result<u8> {
    if let Some(r) = ctx.store.backend().cluster() {
        if args.repair {
            return Err(conductor::error::Error::invalid(
                Reason::InvalidInput,
                "--repair rewrites a file home's files; with a shared store doctor only checks the cluster and its documents (run it without --repair)",
            ));
        }
        return run_remote(ctx, r);
    }
    let findings = doctor::run(&ctx.store, ctx.now, args.repair)?;
    let mut integrated = Vec::new();
    let integrations = integrations(&mut integrated);
    print(
        ctx.out,
        &DoctorReport {
            findings,
            documents: documents(ctx),
            tools: super::doctor_tools::check(ctx, &integrated),
            integrations,
            repaired: args.repair,
            backend: json!({"kind": "files", "home": ctx.store.home().dir()}),
            unavailable: false,
            sandbox: conductor::queue::sandbox::guarantees(ctx.store.home().dir()),
        },
    )
}

/// `doctor` against a shared store: the cluster's health and revision, then every document.
fn run_remote(ctx: &Ctx, r: &conductor::store::etcd::Etcd) -> Result<u8> {
    let (finding, backend, unavailable) = match r.health() {
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
    };
    let documents = if unavailable {
        Vec::new()
    } else {
        let mut d = documents(ctx);
        d.insert(
            0,
            match conductor::protocol::read(&ctx.store, ctx.now) {
                Ok(st) => Finding {
                    file: "status.json".into(),
                    ok: true,
                    detail: format!(
                        "{} instance(s), {} claim(s)",
                        st.instances.len(),
                        st.global_claims.len()
                    ),
                    repair: None,
                },
                Err(e) => Finding {
                    file: "status.json".into(),
                    ok: false,
                    detail: e.to_string(),
                    repair: None,
                },
            },
        );
        d
    };
    let mut integrated = Vec::new();
    let integrations = integrations(&mut integrated);
    print(
        ctx.out,
        &DoctorReport {
            findings: vec![finding],
            documents,
            tools: super::doctor_tools::check(ctx, &integrated),
            integrations,
            repaired: false,
            backend,
            unavailable,
            sandbox: conductor::queue::sandbox::guarantees(ctx.store.home().dir()),
        },
    )
}

/// Each domain's live documents that exist: readable, or what is wrong with them.
fn documents(ctx: &Ctx) -> Vec<Finding> {
    use conductor::store::Document;
    fn check<D: Document>(ctx: &Ctx, domain: &str, schema: Option<Schema>) -> Option<Finding> {
        let bytes = match ctx.store.read_doc_bytes(D::FILE) {
            Ok(None) => return None,
            Ok(Some(b)) => Ok(b),
            Err(e) => Err(e.to_string()),
        };
        // The published schema first (it names the field that is wrong), then the model.
        let checked = match schema {
            Some(s) => bytes.and_then(|b| schema_check(&b, s)),
            None => bytes.map(|_| ()),
        };
        let read = checked.and_then(|()| {
            ctx.store
                .read_doc::<D>(ctx.now)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        Some(match read {
            Ok(_) => Finding {
                file: D::FILE.into(),
                ok: true,
                detail: "readable".into(),
                repair: None,
            },
            Err(e) => Finding {
                file: D::FILE.into(),
                ok: false,
                detail: e,
                repair: Some(format!(
                    "not rewritten by --repair; move it aside to start the {domain} afresh (its finished work stays in its ledgers)"
                )),
            },
        })
    }
    let mut out: Vec<Finding> = [
        check::<conductor::agents::Agents>(ctx, "agent runtime", Some(Schema::RuntimeAgents)),
        check::<conductor::agents::Inbox>(ctx, "agent runtime", Some(Schema::RuntimeInbox)),
        check::<conductor::agents::Channels>(ctx, "agent runtime", Some(Schema::RuntimeChannels)),
        check::<conductor::workflows::Sessions>(ctx, "workflows", None),
        check::<conductor::queue::QueueDoc>(ctx, "job queue", None),
    ]
    .into_iter()
    .flatten()
    .collect();
    out.extend(agent_run_files(ctx));
    out
}

/// Check a JSON file against a schema: the first violation, on one line.
fn schema_check(bytes: &[u8], schema: Schema) -> std::result::Result<(), String> {
    let v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not JSON ({e})"))?;
    conductor::schema::validate(schema, &v).map_err(|e| format!("fails {}: {e}", schema.file()))
}

/// Each agent's run files (`runtime/agents/NAME/run-status.json` and `actions.jsonl`) against
/// their schemas. Reported, never rewritten: the next run of the agent's loop replaces
/// run-status.json, and a bad action line ages out of the capped log.
fn agent_run_files(ctx: &Ctx) -> Vec<Finding> {
    // In the home's directory or under the shared store's keys alike.
    let Ok(files) = conductor::app::bundle::agent_run_files(&ctx.store) else {
        return Vec::new();
    };
    let mut names: Vec<String> = files
        .iter()
        .filter_map(|f| f.split('/').nth(2).map(str::to_string))
        .collect();
    names.dedup();
    let read = |rel: &str| ctx.store.read_doc_bytes(rel).ok().flatten();
    let fix = "not rewritten by --repair: the agent's next `conductor agent run` replaces run-status.json; move a bad actions.jsonl aside to start its log afresh";
    let mut out = Vec::new();
    for name in names {
        let rel = |f: &str| {
            format!(
                "{}/{}/{name}/{f}",
                conductor::agents::AGENT_DIR[0],
                conductor::agents::AGENT_DIR[1]
            )
        };
        if let Some(bytes) = read(&rel(conductor::agents::RUN_STATUS_FILE)) {
            let r = schema_check(&bytes, Schema::RuntimeRunStatus).and_then(|()| {
                conductor::agents::read_run_status(&ctx.store, &name)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
            out.push(finding(
                rel(conductor::agents::RUN_STATUS_FILE),
                r,
                "valid",
                fix,
            ));
        }
        let inbox = rel(conductor::agents::inbox_files::INBOX_FILE);
        if let Some(bytes) = read(&inbox) {
            let path = ctx.store.home().dir().join(&inbox);
            let r = conductor::agents::inbox_files::AgentInbox::decode(&path, &name, &bytes)
                .map(|_| ())
                .map_err(|e| e.to_string());
            out.push(finding(
                inbox,
                r,
                "valid",
                "not rewritten by --repair; move it aside to drop the agent's live inbox (its finished items stay in runtime-inbox.jsonl)",
            ));
        }
        if let Some(bytes) = read(&rel(conductor::agents::ACTIONS_FILE)) {
            let text = String::from_utf8_lossy(&bytes);
            let mut bad = None;
            let mut n = 0;
            for (i, line) in text.split_terminator('\n').enumerate() {
                let torn_tail =
                    i + 1 == text.split_terminator('\n').count() && !text.ends_with('\n');
                let r = serde_json::from_str::<serde_json::Value>(line)
                    .map_err(|e| format!("not JSON ({e})"))
                    .and_then(|v| conductor::schema::validate(Schema::RuntimeAction, &v));
                match r {
                    Ok(()) => n += 1,
                    Err(_) if torn_tail => {}
                    Err(e) => {
                        bad = Some(format!("line {}: {e}", i + 1));
                        break;
                    }
                }
            }
            let r = match bad {
                Some(e) => Err(e),
                None => Ok(()),
            };
            out.push(finding(
                rel(conductor::agents::ACTIONS_FILE),
                r,
                &format!("{n} valid action(s)"),
                fix,
            ));
        }
    }
    out
}

fn finding(file: String, r: std::result::Result<(), String>, ok: &str, fix: &str) -> Finding {
    match r {
        Ok(()) => Finding {
            file,
            ok: true,
            detail: ok.to_string(),
            repair: None,
        },
        Err(detail) => Finding {
            file,
            ok: false,
            detail,
            repair: Some(fix.to_string()),
        },
    }
}

/// The agent integrations installed in this directory and in ~, and whether the binary each
/// hook runs still exists.
fn integrations(integrated: &mut Vec<conductor::hooks::Agent>) -> Vec<Finding> {
    use crate::commands::integrate::{installed_commands, our_program, target};
    use conductor::hooks::Agent;
    let mut roots = Vec::new();
    if let Ok(d) = conductor::host::current_dir() {
        roots.push(d);
    }
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        roots.push(std::path::PathBuf::from(h));
    }
    roots.dedup();
    let mut out = Vec::new();
    for root in &roots {
        // OpenCode: its plugin is conductor's, so its MCP server should be registered too.
        let user = Some(root) == roots.last() && roots.len() > 1;
        let plugin = crate::commands::integrate_plugin::location(Agent::Opencode, root, user);
        if std::fs::read(&plugin).is_ok_and(|b| {
            crate::commands::integrate_plugin::installed_program(&String::from_utf8_lossy(&b))
                .is_some()
        }) {
            out.push(crate::commands::integrate_mcp::finding(
                Agent::Opencode,
                root,
                user,
            ));
        }
        for agent in [Agent::Claude, Agent::Cursor, Agent::Codex, Agent::Gemini] {
            let t = target(agent);
            let user = Some(root) == roots.last() && roots.len() > 1;
            let path = match agent {
                // Codex's user hooks live in $CODEX_HOME (default ~/.codex).
                Agent::Codex if user || std::env::var_os("HOME").is_some_and(|h| *root == *h) => {
                    match crate::commands::codex_trust::codex_home() {
                        Ok(h) => h.join(t.file),
                        Err(_) => continue,
                    }
                }
                _ => root.join(t.dir).join(t.file),
            };
            let Some(v) = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            else {
                continue;
            };
            let mut programs: Vec<String> = installed_commands(&t, &v)
                .iter()
                .filter_map(|(_, c)| our_program(c, agent))
                .collect();
            programs.sort();
            programs.dedup();
            if agent == Agent::Codex && !programs.is_empty() {
                let project = (!(user || std::env::var_os("HOME").is_some_and(|h| *root == *h)))
                    .then_some(root.as_path());
                for (problem, fix) in crate::commands::codex_trust::problems(&path, &v, project) {
                    out.push(Finding {
                        file: path.display().to_string(),
                        ok: false,
                        detail: format!("{problem}: coordination is off for Codex CLI"),
                        repair: Some(format!("run `{fix}`")),
                    });
                }
            }
            if !programs.is_empty() {
                if !integrated.contains(&agent) {
                    integrated.push(agent);
                }
                out.push(crate::commands::integrate_mcp::finding(agent, root, user));
                // The live check: the hook command, driven with the agent's payload.
                let here = conductor::host::current_dir().unwrap_or_else(|_| root.clone());
                out.push(live_check(
                    &path,
                    crate::commands::integrate_check::run(agent, &here, user),
                ));
            }
            for prog in programs {
                let file = path.display().to_string();
                let p = std::path::Path::new(&prog);
                out.push(if p.is_absolute() && !p.is_file() {
                    Finding {
                        file,
                        ok: false,
                        detail: format!(
                            "the {} hooks run {prog}, which does not exist: coordination is off for {}",
                            agent.product(),
                            agent.product()
                        ),
                        repair: Some(format!(
                            "run `conductor integrate {}{}` with the conductor you use now",
                            agent.name(),
                            if Some(root) == roots.last() && roots.len() > 1 { " --user" } else { "" }
                        )),
                    }
                } else if !p.is_absolute() {
                    Finding {
                        file,
                        ok: true,
                        detail: format!(
                            "the {} hooks run `{prog}` from the PATH the agent runs hooks with; \
                             `conductor integrate {}` again names the binary by its absolute path",
                            agent.product(),
                            agent.name()
                        ),
                        repair: None,
                    }
                } else {
                    Finding {
                        file,
                        ok: true,
                        detail: format!("{} hooks run {prog}", agent.product()),
                        repair: None,
                    }
                });
            }
        }
    }
    out.extend(pi(integrated));
    out
}

/// A live check as a finding about `file`.
fn live_check(file: &std::path::Path, c: crate::commands::integrate_check::Check) -> Finding {
    Finding {
        file: file.display().to_string(),
        ok: c.enforced,
        detail: c.line(),
        repair: (!c.enforced).then(|| {
            format!(
                "fix what the live check names, then run `conductor integrate {}` again",
                c.agent
            )
        }),
    }
}

/// Pi: whether Pi loads conductor's extension in this directory (user-level, or a project
/// extension an earlier conductor installed, which Pi 1.x loads only in a trusted project), and
/// the live check.
fn pi(integrated: &mut Vec<conductor::hooks::Agent>) -> Vec<Finding> {
    use crate::commands::{integrate_pi as p, integrate_plugin as plugin};
    let (Ok(here), Ok(home)) = (conductor::host::current_dir(), p::home()) else {
        return Vec::new();
    };
    let user_ext = p::extension_path(&home);
    let project_ext = p::project_extension_path(&here);
    let file = if plugin::is_installed(&user_ext) {
        user_ext
    } else if plugin::is_installed(&project_ext) {
        project_ext
    } else {
        return Vec::new();
    };
    integrated.push(conductor::hooks::Agent::Pi);
    let cli = p::pi_cli();
    let l = p::loads_in(&here, &home, cli.as_ref());
    let version = cli
        .as_ref()
        .and_then(|c| c.version.clone())
        .map_or("Pi (not on PATH)".to_string(), |v| format!("Pi {v}"));
    // Not acting in a directory that was never integrated is by design, not a problem.
    let by_design = l.detail.starts_with("extension not active here");
    let mut out = vec![Finding {
        file: file.display().to_string(),
        ok: l.loads || by_design,
        detail: format!(
            "{version} {} here: {}",
            if l.loads {
                "loads the extension"
            } else {
                "does NOT load the extension"
            },
            l.detail
        ),
        repair: (!l.loads && !by_design)
            .then(|| "run `conductor integrate pi` in this project".to_string()),
    }];
    if l.loads {
        out.push(live_check(
            &file,
            crate::commands::integrate_check::run(conductor::hooks::Agent::Pi, &here, false),
        ));
    }
    out
}
