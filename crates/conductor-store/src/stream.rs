//! Streams: bytes a process on one host writes for readers on every host (a queue job's log),
//! kept in the shared store as numbered chunks, `<prefix>/stream/<name>/<n>` (zero-padded), each
//! one plain put: no transaction, no journal event. The caller bounds a chunk's size and how
//! many it writes. A file home has no streams (its readers read the file itself).

use crate::error::{Error, Result};
use crate::{Backend, Store};

/// A stream or stream-prefix name: `/`-separated parts of printable characters, no space.
fn check(name: &str) -> Result<()> {
    if name.is_empty()
        || name.starts_with('/')
        || name.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(Error::refused(
            crate::error::Refusal::InvalidInput,
            format!("`{name}` cannot name a stream"),
        ));
    }
    Ok(())
}

/// Chunks as read: `(stream name, bytes)`.
pub type Chunks = Vec<(String, Vec<u8>)>;

impl Store {
    /// Put chunk `n` of the stream `name`. `false` on a file home (nothing is kept).
    pub fn stream_put(&self, name: &str, n: u64, bytes: &[u8]) -> Result<bool> {
        check(name)?;
        let Backend::Etcd(r) = &self.backend else {
            return Ok(false);
        };
        let key = format!("{}{n:020}", r.stream_prefix(name));
        r.txn(&[], &[(key, bytes.to_vec())], &[])?;
        Ok(true)
    }

    /// The chunks of every stream whose name starts with `name/` (or is `name`), in key order
    /// (so a stream's chunks in order, and streams by name): `(stream name, bytes)`. `None` on a
    /// file home.
    pub fn stream_read(&self, name: &str) -> Result<Option<Chunks>> {
        check(name)?;
        let Backend::Etcd(r) = &self.backend else {
            return Ok(None);
        };
        let root = r.stream_root();
        let mut out = Vec::new();
        r.scan(&r.stream_prefix(name), |kv| {
            let rest = kv.key.strip_prefix(&root).unwrap_or(&kv.key);
            let stream = rest.rsplit_once('/').map_or(rest, |(s, _)| s).to_string();
            out.push((stream, kv.value));
            Ok::<_, Error>(true)
        })?;
        Ok(Some(out))
    }

    /// Remove every stream whose name starts with `name/`.
    pub fn stream_remove(&self, name: &str) -> Result<()> {
        check(name)?;
        let Backend::Etcd(r) = &self.backend else {
            return Ok(());
        };
        let from = r.stream_prefix(name);
        let to = crate::etcd::prefix_end(&from);
        r.txn(&[], &[], &[(from, to)])?;
        Ok(())
    }
}
