//! `conductor migrate-store`: lay a shared store's `status.json` out in pages (issue 36 §2).

use serde_json::json;

use super::{Ctx, Report, print};
use conductor::error::{Error, Reason, Result};
use conductor::store::migrate::Migration;

/// Move a shared store's status.json into the paged layout (safe to run twice).
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "A shared store (etcd) keeps status.json as a small head plus its \
claims in pages of a few hundred, so a claim writes one page whatever the number of live claims, \
and 20,000 claims fit etcd's default request limit. A prefix written by an older conductor holds \
the whole document in one key (<prefix>/doc/status.json); this command moves it in place: it writes the \
pages, then switches to them in one etcd transaction that only happens if no claim changed the \
document meanwhile (it starts again when one did), and leaves a note in the old key that makes an older conductor stop instead of \
acting on a stale copy. Until it runs, the old layout keeps working. Running it again, or on a \
new prefix, changes nothing.\n\n  conductor --store https://10.0.0.5:2379/team migrate-store"
)]
pub struct MigrateStoreArgs {}

struct Migrated(Migration, String);

impl Report for Migrated {
    fn to_json(&self) -> serde_json::Value {
        let (migrated, claims, pages) = match self.0 {
            Migration::Migrated { entries, pages } => (true, entries, pages),
            _ => (false, 0, 0),
        };
        json!({"status": "ok", "migrated": migrated, "claims": claims, "pages": pages, "message": self.to_text()})
    }
    fn to_text(&self) -> String {
        match &self.0 {
            Migration::Migrated { entries, pages } => format!(
                "Migrated status.json at {} to the paged layout: {entries} claims in {pages} page{}.",
                self.1,
                if *pages == 1 { "" } else { "s" }
            ),
            Migration::AlreadyPaged => "Already in the paged layout: nothing to do.".into(),
            Migration::Fresh | Migration::NotShared => format!(
                "Nothing to migrate: {} holds no status.json yet (it is written in the paged layout).",
                self.1
            ),
        }
    }
}

/// Run `migrate-store`.
pub fn run(ctx: &Ctx, _args: MigrateStoreArgs) -> Result<u8> {
    if ctx.store.state_in_files() {
        return Err(Error::invalid(
            Reason::InvalidInput,
            "migrate-store moves a shared store's state: this command runs on a file home",
        )
        .with_hint(
            "name the store with --store URL or CONDUCTOR_STORE (a file home needs no migration)",
        ));
    }
    let done = conductor::protocol::migrate_store(&ctx.store, ctx.now)?;
    print(ctx.out, &Migrated(done, ctx.store.location()))
}
