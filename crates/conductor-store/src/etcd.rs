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
//! - `<prefix>/meta/seq`: `{"event":N,"line":M}`, the last numbers given.
//!
//! Every request carries `Grpc-Metadata-hasleader: true`, so a member that has lost its leader
//! answers "no leader" at once instead of after etcd's request timeout: a command run without
//! quorum fails fast (`store_unavailable`, exit 11) having changed nothing.

use std::io::BufRead;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "/conductor";

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

/// A connection to an etcd cluster under one key prefix.
pub struct Etcd {
    /// `http://host:port` of each member given.
    endpoints: Vec<String>,
    prefix: String,
    /// The URL as given, for messages.
    url: String,
    agent: ureq::Agent,
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
    /// Parse `etcd://HOST:PORT[,HOST:PORT...][/PREFIX]`.
    pub fn parse(url: &str) -> Result<Etcd> {
        let bad = |why: &str| {
            Error::refused(
                crate::error::Refusal::InvalidStore,
                format!(
                    "invalid store `{url}`: {why} (expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX])"
                ),
            )
        };
        let rest = url
            .strip_prefix("etcd://")
            .ok_or_else(|| bad("only etcd:// stores are supported besides the file home"))?;
        let (hosts, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, DEFAULT_PREFIX),
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
        for h in hosts.split(',') {
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
            endpoints.push(format!("http://{host}:{port}"));
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(1)))
            .timeout_global(Some(request_timeout()))
            .build()
            .into();
        Ok(Etcd {
            endpoints,
            prefix: prefix.to_string(),
            url: url.to_string(),
            agent,
            preferred: std::sync::atomic::AtomicUsize::new(0),
            snapshot: std::sync::Mutex::new(None),
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

    fn request(&self, path: &str, body: &Value, write: bool) -> Result<Value> {
        let body = serde_json::to_vec(body).expect("requests serialize");
        let n = self.endpoints.len();
        let first = self.preferred.load(std::sync::atomic::Ordering::Relaxed);
        let mut last_error = String::new();
        for k in 0..n {
            let i = (first + k) % n;
            let url = format!("{}{path}", self.endpoints[i]);
            let res = self
                .agent
                .post(&url)
                .header("content-type", "application/json")
                .header("grpc-metadata-hasleader", "true")
                .send(&body[..]);
            let mut res = match res {
                Ok(r) => r,
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
                    return Err(self.outcome_unknown(format!("{}: {e}", self.endpoints[i])));
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
                    return Err(self.outcome_unknown(format!("{}: {e}", self.endpoints[i])));
                }
                Err(e) => {
                    last_error = format!("{}: {e}", self.endpoints[i]);
                    continue;
                }
            };
            let Ok(v) = serde_json::from_slice::<Value>(&bytes) else {
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
            return Ok(v);
        }
        Err(self.unavailable(format!(
            "no member could serve the request (last: {last_error})"
        )))
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
            let up = urls.iter().any(|u| {
                self.agent
                    .post(&format!("{u}/v3/maintenance/status"))
                    .header("content-type", "application/json")
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
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(1)))
            .timeout_per_read(Some(WATCH_SILENCE))
            .build()
            .into();
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
            let res = agent
                .post(&format!("{}/v3/watch", endpoints[i % endpoints.len()]))
                .header("content-type", "application/json")
                .header("grpc-metadata-hasleader", "true")
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
        let e = Etcd::parse("etcd://127.0.0.1:2379,10.0.0.2:2379/team").unwrap();
        assert_eq!(
            e.endpoints,
            ["http://127.0.0.1:2379", "http://10.0.0.2:2379"]
        );
        assert_eq!(e.doc_key("status.json"), "/team/doc/status.json");
        let e = Etcd::parse("etcd://localhost:2379").unwrap();
        assert_eq!(e.journal_key(7), "/conductor/journal/00000000000000000007");
        for bad in [
            "http://x:1",
            "etcd://x",
            "etcd://x:notaport",
            "etcd://:1",
            "etcd://x:1/a b",
        ] {
            let err = Etcd::parse(bad).err().expect(bad);
            assert_eq!(err.reason(), "invalid_store", "{bad}");
        }
    }

    #[test]
    fn prefix_end_is_the_next_key() {
        assert_eq!(prefix_end("/c/journal/"), "/c/journal0");
        assert_eq!(prefix_end("a"), "b");
    }
}
