//! Leases: a record that exists while its holder lives (issue 36 §3). On a shared store it is
//! the key `<prefix>/lease/<name>`, bound to an etcd lease the holder keeps alive; when the
//! holder dies (or is cut off) for longer than the lease's time to live, etcd deletes the key.
//! A transaction can be fenced by a lease ([`crate::Tx::fence`]: it commits only while the
//! lease's record is still the one written), or by another's absence
//! ([`crate::Tx::unless_held`]: only once that record is gone), so a holder that lost its lease
//! can never write beside the one that took over from it.
//!
//! The store knows nothing of what a lease stands for: callers name them. On a file home there
//! are no leases ([`crate::Store::take_lease`] answers `None`): one machine's process ids say
//! who is alive there.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::error::{Error, Refusal, Result};
use crate::{Backend, Store};

/// A lease this process holds: its record's name and key, the etcd lease and the revision the
/// record was written at.
#[derive(Clone, Debug)]
pub struct Lease {
    name: String,
    pub(crate) key: String,
    id: i64,
    pub(crate) revision: i64,
    ttl: Duration,
}

impl Lease {
    /// The name it was taken under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its time to live: how long after the last keep-alive it expires.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
}

/// A lease name: `/`-separated parts of printable characters, no space.
fn check_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.starts_with('/')
        || name.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(Error::refused(
            Refusal::InvalidInput,
            format!("`{name}` cannot name a lease"),
        ));
    }
    Ok(())
}

impl Store {
    /// Take the lease `name` for `ttl` (whole seconds, at least 1), recording `value` under it.
    /// `None` on a file home (no leases there). Refused as `lease_lost` when someone holds
    /// that name already.
    pub fn take_lease(&self, name: &str, value: &[u8], ttl: Duration) -> Result<Option<Lease>> {
        check_name(name)?;
        let Backend::Etcd(r) = &self.backend else {
            return Ok(None);
        };
        let secs = (ttl.as_secs_f64().ceil() as i64).max(1);
        let id = r.lease_grant(secs)?;
        let key = r.lease_key(name);
        match r.put_leased(&key, value, id)? {
            Some(revision) => Ok(Some(Lease {
                name: name.to_string(),
                key,
                id,
                revision,
                ttl: Duration::from_secs(secs as u64),
            })),
            None => {
                let _ = r.lease_revoke(id);
                Err(Error::LeaseLost {
                    store: r.url().to_string(),
                    name: name.to_string(),
                    detail: "someone else holds it".into(),
                })
            }
        }
    }

    /// Keep `lease` alive for another time to live: `false` when it has expired already (its
    /// record is gone, and whoever waited for that may have acted).
    pub fn keep_lease(&self, lease: &Lease) -> Result<bool> {
        let Backend::Etcd(r) = &self.backend else {
            return Ok(true);
        };
        Ok(r.lease_keepalive(lease.id)?.is_some())
    }

    /// Give `lease` up: its record goes at once.
    pub fn drop_lease(&self, lease: &Lease) -> Result<()> {
        match &self.backend {
            Backend::Etcd(r) => r.lease_revoke(lease.id),
            Backend::Files(_) => Ok(()),
        }
    }

    /// The names of the leases held now under `prefix` (`queue/` ...), `None` on a file home.
    pub fn leases_held(&self, prefix: &str) -> Result<Option<BTreeSet<String>>> {
        let Backend::Etcd(r) = &self.backend else {
            return Ok(None);
        };
        let root = r.lease_key("");
        let mut names = BTreeSet::new();
        r.scan(&r.lease_key(prefix), |kv| {
            names.insert(kv.key.strip_prefix(&root).unwrap_or(&kv.key).to_string());
            Ok::<_, Error>(true)
        })?;
        Ok(Some(names))
    }

    /// The lease names a shared store's transaction fence compares, for messages.
    pub(crate) fn lease_name_of(&self, key: &str) -> String {
        match &self.backend {
            Backend::Etcd(r) => key
                .strip_prefix(&r.lease_key(""))
                .unwrap_or(key)
                .to_string(),
            Backend::Files(_) => key.to_string(),
        }
    }
}
