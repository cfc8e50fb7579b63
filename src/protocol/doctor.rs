//! `conductor doctor`: inspect every file in the home and, with `--repair`, put bad files aside
//! (never deleting them) and rebuild what can be rebuilt. Repairs run under the state lock.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::protocol::codec::{decode_validated as decode_state, encode as encode_state};
use crate::protocol::foreign;
use crate::protocol::{DriftWarning, Instance, STATE_VERSION, Sprint, State};
use crate::schema::read_doc;
use crate::schema::{self, Schema};
use crate::store::{Store, atomic, ledger, read_bytes};
use crate::time::Timestamp;

pub use crate::health::Finding;

/// status.json in a shared store (`doctor` there only reads): its instances and claims, or why
/// it cannot be read.
pub fn remote(store: &Store, now: Timestamp) -> Finding {
    match crate::protocol::read(store, now) {
        Ok(st) => Finding::good(
            "status.json",
            format!(
                "{} instance(s), {} claim(s)",
                st.instances.len(),
                st.global_claims.len()
            ),
        ),
        Err(e) => Finding {
            file: "status.json".into(),
            ok: false,
            detail: e.to_string(),
            repair: None,
        },
    }
}

/// The programs the protocol's own recipes run (informational in `doctor`).
pub fn tools(t: &mut crate::health::Tools) {
    t.need(
        "jq",
        "the protocol's jq recipes, which the original plugin's hooks run".into(),
        "the jq recipes of conductor-protocol.md, so the original plugin's hooks cannot \
         claim or read status.json; conductor itself does not need jq"
            .into(),
    );
}

fn good(file: &str, detail: impl Into<String>) -> Finding {
    Finding {
        file: file.into(),
        ok: true,
        detail: detail.into(),
        repair: None,
    }
}

fn bad(file: &str, detail: impl Into<String>, repair: impl Into<String>) -> Finding {
    Finding {
        file: file.into(),
        ok: false,
        detail: detail.into(),
        repair: Some(repair.into()),
    }
}

/// The protocol's files (status.json, the ledgers, sprint.json, config.json, the journal, an
/// unfinished commit, temp files): one finding per file looked at.
pub fn checks(store: &Store, now: Timestamp) -> Result<Vec<Finding>> {
    run(store, now, false)
}

/// [`checks`], fixing what was found (under the state lock; a bad file is kept aside).
pub fn repair(store: &Store, now: Timestamp) -> Result<Vec<Finding>> {
    run(store, now, true)
}

/// Can a command write and lock in the home? Create a probe lock file in it (the way every
/// command opens `status.lock`), take its lock, remove it. A home on a read-only file system,
/// or one whose file system refuses locks, fails here instead of at the next `start`.
fn probe(dir: &Path) -> Finding {
    let path = dir.join(format!(".doctor-probe-{}.lock", std::process::id()));
    let taken = crate::store::lock::acquire(&path, std::time::Duration::ZERO, &|| {});
    let _ = std::fs::remove_file(&path);
    match taken {
        Ok(lock) => {
            drop(lock);
            good(
                "home",
                format!("{} is writable and lockable", dir.display()),
            )
        }
        Err(e) => bad(
            "home",
            format!("{} cannot be written or locked: {e}", dir.display()),
            "every command that changes something will fail here: make the home writable, or \
             point CONDUCTOR_HOME at a directory on a local, writable disk",
        ),
    }
}

/// Check the home; with `repair`, fix what was found. Returns one finding per file looked at.
pub fn run(store: &Store, now: Timestamp, repair: bool) -> Result<Vec<Finding>> {
    // Repairs hold every lock of the home, so nothing is in flight and no commit is pending.
    let _locks = if repair {
        Some(store.lock_all()?)
    } else {
        None
    };
    let home = store.home();
    let mut out = Vec::new();

    // status.json
    let status = home.status();
    match read_bytes(&status)? {
        None => out.push(good("status.json", "absent (no instance registered yet)")),
        Some(bytes) => match decode_state(&status, &bytes) {
            Ok(st) if !foreign::inspect(&st).is_empty() => {
                out.push(foreign_finding(&status, st, now, repair)?)
            }
            Ok(st) => out.push(good(
                "status.json",
                format!(
                    "valid: {} instance(s), {} claim(s)",
                    st.instances.len(),
                    st.global_claims.len()
                ),
            )),
            Err(e) => {
                let detail = problem(&e);
                if repair {
                    let aside = move_aside(&status, now)?;
                    let (state, notes) = salvage(&bytes, now);
                    atomic::write_atomic(&status, &encode_state(&state))?;
                    out.push(bad(
                        "status.json",
                        detail,
                        format!(
                            "moved to {}; rebuilt with {} instance(s) and {} claim(s){}",
                            aside.display(),
                            state.instances.len(),
                            state.global_claims.len(),
                            if notes.is_empty() {
                                String::new()
                            } else {
                                format!(" ({})", notes.join("; "))
                            }
                        ),
                    ));
                } else {
                    out.push(bad("status.json", detail, "`conductor doctor --repair` moves it aside and rebuilds a valid state from what can be kept"));
                }
            }
        },
    }

    // Append-only ledgers.
    let history_ok = |line: &str| -> std::result::Result<(), String> {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
        schema::validate(Schema::HistoryEntry, &v)
    };
    let log_ok = |line: &str| -> std::result::Result<(), String> {
        crate::protocol::conflicts_log::LogEntry::parse(line)
            .map(|_| ())
            .ok_or_else(|| "not `<time> | <KIND> | <text>`".to_string())
    };
    out.push(check_ledger(
        &home.history(),
        "history.jsonl",
        &history_ok,
        repair,
        now,
    )?);
    out.push(check_ledger(
        &home.conflicts_log(),
        "conflicts.log",
        &log_ok,
        repair,
        now,
    )?);

    // The event journal: every line an event, seqs strictly increasing across segments and the
    // active file (a bad line would otherwise stop every write that appends an event).
    let last = std::cell::Cell::new(0u64);
    let gaps = std::cell::RefCell::new(Vec::new());
    let event_ok = |line: &str| -> std::result::Result<(), String> {
        let ev: crate::store::event::Event =
            serde_json::from_str(line).map_err(|e| format!("not an event ({e})"))?;
        if ev.seq <= last.get() {
            return Err(format!("seq {} does not follow {}", ev.seq, last.get()));
        }
        last.set(ev.seq);
        if ev.event_type == crate::protocol::events::JOURNAL_GAP {
            gaps.borrow_mut().push(ev);
        }
        Ok(())
    };
    let mut journal: Vec<PathBuf> = crate::store::journal::segments(home.dir())?
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    journal.push(home.dir().join(crate::store::journal::ACTIVE));
    for path in journal {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        out.push(check_ledger(&path, &name, &event_ok, repair, now)?);
    }
    out.push(super::journal_check::high_water(
        home.dir(),
        last.get(),
        &gaps.borrow(),
        repair,
    )?);

    // User-written settings.
    out.push(check_doc::<Sprint>(
        &home.sprint(),
        "sprint.json",
        Schema::Sprint,
        repair,
        now,
    )?);
    out.push(check_doc::<Config>(
        &home.config(),
        "config.json",
        Schema::Config,
        repair,
        now,
    )?);

    // A transaction that committed and whose writer died before finishing it (with --repair,
    // taking every lock above already finished it).
    if crate::store::redo::pending(home.dir()) {
        out.push(bad(
            crate::store::redo::FILE,
            "a committed transaction is not finished yet (its writer died or is finishing it now)",
            "finished by the next command that reads or writes, or `doctor --repair`",
        ));
    } else {
        out.push(good(crate::store::redo::FILE, "no transaction pending"));
    }

    // Debris of crashed writers.
    let temps: Vec<PathBuf> = std::fs::read_dir(home.dir())
        .map_err(|e| Error::io("list", home.dir(), e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n.starts_with(atomic::TEMP_PREFIX) && n.ends_with(".tmp")
        })
        .collect();
    if temps.is_empty() {
        out.push(good("temp files", "none left over"));
    } else if repair {
        atomic::remove_stale_temps(home.dir(), |_| true);
        out.push(bad(
            "temp files",
            format!("{} left by interrupted writes", temps.len()),
            "removed",
        ));
    } else {
        out.push(bad(
            "temp files",
            format!("{} left by interrupted writes", temps.len()),
            "removed by the next write or `doctor --repair`",
        ));
    }
    // Last: the files above keep their places in the report.
    out.push(probe(home.dir()));
    Ok(out)
}

/// A readable state that another program left inconsistent or in a form conductor does not
/// write (relative keys, a file under two instances...): reported; with `repair`, rewritten as
/// the next transaction would (global_claims is the truth), the original kept beside it.
fn foreign_finding(status: &Path, mut st: State, now: Timestamp, repair: bool) -> Result<Finding> {
    let problems = foreign::inspect(&st);
    let detail = format!(
        "readable, but not in conductor's form; the repair ({} step(s)) will: {}",
        problems.len(),
        problems.join("; ")
    );
    if !repair {
        return Ok(bad(
            "status.json",
            detail,
            "served as it is (global_claims is the truth); the next conductor transaction or `conductor doctor --repair` rewrites it and keeps the original",
        ));
    }
    let mut fx = Vec::new();
    let mut resolver = crate::protocol::local::PathNormalizer::new(PathBuf::from("/"));
    let seen = foreign::Seen::Changed(None);
    let rec = foreign::reconcile(&mut st, seen, now, &mut resolver, &mut fx)?;
    // Keys the other program wrote through a symlink keep its spelling (its own recipes
    // release them by it); the next transaction records where they lead.
    let applied = crate::protocol::aliases::applied_in(&st, &rec.aliases);
    crate::protocol::aliases::restore(&mut st, &applied);
    let kept = match &rec.keep_copy {
        Some(suffix) => Some(atomic::keep_beside(status, suffix)?),
        None => None,
    };
    // `.status.json.last` is left alone on purpose: the next transaction then still describes
    // what the other program did (not what doctor did, which only changes spellings).
    atomic::write_atomic(status, &encode_state(&st))?;
    let done: Vec<String> = fx
        .iter()
        .filter_map(|e| match e {
            crate::protocol::ops::Effect::Log { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    Ok(bad(
        "status.json",
        detail,
        format!(
            "{}{}",
            done.join("; "),
            kept.map(|k| format!(" (original at {})", k.display()))
                .unwrap_or_default()
        ),
    ))
}

fn problem(e: &Error) -> String {
    match e {
        Error::Store(crate::store::Error::CorruptState { detail, .. }) => detail.clone(),
        other => other.to_string(),
    }
}

/// Keep the bad file under a new name beside it: `<name>.corrupt-<stamp>`.
fn move_aside(path: &Path, now: Timestamp) -> Result<PathBuf> {
    atomic::keep_beside(path, &format!("corrupt-{}", now.compact())).map_err(Into::into)
}

fn check_ledger(
    path: &Path,
    name: &str,
    valid: &dyn Fn(&str) -> std::result::Result<(), String>,
    repair: bool,
    now: Timestamp,
) -> Result<Finding> {
    let mut total = 0usize;
    let mut bad_lines: Vec<(usize, String)> = Vec::new();
    let mut torn = false;
    ledger::for_each_line(path, |n, line| {
        total = n;
        match line {
            ledger::Line::Complete(t) => {
                if let Err(why) = valid(&t) {
                    bad_lines.push((n, why));
                }
            }
            ledger::Line::Torn(_) => torn = true,
        }
        Ok::<_, crate::Error>(true)
    })?;
    if total == 0 && !path.exists() {
        return Ok(good(name, "absent"));
    }
    if bad_lines.is_empty() && !torn {
        return Ok(good(name, format!("valid: {total} line(s)")));
    }
    let mut detail = Vec::new();
    if let Some((n, why)) = bad_lines.first() {
        detail.push(format!(
            "{} invalid line(s), first at line {n}: {why}",
            bad_lines.len()
        ));
    }
    if torn {
        detail.push(format!("line {total} is torn (an interrupted write)"));
    }
    let detail = detail.join("; ");
    if !repair {
        return Ok(bad(
            name,
            detail,
            "`conductor doctor --repair` keeps the valid lines and moves the original aside",
        ));
    }
    let aside = move_aside(path, now)?;
    let skip: std::collections::BTreeSet<usize> = bad_lines.iter().map(|(n, _)| *n).collect();
    let mut kept = Vec::new();
    ledger::for_each_line(&aside, |n, line| {
        if let ledger::Line::Complete(t) = line
            && !skip.contains(&n)
        {
            kept.extend_from_slice(t.as_bytes());
            kept.push(b'\n');
        }
        Ok::<_, crate::Error>(true)
    })?;
    atomic::write_atomic(path, &kept)?;
    Ok(bad(
        name,
        detail,
        format!(
            "kept {} valid line(s); the original is at {}",
            total - skip.len() - usize::from(torn),
            aside.display()
        ),
    ))
}

fn check_doc<T: serde::de::DeserializeOwned>(
    path: &Path,
    name: &str,
    schema: Schema,
    repair: bool,
    now: Timestamp,
) -> Result<Finding> {
    match read_doc::<T>(path, schema) {
        Ok(None) => Ok(good(name, "absent")),
        Ok(Some(_)) => Ok(good(name, "valid")),
        Err(e) => {
            let detail = problem(&e);
            if repair {
                let aside = move_aside(path, now)?;
                std::fs::remove_file(path).map_err(|e| Error::io("move aside", path, e))?;
                atomic::sync_dir(path.parent().expect("home file"))?;
                Ok(bad(
                    name,
                    detail,
                    format!(
                        "moved to {} (defaults apply until you write a valid one)",
                        aside.display()
                    ),
                ))
            } else {
                Ok(bad(
                    name,
                    detail,
                    "fix it by hand, or `conductor doctor --repair` moves it aside",
                ))
            }
        }
    }
}

/// Rebuild a valid state from the bytes of a bad `status.json`: keep every instance that is
/// valid on its own (first of duplicate ids), give each file to its first claimant, rebuild
/// `global_claims` from `files_claimed`, keep drift warnings of kept instances.
pub fn salvage(bytes: &[u8], now: Timestamp) -> (State, Vec<String>) {
    let mut state = State::empty(now);
    let mut notes = Vec::new();
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        notes.push("nothing readable".to_string());
        return (state, notes);
    };
    if let Some(v) = value.get("version").and_then(Value::as_str)
        && v != STATE_VERSION
    {
        notes.push(format!("converted from version {v}"));
    }
    let mut dropped: Vec<String> = Vec::new();
    for (n, item) in value
        .get("instances")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = item
            .get("id")
            .and_then(Value::as_str)
            .map(|id| format!("instance {}", crate::text::printable_max(id, 40)))
            .unwrap_or_else(|| format!("instance #{}", n + 1));
        let mut inst = match serde_json::from_value::<Instance>(item.clone()) {
            Ok(inst) => inst,
            Err(e) => {
                let why = crate::text::printable_max(&e.to_string(), 120);
                dropped.push(format!("{name} ({why})"));
                continue;
            }
        };
        if state.instance(&inst.id).is_some() {
            dropped.push(format!("{name} (its id is used by an earlier instance)"));
            continue;
        }
        let mut seen = std::collections::BTreeSet::new();
        inst.files_claimed
            .retain(|f| seen.insert(f.clone()) && !state.global_claims.contains_key(f));
        let mut probe = State::empty(now);
        probe.instances.push(inst.clone());
        probe.global_claims = inst
            .files_claimed
            .iter()
            .map(|f| (f.clone(), inst.id.clone()))
            .collect();
        if schema::validate(
            Schema::Status,
            &serde_json::to_value(&probe).expect("state serializes"),
        )
        .is_err()
        {
            dropped.push(format!("{name} (not valid on its own)"));
            continue;
        }
        for f in &inst.files_claimed {
            state.global_claims.insert(f.clone(), inst.id.clone());
        }
        state.instances.push(inst);
    }
    if !dropped.is_empty() {
        notes.push(format!("dropped {}", dropped.join(", ")));
    }
    for item in value
        .get("drift_warnings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Ok(w) = serde_json::from_value::<DriftWarning>(item.clone())
            && state.instance(&w.instance_id).is_some()
        {
            state.drift_warnings.push(w);
        }
    }
    (state, notes)
}
