//! The documents conductor keeps: `status.json`, a `history.jsonl` line, `sprint.json` and the
//! two `config.json` files. Field names and shapes are the protocol's; optional fields are omitted
//! when absent, never written as `null`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::lazy_list::Lazy;
use crate::time::Timestamp;

/// The only `status.json` version this build reads and writes.
pub const STATE_VERSION: &str = "1.0";

/// Where a session runs; the first part of an instance id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// iTerm
    Itm,
    /// Cursor
    Cur,
    /// VS Code
    Vsc,
    /// browser or anything else (the default)
    Web,
    /// Claude Cowork
    Cow,
}

impl Source {
    /// The three-letter code used in ids.
    pub fn code(self) -> &'static str {
        match self {
            Source::Itm => "itm",
            Source::Cur => "cur",
            Source::Vsc => "vsc",
            Source::Web => "web",
            Source::Cow => "cow",
        }
    }
}

/// Task priority; P1 is the most important.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
pub enum Priority {
    /// most important: always passes the gate
    #[value(name = "P1", alias = "p1")]
    P1,
    /// second
    #[value(name = "P2", alias = "p2")]
    P2,
    /// third
    #[value(name = "P3", alias = "p3")]
    P3,
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Priority::P1 => "P1",
            Priority::P2 => "P2",
            Priority::P3 => "P3",
        })
    }
}

/// How a task ended, as recorded in history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// the work is finished
    Success,
    /// the work was given up
    Abandoned,
    /// the instance stopped because of a conflict
    Conflict,
    /// cleaned up after missing heartbeats (recorded by `cleanup`, not chosen by `done`)
    Orphaned,
    /// a finished branch's landing files were freed: it merged, was deleted, or a person
    /// released them (recorded by conductor, not chosen by `done`)
    Landed,
}

impl Outcome {
    /// The lowercase name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Abandoned => "abandoned",
            Outcome::Conflict => "conflict",
            Outcome::Orphaned => "orphaned",
            Outcome::Landed => "landed",
        }
    }
}

/// `~/.conductor/status.json`. Deserializing checks everything `schemas/status.schema.json`
/// checks (each field's deserializer refuses what the schema refuses), so a `State` read from
/// disk is always schema-valid; see [`super::codec`]. (`Deserialize`: [`de::keep_unknown`].)
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct State {
    pub version: String,
    pub updated_at: Timestamp,
    pub instances: Vec<Instance>,
    /// Claimed path → id of the instance holding it. conductor writes normalized absolute,
    /// symlink-resolved paths; other writers may write any string (relative paths are resolved
    /// against the holder's working directory by [`super::foreign::reconcile`]).
    pub global_claims: BTreeMap<String, String>,
    /// The last fencing token given out: every grant of a claim takes the next one, so a
    /// path's tokens only grow ([`Instance::claim_tokens`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub last_token: u64,
    /// Optional in the protocol's schema; conductor always writes it.
    pub drift_warnings: Vec<DriftWarning>,
    /// Top-level fields conductor does not know, kept as they are when it rewrites the file.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    /// The git worktrees of the paths the current operation is about, found on this machine
    /// before it runs ([`super::local`]); never written. Claims compare a path with the same
    /// path in every other worktree of its repository ([`super::worktrees`]).
    #[serde(skip)]
    pub repos: super::worktrees::Worktrees,
}

impl State {
    /// A fresh state with nothing registered.
    pub fn empty(now: Timestamp) -> State {
        State {
            version: STATE_VERSION.to_string(),
            updated_at: now,
            instances: Vec::new(),
            global_claims: BTreeMap::new(),
            last_token: 0,
            drift_warnings: Vec::new(),
            extra: Map::new(),
            repos: Default::default(),
        }
    }

    /// The live instance with this id.
    pub fn instance(&self, id: &str) -> Option<&Instance> {
        self.instances.iter().find(|i| i.id == id)
    }

    /// The live instance with this id, mutably.
    pub fn instance_mut(&mut self, id: &str) -> Option<&mut Instance> {
        self.instances.iter_mut().find(|i| i.id == id)
    }
}

/// One registered session. (`Deserialize`: [`de::keep_unknown`].)
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Instance {
    pub id: String,
    pub source: Source,
    /// May be empty (the plugin's `start` writes `""` when no project is given).
    pub project: String,
    /// May be empty.
    pub task: String,
    pub priority: Priority,
    /// Optional in the protocol's schema (absent reads as empty); conductor always writes it.
    /// Decoded when first read ([`super::lazy_list`]).
    pub files_claimed: Lazy<Vec<String>>,
    pub started_at: Timestamp,
    pub last_heartbeat: Timestamp,
    pub working_directory: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub override_reason: Option<String>,
    /// The process that registered or last heartbeated the instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The host name of that process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The Claude Code session this instance belongs to, when a hook registered it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Which coding agent the session is (claude, cursor, codex, gemini), when a hook registered it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// That agent's version (its npm package's), found from the process that ran the hook:
    /// a session of a version the live check never saw shows as unverified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// The POSIX session (the terminal's or login's session id) of the process that ran
    /// `start`, on `host`. A command that finds this instance only by its directory acts on it
    /// only from that session or from a descendant of `pid` (never from another terminal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal_session: Option<u32>,
    /// The fencing token of each claim this instance holds: the number its grant took. A
    /// script that writes outside an agent checks it with `conductor check --token N PATH`.
    #[serde(skip_serializing_if = "Lazy::is_empty")]
    pub claim_tokens: Lazy<BTreeMap<String, u64>>,
    /// Files this instance asked for and was refused, until it gets them or ends.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending_conflicts: Vec<PendingConflict>,
    /// Files this instance waits for with `claim --wait`, in the order it asked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<Waiting>,
    /// Fields conductor does not know (another tool's), kept as they are on rewrite.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A place in the waiting queue of a file (`claim --wait`). Queues are first come, first served:
/// the waiter with the lowest `ticket` gets the file when it is released.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Waiting {
    #[serde(deserialize_with = "de::abs_path")]
    pub file: String,
    /// Greater than every ticket in the state when it was issued.
    #[serde(deserialize_with = "de::ticket")]
    pub ticket: u64,
    pub since: Timestamp,
    /// The waiting process.
    #[serde(
        default,
        deserialize_with = "de::some_pid",
        skip_serializing_if = "Option::is_none"
    )]
    pub pid: Option<u32>,
}

/// A refused claim that has not been resolved yet.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingConflict {
    #[serde(deserialize_with = "de::abs_path")]
    pub file: String,
    #[serde(deserialize_with = "de::instance_id")]
    pub held_by: String,
    pub since: Timestamp,
}

/// A task that runs against the sprint's focus (recorded when the gate is overridden).
/// (`Deserialize`: [`de::keep_unknown`].)
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DriftWarning {
    pub instance_id: String,
    pub reason: String,
    pub acknowledged: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acknowledged_at: Option<Timestamp>,
    /// Fields conductor does not know, kept on rewrite.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One line of `history.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub id: String,
    pub project: String,
    pub task: String,
    pub priority: Priority,
    pub started_at: Timestamp,
    pub completed_at: Timestamp,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_minutes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_modified: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

/// `~/.conductor/sprint.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sprint {
    pub sprint_name: String,
    pub focus: Priority,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_date: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_date: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priorities: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explicitly_deferred: Option<Vec<String>>,
}

/// `<project>/.conductor/config.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProjectConfig {
    /// A JSON file, relative to the project root, that lists the project's tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_source: Option<String>,
    /// Where the priority sits in that file, like `tasks[].priority`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_field: Option<String>,
    /// The task name sessions started by hooks use in this project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

/// True for ids of the protocol's form `^[a-z]{3}-[a-f0-9]{6}$` (conductor generates
/// `{source}-{6 hex}`; the protocol's schema accepts any three lowercase letters).
pub fn is_valid_instance_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() == 10
        && b[..3].iter().all(u8::is_ascii_lowercase)
        && b[3] == b'-'
        && b[4..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Field deserializers that refuse what the schema refuses (`deserialize_with` targets for the
/// types above). Each names the `$defs` entry of `schemas/defs.schema.json` it
/// mirrors.
pub mod de {
    use std::collections::BTreeMap;
    use std::fmt;

    use serde::Deserialize;
    use serde::de::{self, Deserializer, MapAccess, Visitor};

    use super::{DriftWarning, Instance, STATE_VERSION, State, is_valid_instance_id};
    use crate::protocol::lazy_list::{self, Lazy};
    use crate::text::printable;
    use crate::time::Timestamp;

    /// The error for a `version` other than "1.0".
    pub fn version_message(v: &str) -> String {
        format!(
            "it has version \"{}\" and this conductor reads \"{STATE_VERSION}\" only; upgrade conductor",
            printable(v)
        )
    }

    fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        String::deserialize(d)
    }

    /// `"version": {"const": "1.0"}`.
    pub fn version<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let v = string(d)?;
        if v == STATE_VERSION {
            Ok(v)
        } else {
            Err(de::Error::custom(version_message(&v)))
        }
    }

    fn check_id<E: de::Error>(v: String) -> Result<String, E> {
        if is_valid_instance_id(&v) {
            Ok(v)
        } else {
            Err(E::custom(format!(
                "`{}` is not an instance id (three lowercase letters, `-`, six lowercase hex digits)",
                printable(&v)
            )))
        }
    }

    /// `$defs/instance_id`: `^[a-z]{3}-[0-9a-f]{6}$`.
    pub fn instance_id<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        check_id(string(d)?)
    }

    /// `$defs/abs_path`: starts with `/`, no NUL byte.
    pub fn abs_path<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let v = string(d)?;
        if v.starts_with('/') && !v.contains('\0') {
            Ok(v)
        } else {
            Err(de::Error::custom(format!(
                "`{}` is not an absolute path without NUL bytes",
                printable(&v)
            )))
        }
    }

    /// An optional string that may be absent but not `null`.
    pub fn some_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        string(d).map(Some)
    }

    /// `$defs/text` when present: a non-empty string, not `null`.
    pub fn some_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        let v = string(d)?;
        if v.is_empty() {
            Err(de::Error::custom("empty text"))
        } else {
            Ok(Some(v))
        }
    }

    /// `$defs/date_time` when present, not `null`.
    pub fn some_timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        Timestamp::deserialize(d).map(Some)
    }

    /// A JSON integer in `min..=max`: what JSON Schema calls an integer, so `5.0` counts.
    struct Integer {
        min: u64,
        max: u64,
    }

    impl Visitor<'_> for Integer {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "an integer from {} to {}", self.min, self.max)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
            if (self.min..=self.max).contains(&v) {
                Ok(v)
            } else {
                Err(E::invalid_value(de::Unexpected::Unsigned(v), &self))
            }
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
            match u64::try_from(v) {
                Ok(u) => self.visit_u64(u),
                Err(_) => Err(E::invalid_value(de::Unexpected::Signed(v), &self)),
            }
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
            // Both bounds are exact in f64 (at most 2^53 - 1), so the comparison is exact.
            if v.fract() == 0.0 && v >= self.min as f64 && v <= self.max as f64 {
                Ok(v as u64)
            } else {
                Err(E::invalid_value(de::Unexpected::Float(v), &self))
            }
        }
    }

    /// `pid`: an integer from 1 to 2^32 - 1, not `null`.
    pub fn some_pid<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        let v = d.deserialize_any(Integer {
            min: 1,
            max: u64::from(u32::MAX),
        })?;
        Ok(Some(v as u32))
    }

    /// `ticket`: an integer from 1 to 2^53 - 1.
    pub fn ticket<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        d.deserialize_any(Integer {
            min: 1,
            max: (1 << 53) - 1,
        })
    }

    /// `global_claims`: any string key (a path as its writer spelled it) → an instance id.
    pub fn claims<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
        struct Claims;
        impl<'de> Visitor<'de> for Claims {
            type Value = BTreeMap<String, String>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object mapping paths to instance ids")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                // Collected first, then built in one pass: conductor writes the keys sorted, and
                // a bulk build of sorted input is much cheaper than one insert per key. A repeated
                // key keeps its last value, as in a generic JSON value.
                let mut out = Vec::with_capacity(m.size_hint().unwrap_or(0));
                while let Some((k, v)) = m.next_entry::<String, String>()? {
                    out.push((k, check_id(v)?));
                }
                Ok(BTreeMap::from_iter(out))
            }
        }
        d.deserialize_map(Claims)
    }

    thread_local! {
        /// Set while [`glancing`] decodes: each instance's own claim lists are skipped.
        static GLANCE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Run `decode` with each instance's `files_claimed` and `claim_tokens` parsed but not kept
    /// (left empty): a decision over `global_claims` never reads them, and at 1,000 claims they
    /// are two thirds of the strings in `status.json` (issue 35). Their JSON must still be well
    /// formed; their contents are not checked. Only [`crate::protocol::Glance`] calls this.
    pub(crate) fn glancing<T>(decode: impl FnOnce() -> T) -> T {
        lazy_list::with_flag(&GLANCE, decode)
    }

    fn glancing_now() -> bool {
        GLANCE.with(std::cell::Cell::get)
    }

    /// `files_claimed`: a list of paths, checked and kept as its text (skipped while
    /// [`glancing`]).
    pub fn claimed<'de, D: Deserializer<'de>>(d: D) -> Result<Lazy<Vec<String>>, D::Error> {
        if glancing_now() {
            return lazy_list::skip(d);
        }
        lazy_list::read(d, "files_claimed")
    }

    /// `claim_tokens`: path → token, checked and kept as its text (skipped while [`glancing`]).
    pub fn tokens<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Lazy<BTreeMap<String, u64>>, D::Error> {
        if glancing_now() {
            return lazy_list::skip(d);
        }
        lazy_list::read(d, "claim_tokens")
    }

    /// `Deserialize` for a document struct that keeps the fields it does not know in `extra`,
    /// written out instead of derived with `#[serde(flatten)]`: serde's flatten first copies the
    /// whole struct, with everything nested in it, into a generic buffer and decodes the fields
    /// from that, so `status.json` would be parsed twice (issue 35). Each field is decoded as it
    /// is met; `required` fields are `missing field` errors when absent, `default` ones read as
    /// their default, `with f` names the deserializer that checks what the schema checks; other
    /// keys go to `extra` as JSON values. `also` fields are never read (their default).
    macro_rules! keep_unknown {
        ($ty:ident { $($field:ident: $fty:ty, $need:ident $(with $f:path)?;)* } $(also $skip:ident;)*) => {
            impl<'de> Deserialize<'de> for $ty {
                fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                    struct Fields;
                    impl<'de> Visitor<'de> for Fields {
                        type Value = $ty;
                        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                            f.write_str(concat!("struct ", stringify!($ty)))
                        }
                        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<$ty, A::Error> {
                            $(let mut $field: Option<$fty> = None;)*
                            let mut extra = serde_json::Map::new();
                            while let Some(key) = m.next_key::<String>()? {
                                match key.as_str() {
                                    $(stringify!($field) => {
                                        if $field.is_some() {
                                            return Err(de::Error::duplicate_field(stringify!($field)));
                                        }
                                        $field = Some(keep_unknown!(@value m, $fty $(, $f)?));
                                    })*
                                    _ => {
                                        let v = m.next_value::<serde_json::Value>()?;
                                        extra.insert(key, v);
                                    }
                                }
                            }
                            Ok($ty {
                                $($field: keep_unknown!(@take $field, $need),)*
                                extra,
                                $($skip: Default::default(),)*
                            })
                        }
                    }
                    d.deserialize_map(Fields)
                }
            }
        };
        (@value $m:ident, $fty:ty) => { $m.next_value::<$fty>()? };
        (@value $m:ident, $fty:ty, $f:path) => {{
            struct With;
            impl<'de> de::DeserializeSeed<'de> for With {
                type Value = $fty;
                fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<$fty, D::Error> {
                    $f(d)
                }
            }
            $m.next_value_seed(With)?
        }};
        (@take $field:ident, required) => {
            $field.ok_or_else(|| de::Error::missing_field(stringify!($field)))?
        };
        (@take $field:ident, default) => { $field.unwrap_or_default() };
    }

    keep_unknown!(State {
        version: String, required with self::version;
        updated_at: Timestamp, required;
        instances: Vec<Instance>, required;
        global_claims: BTreeMap<String, String>, required with self::claims;
        last_token: u64, default;
        drift_warnings: Vec<DriftWarning>, default;
    } also repos;);

    keep_unknown!(Instance {
        id: String, required with self::instance_id;
        source: super::Source, required;
        project: String, required;
        task: String, required;
        priority: super::Priority, required;
        files_claimed: Lazy<Vec<String>>, default with self::claimed;
        started_at: Timestamp, required;
        last_heartbeat: Timestamp, required;
        working_directory: String, required with self::abs_path;
        override_reason: Option<String>, default with self::some_string;
        pid: Option<u32>, default with self::some_pid;
        host: Option<String>, default with self::some_text;
        session_id: Option<String>, default with self::some_text;
        agent: Option<String>, default with self::some_text;
        agent_version: Option<String>, default with self::some_text;
        terminal_session: Option<u32>, default with self::some_pid;
        claim_tokens: Lazy<BTreeMap<String, u64>>, default with self::tokens;
        pending_conflicts: Vec<super::PendingConflict>, default;
        waiting_for: Vec<super::Waiting>, default;
    });

    keep_unknown!(DriftWarning {
        instance_id: String, required with self::instance_id;
        reason: String, required;
        acknowledged: bool, required;
        acknowledged_at: Option<Timestamp>, default with self::some_timestamp;
    });
}
