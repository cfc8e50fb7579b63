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
