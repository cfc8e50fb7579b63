//! The one place that knows every domain: what a home holds, domain by domain (for export,
//! import and doctor), and what one domain's claim must know of another's verdicts
//! ([`admission`]). Adding a domain means adding its row here, never editing the store.

pub mod admission;
pub mod bundle;
pub mod doctor;
pub mod events;
pub mod picture;

use std::path::Path;

use crate::error::Result;
use crate::store::{Document, LedgerFile};

/// Decode a document's text as conductor would read it (`corrupt_state` when it cannot).
pub type Check = fn(&Path, &str) -> Result<()>;

fn check<D: Document>(dir: &Path, text: &str) -> Result<()> {
    D::decode(&dir.join(D::FILE), text.as_bytes())
        .map(|_| ())
        .map_err(Into::into)
}

/// Every document file a home may hold, in every domain, with how to check it.
pub const DOCUMENTS: &[(&str, Check)] = &[
    (
        <crate::protocol::State as Document>::FILE,
        check::<crate::protocol::State>,
    ),
    (
        <crate::agents::Agents as Document>::FILE,
        check::<crate::agents::Agents>,
    ),
    (
        <crate::agents::Inbox as Document>::FILE,
        check::<crate::agents::Inbox>,
    ),
    (
        <crate::agents::Channels as Document>::FILE,
        check::<crate::agents::Channels>,
    ),
    (
        <crate::workflows::Sessions as Document>::FILE,
        check::<crate::workflows::Sessions>,
    ),
    (
        <crate::queue::QueueDoc as Document>::FILE,
        check::<crate::queue::QueueDoc>,
    ),
    (
        <crate::protocol::landing::LandingDoc as Document>::FILE,
        check::<crate::protocol::landing::LandingDoc>,
    ),
    (
        <crate::protocol::unclaimed::UnclaimedDoc as Document>::FILE,
        check::<crate::protocol::unclaimed::UnclaimedDoc>,
    ),
];

/// Every ledger a home may hold, in every domain.
pub const LEDGERS: &[LedgerFile] = &[
    crate::protocol::HISTORY,
    crate::protocol::CONFLICTS,
    crate::agents::MESSAGES,
    crate::agents::INBOX_DONE,
    crate::agents::MENTIONS_DONE,
    crate::agents::CONFLICTS,
    crate::workflows::FINISHED,
    crate::queue::JOBS_DONE,
];

/// The names of [`DOCUMENTS`].
pub fn document_names() -> Vec<&'static str> {
    DOCUMENTS.iter().map(|(f, _)| *f).collect()
}
