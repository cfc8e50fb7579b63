//! The etcd backend's client: etcd v3's JSON gateway (`/v3/kv/range`, `/v3/kv/txn`,
//! `/v3/watch`, `/v3/maintenance/status`) over a small blocking HTTP client.
//!
//! Why the gateway and `ureq` rather than the official gRPC crate: the gRPC client brings tonic,
//! prost and a tokio runtime (about 90 more crates, minutes of clean build, a bigger binary and
//! a runtime started by every command), while an ordinary command here makes two or three
//! requests. `ureq` without default features adds seven small crates, no TLS and no async
//! runtime; the file home pays nothing for it (the client is only built when a store URL says
//! `etcd://`).
//!
//! Keys (under the prefix, `/conductor` unless the URL names another):
//! - `<prefix>/doc/<file>`: a document (status.json, queue.json, ...), the same bytes as the
//!   file in a home;
//! - `<prefix>/ledger/<file>/<n>`: the lines one transaction appended to a ledger
//!   (history.jsonl, conflicts.log, ...), newline-separated, numbered from `n` (zero-padded) in
//!   one sequence for every ledger;
//! - `<prefix>/journal/<seq>`: the events of one transaction, newline-separated, numbered from
//!   `seq` (zero-padded), gap-free like the file journal;
//! - `<prefix>/meta/seq`: `{"event":N,"line":M}`, the last numbers given;
//! - `<prefix>/lease/<name>`: a record bound to an etcd lease (`/v3/lease/grant`, kept alive
//!   by `/v3/lease/keepalive`): it exists while its holder lives, and goes when the lease
//!   expires (see [`crate::lease`]);
//! - `<prefix>/stream/<name>/<n>`: chunk `n` of a stream, bytes one host writes for readers on
//!   every host, like a queue job's log (see [`crate::stream`]).
//!
//! Security (issue 36): `https://` store URLs speak TLS through ureq's rustls (ring), verifying
//! the server against the CA file given (else Mozilla's roots), optionally with a client
//! certificate (for etcd's `--client-cert-auth`; its JSON gateway refuses a certificate with a
//! common name, and cannot authenticate by it, so the user comes from a password). A user and
//! password are exchanged once per process for a token (`/v3/auth/authenticate`), sent in the
//! `Authorization` header; an expired token is renewed once. Nothing TLS is set up unless the
//! URL says `https://`: rustls builds its configuration on the first connection. The password
//! is never formatted into a message (it is a [`Secret`]).
//!
//! Every request carries `Grpc-Metadata-hasleader: true`, so a member that has lost its leader
//! answers "no leader" at once instead of after etcd's request timeout: a command run without
//! quorum fails fast (`store_unavailable`, exit 11) having changed nothing.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use crate::error::{Access, Error, Refusal, Result};

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "/conductor";

/// Pages of a paged document read per request (at most 512 entries each: a few MB).
const PAGES_A_REQUEST: i64 = 32;

/// How long a watch stream may stay silent before it is opened again on another member.
const WATCH_SILENCE: Duration = Duration::from_secs(60);

/// How long one request may take before the member counts as unreachable.
fn request_timeout() -> Duration {
    std::env::var("CONDUCTOR_STORE_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(Duration::from_secs(5))
}

/// A key and its value as etcd keeps them.
#[derive(Clone, Debug)]
pub struct Kv {
    pub key: String,
    pub value: Vec<u8>,
    pub mod_revision: i64,
}

/// A document that may be paged, as [`Etcd::read_paged`] found it.
#[derive(Debug, Default)]
pub struct PagedRead {
    /// `doc/<file>`: the whole document (not paged yet), or a tombstone.
    pub doc: Option<Kv>,
    /// The head: present when the document is paged.
    pub head: Option<Kv>,
    /// The numbering record (`meta/seq`).
    pub meta: Option<Kv>,
    /// Every page, in key order.
    pub pages: Vec<Kv>,
    /// The revision it was read at.
    pub revision: i64,
}

/// How to reach the cluster safely: config.json's `store_*` keys, each overridden by its
/// `CONDUCTOR_ETCD_*` variable (read by [`crate::Store::open`]).
#[derive(Clone, Debug, Default)]
pub struct Security {
    /// PEM file of the CA that signed the members' certificates (`https://` only).
    pub cacert: Option<PathBuf>,
    /// PEM client certificate and its key, for etcd's `--client-cert-auth` (without a common
    /// name: etcd's gateway refuses one that has it).
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// etcd user for password authentication.
    pub user: Option<String>,
    /// The password itself (CONDUCTOR_ETCD_PASSWORD), else read from `password_file`.
    pub password: Option<Secret>,
    /// A file holding the password (mode 0600 or stricter).
    pub password_file: Option<PathBuf>,
    /// Allow plain `http://` to a member on another machine (warned about every time).
    pub insecure: bool,
}

/// A credential: never printed, formatted or logged.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: String) -> Secret {
        Secret(s)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// Password authentication: the user, the password and the token it was exchanged for.
struct Login {
    user: String,
    password: Secret,
    /// `None` before the first request; `Some("")` when the cluster has no authentication.
    token: Mutex<Option<String>>,
}

/// What `doctor` reports about the connection's security.
#[derive(Debug)]
pub struct SecurityReport {
    pub tls: bool,
    /// What the server's certificate was verified against (`None`: no TLS).
    pub verified_with: Option<String>,
    /// The client certificate's common name, when one is sent.
    pub client_cn: Option<String>,
    /// The user etcd knows us as (password authentication: etcd's JSON gateway does not
    /// authenticate by a certificate's common name).
    pub user: Option<String>,
    /// Whether the cluster checks who we are: `Some(false)` when it said authentication is
    /// not enabled, `None` when unknown.
    pub auth_enabled: Option<bool>,
    /// Each role of the user with its permissions, `None` when the user may not read them.
    pub roles: Option<Vec<(String, Vec<String>)>>,
    /// Plain HTTP to another machine, allowed by `--insecure-store`.
    pub insecure: bool,
}

/// A connection to an etcd cluster under one key prefix.
pub struct Etcd {
    /// `http://host:port` (or `https://`) of each member given.
    endpoints: Vec<String>,
    prefix: String,
    /// The URL as given, for messages.
    url: String,
    agent: ureq::Agent,
    /// The TLS settings (`None`: plain HTTP), also for the watch's own agent.
    tls: Option<ureq::tls::TlsConfig>,
    /// The CA file the server is verified against (`None` with TLS: Mozilla's roots).
    cacert: Option<PathBuf>,
    /// The client certificate's common name.
    client_cn: Option<String>,
    login: Option<Arc<Login>>,
    /// Plain HTTP to a member on another machine, allowed explicitly.
    insecure: bool,
    /// The member that answered last (tried first next time).
    preferred: std::sync::atomic::AtomicUsize,
    /// Read every range at this revision (a consistent snapshot: `export`).
    snapshot: std::sync::Mutex<Option<i64>>,
}

impl Clone for Etcd {
    fn clone(&self) -> Etcd {
        Etcd {
            endpoints: self.endpoints.clone(),
            prefix: self.prefix.clone(),
            url: self.url.clone(),
            agent: self.agent.clone(),
            tls: self.tls.clone(),
            cacert: self.cacert.clone(),
            client_cn: self.client_cn.clone(),
            login: self.login.clone(),
            insecure: self.insecure,
            preferred: std::sync::atomic::AtomicUsize::new(
                self.preferred.load(std::sync::atomic::Ordering::Relaxed),
            ),
            snapshot: std::sync::Mutex::new(
                *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()),
            ),
        }
    }
}

/// What `doctor` reports about the cluster.
#[derive(Debug)]
pub struct Health {
    pub endpoint: String,
    pub version: String,
    pub revision: i64,
    pub leader: Option<String>,
    pub members: Vec<(String, bool)>,
}

impl Etcd {
    /// Parse a store URL with no TLS files and no credentials (see [`Etcd::open`]).
    pub fn parse(url: &str) -> Result<Etcd> {
        Etcd::open(url, &Security::default())
    }

    /// Parse `etcd://HOST:PORT[,HOST:PORT...][/PREFIX]` (plain HTTP; `http://` is the same) or
    /// `https://HOST:PORT[,...][/PREFIX]`, and take the TLS files and credentials of `sec`. A
    /// member may repeat the scheme (`https://a:2379,https://b:2379`), but every member speaks
    /// the same one. Nothing is sent yet, and no TLS is set up before the first request.
    pub fn open(url: &str, sec: &Security) -> Result<Etcd> {
        let bad = |why: &str| {
            Error::refused(
                Refusal::InvalidStore,
                format!(
                    "invalid store `{url}`: {why} (expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX], or https://...)"
                ),
            )
        };
        // `https://user:password@host`: refused without repeating the URL, which holds a secret.
        if url.contains('@') {
            return Err(Error::refused(
                Refusal::InvalidStore,
                "the store URL holds credentials (`user:password@`), which would show in `ps`, logs and messages; use CONDUCTOR_ETCD_USER and a password file instead",
            ));
        }
        let (scheme, mut rest) = if let Some(r) = url.strip_prefix("etcd://") {
            ("http", r)
        } else if let Some(r) = url.strip_prefix("http://") {
            ("http", r)
        } else if let Some(r) = url.strip_prefix("https://") {
            ("https", r)
        } else {
            return Err(bad(
                "only etcd://, http:// and https:// stores are supported besides the file home",
            ));
        };
        let mut hosts = Vec::new();
        let prefix = loop {
            let (member_scheme, r) = if let Some(r) = rest.strip_prefix("https://") {
                (Some("https"), r)
            } else if let Some(r) = rest.strip_prefix("http://") {
                (Some("http"), r)
            } else {
                (None, rest)
            };
            if member_scheme.is_some_and(|m| m != scheme) {
                return Err(bad(
                    "it mixes http and https members; every member must speak TLS (https://) or none",
                ));
            }
            let end = r.find([',', '/']).unwrap_or(r.len());
            hosts.push(&r[..end]);
            match r.as_bytes().get(end) {
                Some(b',') => rest = &r[end + 1..],
                Some(_) => break &r[end..],
                None => break "",
            }
        };
        let prefix = prefix.trim_end_matches('/');
        let prefix = if prefix.is_empty() {
            DEFAULT_PREFIX
        } else {
            prefix
        };
        if prefix.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(bad("the prefix contains a space or a control character"));
        }
        let mut endpoints = Vec::new();
        let mut remote = None;
        for h in hosts {
            let (host, port) = h
                .rsplit_once(':')
                .ok_or_else(|| bad("a member has no port"))?;
            if host.is_empty()
                || port.parse::<u16>().is_err()
                || !host.chars().all(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '[' | ']' | ':')
                })
            {
                return Err(bad(&format!("`{h}` is not HOST:PORT")));
            }
            if !is_loopback(host) {
                remote.get_or_insert(host);
            }
            endpoints.push(format!("{scheme}://{host}:{port}"));
        }
        let tls = scheme == "https";
        if !tls {
            // TLS files with a clear-text URL: the user meant TLS, and would not get it.
            let given = [
                (&sec.cacert, "the CA (CONDUCTOR_ETCD_CACERT / store_cacert)"),
                (
                    &sec.cert,
                    "a client certificate (CONDUCTOR_ETCD_CERT / store_cert)",
                ),
                (&sec.key, "a client key (CONDUCTOR_ETCD_KEY / store_key)"),
            ];
            if let Some((_, what)) = given.iter().find(|(p, _)| p.is_some()) {
                return Err(bad(&format!(
                    "{what} is set but the URL is plain http; use https://"
                )));
            }
            if let Some(host) = remote
                && !sec.insecure
            {
                return Err(Error::refused(
                    Refusal::InsecureStore,
                    format!(
                        "refusing plain http to `{host}`, which is not this machine: claims and credentials would cross the network unencrypted"
                    ),
                ));
            }
        }
        let (tls_config, client_cn) = if tls {
            let (c, cn) = tls_config(sec)?;
            (Some(c), cn)
        } else {
            (None, None)
        };
        let login = match &sec.user {
            Some(user) if !user.is_empty() => Some(Arc::new(Login {
                user: user.clone(),
                password: password(sec, user)?,
                token: Mutex::new(None),
            })),
            _ => None,
        };
        let mut builder = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(1)))
            .timeout_global(Some(request_timeout()));
        if let Some(c) = &tls_config {
            builder = builder.tls_config(c.clone());
        }
        Ok(Etcd {
            endpoints,
            prefix: prefix.to_string(),
            url: url.to_string(),
            agent: builder.build().into(),
            tls: tls_config,
            cacert: sec.cacert.clone(),
            client_cn,
            login,
            insecure: !tls && remote.is_some(),
            preferred: std::sync::atomic::AtomicUsize::new(0),
            snapshot: std::sync::Mutex::new(None),
        })
    }

    /// The warning to print before every command when clear text goes to another machine
    /// (allowed by `--insecure-store` / `store_insecure`).
    pub fn plaintext_warning(&self) -> Option<String> {
        self.insecure.then(|| {
            format!(
                "the store `{}` is plain http to another machine (--insecure-store): anyone on the network can read and rewrite every claim",
                self.url
            )
        })
    }

    /// The URL as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The key of a document.
    pub fn doc_key(&self, file: &str) -> String {
        format!("{}/doc/{file}", self.prefix)
    }

    /// Where a document kept in the paged layout lives (see [`crate::split`]).
    pub fn split_root(&self, file: &str) -> String {
        format!("{}/split/{file}/", self.prefix)
    }

    /// The head of a paged document.
    pub fn split_head_key(&self, file: &str) -> String {
        format!("{}head", self.split_root(file))
    }

    /// The prefix of a paged document's pages.
    pub fn split_page_prefix(&self, file: &str) -> String {
        format!("{}page/", self.split_root(file))
    }

    /// Everything the store holds of a document that may be paged, read at one revision: its
    /// `doc/` key, its head, the numbering record and every page (in requests of 32 pages, the
    /// later ones at the first one's revision).
    pub fn read_paged(&self, file: &str) -> Result<PagedRead> {
        self.read_paged_with(file, true)
    }

    /// [`Etcd::read_paged`] without the pages (`with_pages` false): the head only, and the
    /// revision to read pages at later ([`Etcd::pages_around`]).
    pub fn read_paged_with(&self, file: &str, with_pages: bool) -> Result<PagedRead> {
        let prefix = self.split_page_prefix(file);
        let end = prefix_end(&prefix);
        let get = |k: String| json!({ "request_range": self.range_body(json!({ "key": b64(k.as_bytes()) })) });
        let mut ops = vec![
            get(self.doc_key(file)),
            get(self.split_head_key(file)),
            get(self.meta_key()),
        ];
        if with_pages {
            ops.push(json!({ "request_range": self.pages_body(&prefix, &end, None) }));
        }
        let v = self.call("/v3/kv/txn", &json!({ "success": ops }))?;
        // The later pages at the revision the first read was at: a pinned snapshot's (export),
        // else the answer's.
        let pinned = *self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        let rev = match pinned {
            Some(rev) => rev,
            None => v
                .pointer("/header/revision")
                .and_then(num)
                .ok_or_else(|| self.unavailable("etcd's answer has no revision".into()))?,
        };
        let response = |i: usize| {
            v.get("responses")
                .and_then(|r| r.get(i))
                .and_then(|r| r.get("response_range"))
                .cloned()
                .unwrap_or(Value::Null)
        };
        let one = |i: usize| kvs(&response(i)).into_iter().next();
        let mut read = PagedRead {
            doc: one(0),
            head: one(1),
            meta: one(2),
            pages: kvs(&response(3)),
            revision: rev,
        };
        if response(3).get("more").and_then(Value::as_bool) == Some(true)
            && let Some(last) = read.pages.last().map(|kv| format!("{}\0", kv.key))
        {
            self.pages_from(&last, &end, rev, &mut read.pages)?;
        }
        Ok(read)
    }

    /// A request for the next [`PAGES_A_REQUEST`] keys in `[from, end)`, at `rev` (else at the
    /// pinned snapshot, if any).
    fn pages_body(&self, from: &str, end: &str, rev: Option<i64>) -> Value {
        let mut body = self.range_body(json!({
            "key": b64(from.as_bytes()),
            "range_end": b64(end.as_bytes()),
            "limit": PAGES_A_REQUEST,
            "sort_order": "ASCEND",
            "sort_target": "KEY",
        }));
        if let Some(rev) = rev {
            body["revision"] = json!(rev.to_string());
        }
        body
    }

    /// Every key in `[from, end)` at `rev`, appended to `out`, [`PAGES_A_REQUEST`] a request.
    fn pages_from(&self, from: &str, end: &str, rev: i64, out: &mut Vec<Kv>) -> Result<()> {
        let mut from = from.to_string();
        loop {
            let v = self.call("/v3/kv/range", &self.pages_body(&from, end, Some(rev)))?;
            let got = kvs(&v);
            let more = v.get("more").and_then(Value::as_bool) == Some(true);
            let Some(last) = got.last().map(|kv| format!("{}\0", kv.key)) else {
                return Ok(());
            };
            out.extend(got);
            if !more {
                return Ok(());
            }
            from = last;
        }
    }

    /// The pages of a paged document that hold `keys` (the last page named at or before each)
    /// and every key below each of `under` (those pages and the one before), read at `revision`,
    /// in etcd transactions of at most 64 reads. Pages may repeat.
    pub fn pages_around(
        &self,
        file: &str,
        keys: &[String],
        under: &[String],
        revision: i64,
    ) -> Result<Vec<Kv>> {
        let prefix = self.split_page_prefix(file);
        let at = |mut body: Value| {
            body["revision"] = json!(revision.to_string());
            json!({ "request_range": body })
        };
        let last_before = |k: &str| {
            at(json!({
                "key": b64(prefix.as_bytes()),
                "range_end": b64(format!("{prefix}{k}\0").as_bytes()),
                "limit": 1,
                "sort_order": "DESCEND",
                "sort_target": "KEY",
            }))
        };
        let mut ops: Vec<Value> = keys.iter().map(|k| last_before(k)).collect();
        for u in under {
            let from = format!("{prefix}{u}");
            ops.push(last_before(u));
            ops.push(at(json!({
                "key": b64(from.as_bytes()),
                "range_end": b64(prefix_end(&from).as_bytes()),
            })));
        }
        let mut out = Vec::new();
        // A claim of hundreds of files: every page costs less.
        if ops.len() > 256 {
            self.pages_from(&prefix, &prefix_end(&prefix), revision, &mut out)?;
            return Ok(out);
        }
        for batch in ops.chunks(64) {
            let v = self.call("/v3/kv/txn", &json!({ "success": batch }))?;
            for r in v
                .get("responses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(rr) = r.get("response_range") {
                    out.extend(kvs(rr));
                }
            }
        }
        Ok(out)
    }

    /// The prefix of a ledger's lines.
    pub fn ledger_prefix(&self, file: &str) -> String {
        format!("{}/ledger/{file}/", self.prefix)
    }

    /// The key of a ledger line.
    pub fn ledger_key(&self, file: &str, n: u64) -> String {
        format!("{}{n:020}", self.ledger_prefix(file))
    }

    /// The prefix of the journal's events.
    pub fn journal_prefix(&self) -> String {
        format!("{}/journal/", self.prefix)
    }

    /// The key of an event.
    pub fn journal_key(&self, seq: u64) -> String {
        format!("{}{seq:020}", self.journal_prefix())
    }

    /// The key of the numbering record.
    pub fn meta_key(&self) -> String {
        format!("{}/meta/seq", self.prefix)
    }

    /// The key of the record bound to the lease named `name` (see [`crate::lease`]).
    pub fn lease_key(&self, name: &str) -> String {
        format!("{}/lease/{name}", self.prefix)
    }

    /// Where streams' chunks live (see [`crate::stream`]).
    pub fn stream_root(&self) -> String {
        format!("{}/stream/", self.prefix)
    }

    /// The prefix of the chunks of the stream `name`.
    pub fn stream_prefix(&self, name: &str) -> String {
        format!("{}{name}/", self.stream_root())
    }

    /// Grant a lease of `ttl` seconds (`/v3/lease/grant`): its ID. A grant whose answer is
    /// lost is harmless: nothing is bound to that lease, and it expires.
    pub fn lease_grant(&self, ttl: i64) -> Result<i64> {
        let v = self.call("/v3/lease/grant", &json!({ "TTL": ttl.to_string() }))?;
        v.get("ID")
            .and_then(num)
            .filter(|id| *id != 0)
            .ok_or_else(|| self.unavailable("etcd granted no lease ID".into()))
    }

    /// Keep a lease alive (`/v3/lease/keepalive`, one round): the seconds it has again, or
    /// `None` when it has expired or was revoked (etcd answers without a TTL then).
    pub fn lease_keepalive(&self, id: i64) -> Result<Option<i64>> {
        let v = self.call("/v3/lease/keepalive", &json!({ "ID": id.to_string() }))?;
        Ok(v.pointer("/result/TTL").and_then(num).filter(|t| *t > 0))
    }

    /// Revoke a lease (`/v3/lease/revoke`): the keys bound to it go at once. A lease that has
    /// expired already is no error.
    pub fn lease_revoke(&self, id: i64) -> Result<()> {
        match self.call("/v3/lease/revoke", &json!({ "ID": id.to_string() })) {
            Ok(_) => Ok(()),
            Err(Error::StoreUnavailable { detail, .. }) if detail.contains("lease not found") => {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Put `key` bound to lease `id` (it goes when the lease does), unless the key exists: its
    /// revision, or `None` when it existed and nothing was written.
    pub fn put_leased(&self, key: &str, value: &[u8], id: i64) -> Result<Option<i64>> {
        let v = self.request(
            "/v3/kv/txn",
            &json!({
                "compare": [{
                    "key": b64(key.as_bytes()),
                    "target": "CREATE",
                    "result": "EQUAL",
                    "create_revision": "0",
                }],
                "success": [{ "request_put": {
                    "key": b64(key.as_bytes()),
                    "value": b64(value),
                    "lease": id.to_string(),
                } }],
            }),
            true,
        )?;
        if !v.get("succeeded").and_then(Value::as_bool).unwrap_or(false) {
            return Ok(None);
        }
        Ok(v.pointer("/header/revision").and_then(num))
    }

    /// Everything under the prefix.
    pub fn root(&self) -> String {
        format!("{}/", self.prefix)
    }

    fn unavailable(&self, detail: String) -> Error {
        Error::StoreUnavailable {
            store: self.url.clone(),
            detail,
            maybe_applied: false,
        }
    }

    /// A write whose fate is unknown: sent, and then no answer that says what became of it.
    fn outcome_unknown(&self, detail: String) -> Error {
        Error::StoreUnavailable {
            store: self.url.clone(),
            detail: format!("{detail}; the write may or may not have been applied"),
            maybe_applied: true,
        }
    }

    /// From now on, read everything as it was at the current revision (one consistent
    /// snapshot, whatever others write meanwhile); returns that revision.
    pub fn pin_snapshot(&self) -> Result<i64> {
        let v = self.call(
            "/v3/kv/range",
            &json!({ "key": b64(self.meta_key().as_bytes()) }),
        )?;
        let rev = v
            .pointer("/header/revision")
            .and_then(num)
            .ok_or_else(|| self.unavailable("etcd's answer has no revision".into()))?;
        *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = Some(rev);
        Ok(rev)
    }

    /// A range request's body, at the pinned revision if there is one.
    fn range_body(&self, mut body: Value) -> Value {
        if let Some(rev) = *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) {
            body["revision"] = json!(rev.to_string());
        }
        body
    }

    /// POST `body` to `path` on a member: the preferred one first, then the others when a
    /// member cannot be reached or has no leader (nothing was applied in either case). For a
    /// `write`, any other failure after the request went out is not retried anywhere: it may
    /// still be applied, and the error says so.
    fn call(&self, path: &str, body: &Value) -> Result<Value> {
        self.request(path, body, false)
    }

    /// Any request to etcd's JSON gateway, with this connection's TLS and credentials (the
    /// tests set up users and roles with it: `/v3/auth/user/add`, ...).
    pub fn gateway(&self, path: &str, body: &Value) -> Result<Value> {
        self.request(path, body, true)
    }

    fn request(&self, path: &str, body: &Value, write: bool) -> Result<Value> {
        let token = self.token(false)?;
        match self.request_with(path, body, write, token.as_deref())? {
            Answer::Value(v) => Ok(v),
            // The token expired (or the auth store moved on): log in again, once.
            Answer::StaleToken(detail) => {
                let token = self.token(true)?;
                match self.request_with(path, body, write, token.as_deref())? {
                    Answer::Value(v) => Ok(v),
                    Answer::StaleToken(_) => Err(self.denied(detail)),
                }
            }
        }
    }

    /// The token to send (`None`: no password login, or the cluster has no authentication);
    /// logs in when there is none yet or `renew`.
    fn token(&self, renew: bool) -> Result<Option<String>> {
        let Some(login) = &self.login else {
            return Ok(None);
        };
        let mut token = login.token.lock().unwrap_or_else(|e| e.into_inner());
        if renew || token.is_none() {
            *token = Some(self.authenticate(login)?);
        }
        Ok(token.clone().filter(|t| !t.is_empty()))
    }

    /// Exchange the user and password for a token ("" when the cluster has no authentication).
    fn authenticate(&self, login: &Login) -> Result<String> {
        let body = json!({ "name": login.user, "password": login.password.0 });
        match self.request_with("/v3/auth/authenticate", &body, false, None) {
            Ok(Answer::Value(v)) => Ok(v
                .get("token")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()),
            Ok(Answer::StaleToken(d)) => Err(self.denied(d)),
            Err(Error::StoreAccess { detail, .. }) if detail.contains("not enabled") => {
                Ok(String::new())
            }
            Err(e) => Err(e),
        }
    }

    /// etcd refused who we are.
    fn denied(&self, detail: String) -> Error {
        Error::StoreAccess {
            store: self.url.clone(),
            access: Access::Unauthorized,
            detail,
        }
    }

    /// Who etcd takes us for, for messages.
    fn who(&self) -> String {
        match &self.login {
            Some(l) => format!("user `{}`", l.user),
            None => "a client with no user".into(),
        }
    }

    /// A POST with the headers every request carries.
    fn post(
        &self,
        agent: &ureq::Agent,
        url: &str,
        token: Option<&str>,
    ) -> ureq::RequestBuilder<ureq::typestate::WithBody> {
        let mut r = agent
            .post(url)
            .header("content-type", "application/json")
            .header("grpc-metadata-hasleader", "true");
        if let Some(t) = token {
            r = r.header("authorization", t);
        }
        r
    }

    fn request_with(
        &self,
        path: &str,
        body: &Value,
        write: bool,
        token: Option<&str>,
    ) -> Result<Answer> {
        let body = serde_json::to_vec(body).expect("requests serialize");
        let n = self.endpoints.len();
        let first = self.preferred.load(std::sync::atomic::Ordering::Relaxed);
        let mut last_error = String::new();
        let mut untrusted = None;
        for k in 0..n {
            let i = (first + k) % n;
            let url = format!("{}{path}", self.endpoints[i]);
            let res = self.post(&self.agent, &url, token).send(&body[..]);
            let mut res = match res {
                Ok(r) => r,
                // The handshake failed: nothing was sent; every member is likely to fail alike,
                // but one with a good certificate may still answer.
                Err(e) if tls_failure(&e).is_some() => {
                    let why = tls_failure(&e).unwrap_or_default();
                    untrusted = Some(format!("{}: {why}", self.endpoints[i]));
                    last_error = format!("{}: {why}", self.endpoints[i]);
                    continue;
                }
                // Not connected: nothing was sent, another member may answer.
                Err(ureq::Error::Timeout(ureq::Timeout::Connect | ureq::Timeout::Resolve)) => {
                    last_error = format!("{}: no connection within 1s", self.endpoints[i]);
                    continue;
                }
                Err(ureq::Error::Timeout(_)) => {
                    let detail = format!(
                        "{} did not answer within {:.1}s",
                        self.endpoints[i],
                        request_timeout().as_secs_f64()
                    );
                    return Err(if write {
                        self.outcome_unknown(detail)
                    } else {
                        self.unavailable(detail)
                    });
                }
                Err(e @ (ureq::Error::ConnectionFailed | ureq::Error::HostNotFound)) => {
                    last_error = format!("{}: {e}", self.endpoints[i]);
                    continue;
                }
                Err(ureq::Error::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    last_error = format!("{}: {e}", self.endpoints[i]);
                    continue;
                }
                Err(e) if write => {
                    let e = e.to_string();
                    return Err(self.outcome_unknown(format!(
                        "{}: {e}{}",
                        self.endpoints[i],
                        self.hangup_hint(&e)
                    )));
                }
                Err(e) => {
                    last_error = format!("{}: {e}", self.endpoints[i]);
                    continue;
                }
            };
            let status = res.status().as_u16();
            let bytes = match res.body_mut().read_to_vec() {
                Ok(b) => b,
                Err(e) if write => {
                    let e = e.to_string();
                    return Err(self.outcome_unknown(format!(
                        "{}: {e}{}",
                        self.endpoints[i],
                        self.hangup_hint(&e)
                    )));
                }
                Err(e) => {
                    last_error = format!("{}: {e}", self.endpoints[i]);
                    continue;
                }
            };
            let Ok(v) = serde_json::from_slice::<Value>(&bytes) else {
                let text = String::from_utf8_lossy(&bytes);
                if text.contains("CommonName of client sending a request against gateway") {
                    return Err(self.denied(format!(
                        "etcd's JSON gateway refuses a client certificate with a common name (CN `{}`), as it cannot authenticate by it; use a certificate without a CN and a user and password",
                        self.client_cn.as_deref().unwrap_or("?")
                    )));
                }
                if text.contains("HTTP request to an HTTPS server") {
                    return Err(self.unavailable(format!(
                        "{} speaks TLS; use an https:// store URL with the cluster's CA",
                        self.endpoints[i]
                    )));
                }
                if write {
                    return Err(self.outcome_unknown(format!(
                        "{} answered HTTP {status} with something that is not etcd's JSON",
                        self.endpoints[i]
                    )));
                }
                // Not etcd (a proxy's error page, another service): try another member.
                last_error = format!(
                    "{} answered HTTP {status} with something that is not etcd's JSON",
                    self.endpoints[i]
                );
                continue;
            };
            if let Some(msg) = v.get("error").or_else(|| v.get("message")) {
                let msg = msg.as_str().unwrap_or("error").to_string();
                // Authentication and permissions: checked before anything is applied.
                if (msg.contains("invalid auth token")
                    || msg.contains("revision of auth store is old"))
                    && self.login.is_some()
                    && token.is_some()
                {
                    return Ok(Answer::StaleToken(format!("{}: {msg}", self.endpoints[i])));
                }
                if let Some(detail) = self.auth_refusal(&msg) {
                    return Err(self.denied(detail));
                }
                match v.get("code").and_then(Value::as_i64) {
                    // unavailable: "no leader" is refused before anything is proposed; other
                    // reasons (timed out, leader changed) leave a write's fate unknown.
                    Some(14) if write && !msg.contains("no leader") => {
                        return Err(self.outcome_unknown(format!("{}: {msg}", self.endpoints[i])));
                    }
                    Some(14) => {
                        last_error = format!("{}: {msg}", self.endpoints[i]);
                        continue;
                    }
                    // invalid argument, out of range, resource exhausted: etcd refuses this
                    // request itself (too many operations, too large); another member would too.
                    Some(3 | 8 | 11) => {
                        return Err(Error::refused(
                            crate::error::Refusal::StoreRefused,
                            format!(
                                "{} refused the request: {msg} (nothing was changed; etcd's --max-request-bytes and --max-txn-ops bound one write)",
                                self.endpoints[i]
                            ),
                        ));
                    }
                    _ => return Err(self.unavailable(format!("{}: {msg}", self.endpoints[i]))),
                }
            }
            self.preferred
                .store(i, std::sync::atomic::Ordering::Relaxed);
            return Ok(Answer::Value(v));
        }
        if let Some(detail) = untrusted {
            return Err(Error::StoreAccess {
                store: self.url.clone(),
                access: Access::Untrusted,
                detail: format!("no member could be verified (last: {detail})"),
            });
        }
        Err(self.unavailable(format!(
            "no member could serve the request (last: {last_error}){}",
            self.hangup_hint(&last_error)
        )))
    }

    /// What a member hanging up on us may mean, for messages (TLS 1.3 servers refuse a
    /// client without a certificate after the handshake, often by just closing).
    fn hangup_hint(&self, error: &str) -> &'static str {
        let hung_up = ["disconnected", "Broken pipe", "reset by peer"]
            .iter()
            .any(|w| error.contains(w));
        match &self.tls {
            _ if !hung_up => "",
            None => "; a member that speaks TLS hangs up on clear text: if they do, use https://",
            Some(t) if t.client_cert().is_none() => {
                "; members that require a client certificate hang up without one: if they do, set CONDUCTOR_ETCD_CERT and CONDUCTOR_ETCD_KEY"
            }
            Some(_) => "",
        }
    }

    /// One key, or `None`.
    pub fn get(&self, key: &str) -> Result<Option<Kv>> {
        let v = self.call(
            "/v3/kv/range",
            &self.range_body(json!({ "key": b64(key.as_bytes()) })),
        )?;
        Ok(kvs(&v).into_iter().next())
    }

    /// Keys in `[from, to)` in key order, at most `limit` (0: no limit), and whether more
    /// remain.
    pub fn range(&self, from: &str, to: &str, limit: i64) -> Result<(Vec<Kv>, bool)> {
        let v = self.call(
            "/v3/kv/range",
            &self.range_body(json!({
                "key": b64(from.as_bytes()),
                "range_end": b64(to.as_bytes()),
                "limit": limit,
                "sort_order": "ASCEND",
                "sort_target": "KEY",
            })),
        )?;
        let more = v.get("more").and_then(Value::as_bool).unwrap_or(false);
        Ok((kvs(&v), more))
    }

    /// The last key under `prefix` that sorts at or before `key`.
    pub fn last_at_or_before(&self, prefix: &str, key: &str) -> Result<Option<Kv>> {
        let v = self.call(
            "/v3/kv/range",
            &self.range_body(json!({
                "key": b64(prefix.as_bytes()),
                "range_end": b64(format!("{key}\0").as_bytes()),
                "limit": 1,
                "sort_order": "DESCEND",
                "sort_target": "KEY",
            })),
        )?;
        Ok(kvs(&v).into_iter().next())
    }

    /// Every key under `prefix`, in key order, read in pages.
    pub fn scan<E: From<Error>>(
        &self,
        prefix: &str,
        mut f: impl FnMut(Kv) -> Result<bool, E>,
    ) -> Result<(), E> {
        let end = prefix_end(prefix);
        let mut from = prefix.to_string();
        loop {
            let (page, more) = self.range(&from, &end, 512)?;
            let Some(last) = page.last().map(|kv| kv.key.clone()) else {
                return Ok(());
            };
            for kv in page {
                if !f(kv)? {
                    return Ok(());
                }
            }
            if !more {
                return Ok(());
            }
            from = format!("{last}\0");
        }
    }

    /// Put every `(key, value)` if every `(key, mod_revision)` still holds (0: the key does not
    /// exist). `Ok(false)` when a comparison failed and nothing was written.
    pub fn txn(
        &self,
        compares: &[(String, i64)],
        puts: &[(String, Vec<u8>)],
        deletes: &[(String, String)],
    ) -> Result<bool> {
        let compare: Vec<Value> = compares
            .iter()
            .map(|(k, rev)| {
                json!({
                    "key": b64(k.as_bytes()),
                    "target": "MOD",
                    "result": "EQUAL",
                    "mod_revision": rev.to_string(),
                })
            })
            .collect();
        let success: Vec<Value> = puts
            .iter()
            .map(|(k, v)| json!({ "request_put": { "key": b64(k.as_bytes()), "value": b64(v) } }))
            .chain(deletes.iter().map(|(from, to)| {
                json!({ "request_delete_range": { "key": b64(from.as_bytes()), "range_end": b64(to.as_bytes()) } })
            }))
            .collect();
        let v = self.request(
            "/v3/kv/txn",
            &json!({ "compare": compare, "success": success }),
            true,
        )?;
        Ok(v.get("succeeded").and_then(Value::as_bool).unwrap_or(false))
    }

    /// Several keys in one request, at one revision.
    pub fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Kv>>> {
        let success: Vec<Value> = keys
            .iter()
            .map(|k| json!({ "request_range": { "key": b64(k.as_bytes()) } }))
            .collect();
        let v = self.call("/v3/kv/txn", &json!({ "success": success }))?;
        let responses = v.get("responses").and_then(Value::as_array);
        Ok((0..keys.len())
            .map(|i| {
                responses
                    .and_then(|r| r.get(i))
                    .and_then(|r| r.get("response_range"))
                    .and_then(|r| kvs(r).into_iter().next())
            })
            .collect())
    }

    /// The cluster's state, as seen from each member.
    pub fn health(&self) -> Result<Health> {
        let status = self.call("/v3/maintenance/status", &json!({}))?;
        let endpoint =
            self.endpoints[self.preferred.load(std::sync::atomic::Ordering::Relaxed)].clone();
        let id = |v: Option<&Value>| match v {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let leader_id = id(status.get("leader"));
        let list = self.call("/v3/cluster/member/list", &json!({}))?;
        let mut members = Vec::new();
        let mut leader = None;
        for m in list
            .get("members")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = m
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string();
            let urls: Vec<String> = m
                .get("clientURLs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|u| u.as_str().map(str::to_string))
                .collect();
            if leader_id.is_some() && id(m.get("ID")) == leader_id {
                leader = Some(name.clone());
            }
            let token = self.token(false)?;
            let up = urls.iter().any(|u| {
                self.post(
                    &self.agent,
                    &format!("{u}/v3/maintenance/status"),
                    token.as_deref(),
                )
                .send(&b"{}"[..])
                .is_ok_and(|r| r.status().as_u16() == 200)
            });
            members.push((format!("{name} {}", urls.join(",")), up));
        }
        Ok(Health {
            endpoint,
            version: status
                .get("version")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string(),
            revision: status
                .get("header")
                .and_then(|h| h.get("revision"))
                .and_then(num)
                .unwrap_or(0),
            leader,
            members,
        })
    }

    /// Watch every key under the prefix; `on_keys` gets the keys of each batch of changes. Blocks
    /// until the watch is established, then runs on its own thread for the life of the process,
    /// reconnecting (and calling `on_keys` with no keys, meaning "look again") when the stream
    /// breaks.
    pub fn watch(&self, on_keys: impl Fn(&[String]) + Send + 'static) -> Result<()> {
        // A member that hangs with the connection open must not stall the watcher: no byte for
        // a minute (etcd sends progress notifications when asked) means reconnect elsewhere,
        // and the caller looks again.
        let mut builder = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(1)))
            .timeout_per_read(Some(WATCH_SILENCE));
        if let Some(c) = &self.tls {
            builder = builder.tls_config(c.clone());
        }
        let agent: ureq::Agent = builder.build().into();
        // The watch thread logs in again through its own copy when its token has expired.
        let me = self.clone();
        self.token(false)?;
        let endpoints = self.endpoints.clone();
        let root = self.root();
        let body = serde_json::to_vec(&json!({
            "create_request": {
                "key": b64(root.as_bytes()),
                "range_end": b64(prefix_end(&root).as_bytes()),
                "progress_notify": true,
            }
        }))
        .expect("requests serialize");
        let open = move |i: usize| -> Option<Box<dyn BufRead + Send>> {
            let token = me.token(false).ok()?;
            let url = format!("{}/v3/watch", endpoints[i % endpoints.len()]);
            let res = me
                .post(&agent, &url, token.as_deref())
                .send(&body[..])
                .ok()?;
            if res.status().as_u16() != 200 {
                return None;
            }
            let mut reader = std::io::BufReader::new(res.into_body().into_reader());
            // The first message confirms the watch is in place.
            let mut line = String::new();
            reader.read_line(&mut line).ok()?;
            let v: Value = serde_json::from_str(&line).ok()?;
            if line.contains("auth token") || line.contains("auth store is old") {
                let _ = me.token(true);
                return None;
            }
            v.pointer("/result/created")
                .and_then(Value::as_bool)
                .filter(|c| *c)?;
            Some(Box::new(reader))
        };
        let first = self.preferred.load(std::sync::atomic::Ordering::Relaxed);
        let mut reader = (0..self.endpoints.len())
            .find_map(|k| open(first + k))
            .ok_or_else(|| self.unavailable("no member accepted a watch".into()))?;
        let n = self.endpoints.len();
        std::thread::spawn(move || {
            let mut member = first;
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => {
                        on_keys(&[]);
                        loop {
                            std::thread::sleep(Duration::from_millis(100));
                            member += 1;
                            if let Some(r) = open(member % n) {
                                reader = r;
                                on_keys(&[]);
                                break;
                            }
                        }
                    }
                    Ok(_) => {
                        let Ok(v) = serde_json::from_str::<Value>(&line) else {
                            continue;
                        };
                        let keys: Vec<String> = v
                            .pointer("/result/events")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(|e| e.pointer("/kv/key").and_then(Value::as_str))
                            .filter_map(|k| B64.decode(k).ok())
                            .filter_map(|k| String::from_utf8(k).ok())
                            .collect();
                        if !keys.is_empty() {
                            on_keys(&keys);
                        }
                    }
                }
            }
        });
        Ok(())
    }
}

/// A member's answer, or word that our token is no longer valid.
enum Answer {
    Value(Value),
    StaleToken(String),
}

impl Etcd {
    /// etcd's refusal of who we are, said for people (`None`: not an authentication error).
    fn auth_refusal(&self, msg: &str) -> Option<String> {
        let who = self.who();
        let detail = if msg.contains("permission denied") {
            format!(
                "{who} may not read or write `{}/` (etcd: permission denied)",
                self.prefix
            )
        } else if msg.contains("user name is empty") || msg.contains("user name not found") {
            format!(
                "the cluster requires authentication and {who} is not one of its users (etcd: {})",
                msg.trim_start_matches("etcdserver: ")
            )
        } else if msg.contains("authentication failed") {
            format!(
                "{who}: wrong user name or password (etcd: {})",
                msg.trim_start_matches("etcdserver: ")
            )
        } else if msg.contains("authentication is not enabled") {
            "authentication is not enabled".into()
        } else if msg.contains("invalid auth token") || msg.contains("auth store is old") {
            format!("{who}: etcd no longer accepts the token it gave")
        } else {
            return None;
        };
        Some(detail)
    }

    /// The connection's security, for `doctor`: TLS, what verified the server, who we are,
    /// and what our roles may do (asking etcd; "unknown" when the user may not read them).
    pub fn security(&self) -> SecurityReport {
        let user = self.login.as_ref().map(|l| l.user.clone());
        let token = self.token(false);
        let auth_enabled = match (&self.login, &token) {
            (Some(_), Ok(Some(_))) => Some(true),
            (Some(_), Ok(None)) => Some(false),
            _ => None,
        };
        let roles = match (&user, auth_enabled) {
            (Some(u), Some(true) | None) if token.is_ok() => self.roles(u),
            _ => None,
        };
        SecurityReport {
            tls: self.tls.is_some(),
            verified_with: self.tls.as_ref().map(|_| match &self.cacert {
                Some(p) => format!("CA {}", p.display()),
                None => "Mozilla's root CAs".into(),
            }),
            client_cn: self.client_cn.clone(),
            user,
            auth_enabled,
            roles,
            insecure: self.insecure,
        }
    }

    /// Each role of `user` with its permissions, `None` when etcd will not say.
    fn roles(&self, user: &str) -> Option<Vec<(String, Vec<String>)>> {
        let v = self
            .call("/v3/auth/user/get", &json!({ "name": user }))
            .ok()?;
        let names: Vec<String> = v
            .get("roles")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(str::to_string))
            .collect();
        let mut out = Vec::new();
        for role in names {
            let perms = match self.call("/v3/auth/role/get", &json!({ "role": role })) {
                Ok(r) => r
                    .get("perm")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(describe_perm)
                    .collect(),
                Err(_) => vec!["unknown".to_string()],
            };
            out.push((role, perms));
        }
        Some(out)
    }
}

/// `READWRITE /team/*` for a permission of a role.
fn describe_perm(p: &Value) -> String {
    let text = |k: &str| {
        p.get(k)
            .and_then(Value::as_str)
            .and_then(|s| B64.decode(s).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let kind = p.get("permType").and_then(Value::as_str).unwrap_or("READ");
    let key = text("key").unwrap_or_default();
    let range = match text("range_end") {
        None => key.clone(),
        Some(end) if end == "\0" => format!("{key} and every key after it"),
        Some(end) if end == prefix_end(&key) => format!("{key}*"),
        Some(end) => format!("[{key}, {end})"),
    };
    format!("{kind} {range}")
}

/// Whether `host` is this machine.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A TLS failure said for people (`None`: not a TLS failure).
fn tls_failure(e: &ureq::Error) -> Option<String> {
    let rustls_error = match e {
        ureq::Error::Rustls(r) => Some(r),
        ureq::Error::Io(io) => io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>()),
        ureq::Error::Tls(t) => return Some(format!("TLS: {t}")),
        _ => None,
    }?;
    use rustls::CertificateError as C;
    Some(match rustls_error {
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer => "its certificate is not signed by a CA we trust (self-signed, or the cluster's CA was not given)".into(),
            C::Expired | C::ExpiredContext { .. } => "its certificate has expired".into(),
            C::NotValidYet | C::NotValidYetContext { .. } => "its certificate is not valid yet".into(),
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                "its certificate does not name this host".into()
            }
            other => format!("its certificate was refused ({other:?})"),
        },
        rustls::Error::AlertReceived(a) => format!(
            "it refused the TLS handshake ({a:?}): it may require a client certificate (CONDUCTOR_ETCD_CERT and CONDUCTOR_ETCD_KEY)"
        ),
        rustls::Error::InvalidMessage(_) => {
            "it does not speak TLS (is it an http:// member?)".into()
        }
        other => format!("TLS failed: {other}"),
    })
}

/// Read a file of settings or credentials; a missing or unreadable one is refused input.
fn read_setting(path: &Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        Error::refused(
            Refusal::InvalidStore,
            format!("cannot read {what} `{}`: {e}", path.display()),
        )
    })
}

/// A credential file must be readable by its owner only.
fn check_private(path: &Path, what: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| {
        Error::refused(
            Refusal::InvalidStore,
            format!("cannot read {what} `{}`: {e}", path.display()),
        )
    })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(Error::refused(
            Refusal::UnsafeCredentials,
            format!(
                "{what} `{}` may be read by other users (mode {mode:o}); it must be 0600 or stricter",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// The password of `user`: CONDUCTOR_ETCD_PASSWORD, else the first line of the password file.
fn password(sec: &Security, user: &str) -> Result<Secret> {
    if let Some(p) = &sec.password {
        return Ok(p.clone());
    }
    let Some(file) = &sec.password_file else {
        return Err(Error::refused(
            Refusal::InvalidStore,
            format!(
                "the etcd user `{user}` has no password: set store_password_file (a 0600 file) or CONDUCTOR_ETCD_PASSWORD"
            ),
        ));
    };
    check_private(file, "the password file")?;
    let bytes = read_setting(file, "the password file")?;
    let text = String::from_utf8(bytes).map_err(|_| {
        Error::refused(
            Refusal::InvalidStore,
            format!("the password file `{}` is not UTF-8 text", file.display()),
        )
    })?;
    Ok(Secret(
        text.lines()
            .next()
            .unwrap_or_default()
            .trim_end_matches('\r')
            .to_string(),
    ))
}

/// The TLS settings of an `https://` store and the client certificate's common name.
fn tls_config(sec: &Security) -> Result<(ureq::tls::TlsConfig, Option<String>)> {
    use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};
    let bad = |msg: String| Error::refused(Refusal::InvalidStore, msg);
    let certs_in = |path: &Path, what: &str| -> Result<Vec<Certificate<'static>>> {
        let pem = read_setting(path, what)?;
        let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if certs.is_empty() {
            return Err(bad(format!(
                "{what} `{}` holds no PEM certificate",
                path.display()
            )));
        }
        Ok(certs)
    };
    let mut builder = TlsConfig::builder().provider(ureq::tls::TlsProvider::Rustls);
    if let Some(ca) = &sec.cacert {
        builder = builder.root_certs(RootCerts::new_with_certs(&certs_in(ca, "the CA file")?));
    } else {
        builder = builder.root_certs(RootCerts::WebPki);
    }
    let mut cn = None;
    match (&sec.cert, &sec.key) {
        (Some(cert), Some(key)) => {
            let chain = certs_in(cert, "the client certificate")?;
            check_private(key, "the client key")?;
            let pem = read_setting(key, "the client key")?;
            let key = PrivateKey::from_pem(&pem).map_err(|_| {
                bad(format!(
                    "the client key `{}` holds no PEM private key",
                    key.display()
                ))
            })?;
            cn = common_name(chain[0].der());
            builder = builder.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
        }
        (None, None) => {}
        _ => {
            return Err(bad(
                "a client certificate needs both CONDUCTOR_ETCD_CERT and CONDUCTOR_ETCD_KEY (store_cert and store_key)".into(),
            ));
        }
    }
    Ok((builder.build(), cn))
}

/// The subject's common name of a DER certificate (etcd's gateway refuses a client certificate
/// that has one; said in messages and by `doctor`): Certificate → TBSCertificate → [version] serial signature issuer validity subject.
fn common_name(der: &[u8]) -> Option<String> {
    /// One DER element at the start of `b`: (tag, contents, the rest).
    fn element(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, b) = b.split_first()?;
        let (&first, mut b) = b.split_first()?;
        let len = if first < 0x80 {
            first as usize
        } else {
            let n = (first & 0x7f) as usize;
            if n == 0 || n > 4 || b.len() < n {
                return None;
            }
            let len = b[..n].iter().fold(0usize, |a, &x| (a << 8) | x as usize);
            b = &b[n..];
            len
        };
        (b.len() >= len).then(|| (tag, &b[..len], &b[len..]))
    }
    let (_, cert, _) = element(der)?;
    let (_, mut tbs, _) = element(cert)?;
    let mut fields = Vec::new();
    while !tbs.is_empty() {
        let (tag, body, rest) = element(tbs)?;
        if tag != 0xa0 {
            fields.push(body);
        }
        tbs = rest;
    }
    // serial, signature, issuer, validity, subject
    let mut subject = *fields.get(4)?;
    while !subject.is_empty() {
        let (_, set, rest) = element(subject)?;
        let (_, attr, _) = element(set)?;
        let (_, oid, value) = element(attr)?;
        if oid == [0x55, 0x04, 0x03] {
            let (_, name, _) = element(value)?;
            return String::from_utf8(name.to_vec()).ok();
        }
        subject = rest;
    }
    None
}

fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

/// The first key after every key that starts with `prefix`.
pub fn prefix_end(prefix: &str) -> String {
    let mut bytes = prefix.as_bytes().to_vec();
    while let Some(last) = bytes.pop() {
        if last < 0x7f {
            bytes.push(last + 1);
            return String::from_utf8(bytes).expect("ascii prefix");
        }
    }
    "\0".to_string()
}

/// etcd's JSON writes 64-bit numbers as strings.
fn num(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

fn kvs(v: &Value) -> Vec<Kv> {
    v.get("kvs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|kv| {
            let key = B64.decode(kv.get("key")?.as_str()?).ok()?;
            let value = match kv.get("value").and_then(Value::as_str) {
                Some(s) => B64.decode(s).ok()?,
                None => Vec::new(),
            };
            Some(Kv {
                key: String::from_utf8(key).ok()?,
                value,
                mod_revision: kv.get("mod_revision").and_then(num).unwrap_or(0),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_store_urls() {
        let insecure = Security {
            insecure: true,
            ..Default::default()
        };
        let e = Etcd::open("etcd://127.0.0.1:2379,10.0.0.2:2379/team", &insecure).unwrap();
        assert_eq!(
            e.endpoints,
            ["http://127.0.0.1:2379", "http://10.0.0.2:2379"]
        );
        assert_eq!(e.doc_key("status.json"), "/team/doc/status.json");
        let e = Etcd::parse("etcd://localhost:2379").unwrap();
        assert_eq!(e.journal_key(7), "/conductor/journal/00000000000000000007");
        for bad in [
            "ftp://x:1",
            "https://x:1,http://y:1",
            "etcd://127.0.0.1:1,https://127.0.0.1:2",
            "etcd://x",
            "etcd://x:notaport",
            "etcd://:1",
            "etcd://x:1/a b",
        ] {
            let err = Etcd::parse(bad).err().expect(bad);
            assert_eq!(err.reason(), "invalid_store", "{bad}");
        }
        let e = Etcd::parse("https://a.example:2379,https://[::1]:2379/team").unwrap();
        assert_eq!(
            e.endpoints,
            ["https://a.example:2379", "https://[::1]:2379"]
        );
        assert_eq!(e.root(), "/team/");
        let err = Etcd::parse("https://team:hunter2@h:1/x").err().unwrap();
        assert_eq!(err.reason(), "invalid_store");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let e = Etcd::parse("http://localhost:2379,127.0.0.2:2379").unwrap();
        assert!(e.plaintext_warning().is_none());
        let err = Etcd::parse("http://10.0.0.1:2379").err().unwrap();
        assert_eq!(err.reason(), "insecure_store");
        let e = Etcd::open("etcd://10.0.0.1:2379", &insecure).unwrap();
        assert!(e.plaintext_warning().is_some());
    }

    #[test]
    fn secrets_do_not_print() {
        let s = Secret::new("hunter2".into());
        assert_eq!(format!("{s:?}"), "<secret>");
    }

    #[test]
    fn common_name_of_a_certificate() {
        // A DER certificate's skeleton: Certificate { TBS { [0] version, serial, signature,
        // issuer, validity, subject { SET { SEQ { OID 2.5.4.3, UTF8 "team" } } } } }.
        fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
            let mut v = vec![tag, body.len() as u8];
            v.extend_from_slice(body);
            v
        }
        let cn = tlv(
            0x30,
            &[tlv(0x06, &[0x55, 0x04, 0x03]), tlv(0x0c, b"team")].concat(),
        );
        let subject = tlv(0x30, &tlv(0x31, &cn));
        let tbs = tlv(
            0x30,
            &[
                tlv(0xa0, &tlv(0x02, &[2])),
                tlv(0x02, &[1]),
                tlv(0x30, &[]),
                tlv(0x30, &[]),
                tlv(0x30, &[]),
                subject,
            ]
            .concat(),
        );
        let cert = tlv(0x30, &tbs);
        assert_eq!(common_name(&cert).as_deref(), Some("team"));
        assert_eq!(common_name(&cert[..5]), None);
    }

    #[test]
    fn prefix_end_is_the_next_key() {
        assert_eq!(prefix_end("/c/journal/"), "/c/journal0");
        assert_eq!(prefix_end("a"), "b");
    }
}
