//! `config.json`: the home's settings, read by every domain (validated against its schema once
//! per process). The store reads only its own keys (where state lives, journal retention).

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::schema::Schema;
use crate::store::Store;

/// `config.json`, or the defaults when absent (validated). Read at most once per process.
pub fn read(store: &Store) -> Result<Config> {
    static CACHE: std::sync::OnceLock<Config> = std::sync::OnceLock::new();
    if let Some(c) = CACHE.get() {
        return Ok(c.clone());
    }
    let c: Config =
        crate::schema::read_doc(&store.home().config(), Schema::Config)?.unwrap_or_default();
    Ok(CACHE.get_or_init(|| c).clone())
}

/// `~/.conductor/config.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// Where the north-stars file is; `~` expands to the user's home.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub north_stars_path: Option<String>,
    /// Heartbeat age after which `cleanup` treats an instance as orphaned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_max_age_minutes: Option<u64>,
    /// Size in bytes past which `events.jsonl` rolls into a numbered segment (default 4 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_segment_bytes: Option<u64>,
    /// How many rolled event segments to keep (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_keep_segments: Option<u64>,
    /// Rolled segments last written more than this many days ago are pruned (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_keep_days: Option<u64>,
    /// Size in bytes past which an append-only ledger (history.jsonl, conflicts.log,
    /// queue-finished.jsonl, runtime-*.jsonl, ...) is rotated to `<name>.<N>` (default 16 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_rotate_bytes: Option<u64>,
    /// How many rotated files to keep per ledger (default 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_keep_files: Option<u64>,
    /// Rotated ledger files last written more than this many days ago are removed (default:
    /// no age limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_keep_days: Option<u64>,
    /// What the Claude Code hook does with edits of files this session has not claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforce: Option<Enforce>,
    /// Whether a session's start launches `conductor watch-edits`, the watcher of edits nobody
    /// claimed (default true; `CONDUCTOR_WATCH_EDITS=0` turns it off too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch_edits: Option<bool>,
    /// The branch worktrees' changes land in (`overlaps`, landing after `done`); default: the
    /// remote's HEAD, else `main`, else `master`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integration_branch: Option<String>,
    /// The shared store, `https://HOST:PORT[,HOST:PORT...][/PREFIX]` or `etcd://...` (plain
    /// http) (absent: this home's files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// The store's TLS files and credentials (read by the store itself; here so the whole
    /// file round-trips): see schemas/config.schema.json.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_cacert: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_cert: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_password_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_insecure: Option<bool>,
    /// On a shared store, a queue dispatcher's lease time to live in seconds (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_lease_seconds: Option<u64>,
}

/// The `enforce` setting: how `conductor hook claude` treats an edit (PreToolUse).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Enforce {
    /// block files held by another live instance; claim a free file on its first edit
    #[default]
    AutoClaim,
    /// block files held by another live instance; never claim
    BlockForeign,
    /// block every edit of a file this session has not claimed itself
    RequireClaim,
    /// as auto-claim, and also block edits of files another live worktree of the repository
    /// changed (its branch's commits or uncommitted changes), claimed or not
    BlockOverlap,
    /// never block and never claim (sessions are still registered and ended)
    Off,
    /// as auto-claim, and a session whose agent's hooks failed their live check here (its
    /// enforcement is `unenforced`) may not claim at all
    RequireVerified,
}

impl Enforce {
    /// The name used in config.json.
    pub fn as_str(self) -> &'static str {
        match self {
            Enforce::AutoClaim => "auto-claim",
            Enforce::BlockForeign => "block-foreign",
            Enforce::RequireClaim => "require-claim",
            Enforce::BlockOverlap => "block-overlap",
            Enforce::Off => "off",
            Enforce::RequireVerified => "require-verified",
        }
    }
}
