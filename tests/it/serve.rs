//! `conductor serve`: Canopy's agent API and the dashboard, over real HTTP against a running
//! server (the real binary on a loopback port), with a plain std TcpStream client. The browser
//! test drives Debian's chromium through Selenium (tests/it/serve_browser.py).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{TestEnv, wait_until};

/// A running `conductor serve`, stopped (SIGTERM, exit 0) on drop.
pub(crate) struct Server {
    child: Option<Child>,
    stderr: std::path::PathBuf,
    /// Held open: serve stops when its stdout closes.
    _stdout: BufReader<std::process::ChildStdout>,
    addr: String,
    pub(crate) token: String,
}

impl Server {
    pub(crate) fn start(env: &TestEnv) -> Server {
        Server::start_with(env, &[])
    }

    /// [`Server::start`] with more `serve` options.
    fn start_with(env: &TestEnv, extra: &[&str]) -> Server {
        let mut c = env.cmd();
        let err = std::fs::File::create(env.root.path().join("serve.stderr")).unwrap();
        c.args(["--json", "serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err));
        let mut child = c.spawn().expect("spawn conductor serve");
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        let url = v["listening"].as_str().unwrap();
        let dash = v["dashboard"].as_str().unwrap();
        Server {
            child: Some(child),
            stderr: env.root.path().join("serve.stderr"),
            _stdout: stdout,
            addr: url.trim_start_matches("http://").to_string(),
            token: dash.rsplit_once("token=").unwrap().1.to_string(),
        }
    }

    /// One request; returns status, headers (lowercased names) and body.
    pub(crate) fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Resp {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        s.write_all(body).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        let text = String::from_utf8_lossy(&out).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status: u16 = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v == "chunked");
        let body = if chunked {
            unchunk(body)
        } else {
            body.to_string()
        };
        Resp {
            status,
            headers,
            body,
        }
    }

    fn api(&self, method: &str, path: &str, key: &str, body: Option<Value>) -> Resp {
        let b = body.map(|b| b.to_string()).unwrap_or_default();
        self.raw(
            method,
            path,
            &[("X-API-Key", key), ("Content-Type", "application/json")],
            b.as_bytes(),
        )
    }
}

/// Decode a chunked body.
fn unchunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap();
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let st = c.wait().unwrap();
            let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
            if !err.is_empty() {
                eprintln!("conductor serve's stderr:\n{err}");
            }
            if !std::thread::panicking() {
                assert_eq!(st.code(), Some(0), "serve exits 0 on SIGTERM");
            }
        }
    }
}

#[derive(Debug)]
pub(crate) struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Resp {
    #[track_caller]
    fn json(&self) -> Value {
        let ct = self.header("content-type").unwrap_or_default();
        assert!(ct.starts_with("application/json"), "not JSON: {self:?}");
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }
    #[track_caller]
    pub(crate) fn expect(&self, status: u16) -> Value {
        assert_eq!(self.status, status, "{self:?}");
        self.json()
    }
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

fn setup() -> TestEnv {
    let env = TestEnv::new();
    env.run(&["agent", "register", "scout", "--watch", "ops"])
        .code(0);
    env.run(&["agent", "register", "lead", "--watch", "ops"])
        .code(0);
    env
}

fn key(env: &TestEnv, agent: &str) -> String {
    let r = env.run(&["--json", "agent", "key", "create", agent]);
    r.code(0);
    r.json()["key"].as_str().unwrap().to_string()
}

#[test]
fn keys_are_hashed_in_a_private_file_and_revocable() {
    let env = setup();
    let k = key(&env, "scout");
    assert!(k.starts_with("cdk_"), "{k}");
    let f = env.home_file("runtime-api-keys.json");
    let text = std::fs::read_to_string(&f).unwrap();
    assert!(!text.contains(&k), "the key itself is never stored");
    assert_eq!(
        std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let list = env.run(&["--json", "agent", "key", "list"]).json();
    let id = list["keys"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(list["keys"][0]["agent"], "scout");
    assert!(!list.to_string().contains(&k));
    // An unknown agent is refused and nothing is written.
    let before = env.snapshot();
    let r = env.run(&["--json", "agent", "key", "create", "ghost"]);
    r.code(2);
    assert_eq!(env.snapshot(), before);
    let srv = Server::start(&env);
    srv.api("GET", "/api/v1/agents/me/heartbeat", &k, None)
        .expect(200);
    env.run(&["agent", "key", "revoke", &id]).code(0);
    let r = srv
        .api("GET", "/api/v1/agents/me/heartbeat", &k, None)
        .expect(401);
    assert_eq!(r["reason"], "unauthorized");
    env.run(&["agent", "key", "revoke", &id]).code(2);
}

#[test]
fn refuses_other_addresses_without_the_flag_and_a_key() {
    let env = setup();
    let r = env.run(&["--json", "serve", "--listen", "0.0.0.0:0"]);
    r.code(2);
    assert_eq!(r.json()["reason"], "remote_refused");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("--allow-remote")
    );
    let r = env.run(&["--json", "serve", "--listen", "0.0.0.0:0", "--allow-remote"]);
    r.code(2);
    assert!(r.json()["message"].as_str().unwrap().contains("API key"));
    let r = env.run(&["--json", "serve", "--listen", "not an address"]);
    r.code(2);
    // With the flag and a key it serves (on every address, so on loopback too).
    key(&env, "scout");
    let mut c = env.cmd();
    c.args(["--json", "serve", "--listen", "0.0.0.0:0", "--allow-remote"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert!(
        v["listening"]
            .as_str()
            .unwrap()
            .starts_with("http://0.0.0.0:")
    );
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn every_endpoint_with_bad_keys_bad_bodies_and_unknown_paths() {
    let env = setup();
    let scout = key(&env, "scout");
    let lead = key(&env, "lead");
    let srv = Server::start(&env);
    let hb = "/api/v1/agents/me/heartbeat";

    // Auth: missing, wrong, for an agent that is gone.
    for k in ["", "cdk_00000000_0000", "nonsense"] {
        let r = srv.api("GET", hb, k, None).expect(401);
        assert_eq!(r["reason"], "unauthorized");
        assert!(r["error"].is_string());
    }
    // Unknown paths and methods: JSON, never HTML, whatever the key.
    for p in [
        "/api/v1/nope",
        "/api/v2/agents/me/inbox",
        "/api",
        "/favicon.ico",
        "/etc/passwd",
    ] {
        let r = srv.api("GET", p, &scout, None).expect(404);
        assert_eq!(r["reason"], "not_found", "{p}");
    }
    let r = srv
        .api("DELETE", "/api/v1/agents/me/inbox", &scout, None)
        .expect(405);
    assert_eq!(r["reason"], "method_not_allowed");
    srv.api("GET", "/api/v1/%ZZ", &scout, None).expect(400);

    // Heartbeat.
    let h = srv.api("GET", hb, &scout, None).expect(200);
    assert_eq!(h["pending_inbox"], 0);
    assert_eq!(h["unacked_mentions"], 0);
    assert!(h["poll_hint_seconds"].as_u64().unwrap() > 0);
    let seq0 = h["workspace_event_seq"].as_u64().unwrap();
    assert!(
        env.home_file("runtime/agents/scout/heartbeat.json")
            .exists()
    );

    // Post as lead: scout gets a mention and an inbox item.
    let before = env.snapshot();
    for (body, field) in [
        (json!({}), "content"),
        (json!({"content": 3}), "content"),
        (json!({"content": "  "}), "content"),
        (json!({"content": "x", "priority": "asap"}), "priority"),
        (json!({"content": "x", "reply_to": 7}), "reply_to"),
    ] {
        let r = srv
            .api("POST", "/api/v1/channels/ops/messages", &lead, Some(body))
            .expect(400);
        assert_eq!(r["field"], field);
    }
    let r = srv.raw(
        "POST",
        "/api/v1/channels/ops/messages",
        &[("X-API-Key", &lead)],
        b"{not json",
    );
    assert_eq!(r.expect(400)["reason"], "invalid_body");
    let r = srv.raw(
        "POST",
        "/api/v1/channels/ops/messages",
        &[("X-API-Key", &lead)],
        b"[1]",
    );
    r.expect(400);
    srv.api(
        "POST",
        "/api/v1/channels/..%2Fx/messages",
        &lead,
        Some(json!({"content": "x"})),
    )
    .expect(400);
    assert_eq!(
        env.snapshot(),
        before,
        "bad requests leave every file byte-identical"
    );

    let m = srv
        .api(
            "POST",
            "/api/v1/channels/ops/messages",
            &lead,
            Some(json!({"content": "@scout please check the build"})),
        )
        .expect(201);
    let msg = m["message"]["id"].as_str().unwrap().to_string();
    assert_eq!(m["message"]["user_id"], "lead");
    let h = srv.api("GET", hb, &scout, None).expect(200);
    assert_eq!(h["pending_inbox"], 1);
    assert_eq!(h["unacked_mentions"], 1);
    assert!(h["workspace_event_seq"].as_u64().unwrap() > seq0);

    // Messages: list, one, unknown.
    let l = srv
        .api(
            "GET",
            "/api/v1/channels/ops/messages?limit=10",
            &scout,
            None,
        )
        .expect(200);
    let got = &l["messages"][0];
    for f in ["id", "channel_id", "user_id", "content", "created_at"] {
        assert!(!got[f].is_null(), "{f} in {got}");
    }
    assert_eq!(got["content"], "@scout please check the build");
    let one = srv
        .api(
            "GET",
            &format!("/api/v1/channels/ops/messages/{msg}"),
            &scout,
            None,
        )
        .expect(200);
    assert_eq!(one["message"]["id"], msg.as_str());
    srv.api(
        "GET",
        "/api/v1/channels/ops/messages/msg-999999",
        &scout,
        None,
    )
    .expect(404);
    srv.api(
        "GET",
        &format!("/api/v1/channels/other/messages/{msg}"),
        &scout,
        None,
    )
    .expect(404);
    srv.api("GET", "/api/v1/channels/nowhere/messages", &scout, None)
        .expect(404);
    srv.api("GET", "/api/v1/channels/ops/messages?limit=0", &scout, None)
        .expect(400);

    // The agent's feed: Canopy's item fields, types comma-joined or repeated, paging.
    let ev = srv
        .api(
            "GET",
            "/api/v1/agents/me/events?after_seq=0&limit=100",
            &scout,
            None,
        )
        .expect(200);
    let types: Vec<&str> = ev["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["event_type"].as_str().unwrap())
        .collect();
    assert!(
        types.contains(&"mention.created") && types.contains(&"inbox.item.created"),
        "{types:?}"
    );
    for f in ["seq", "event_id", "event_type", "created_at", "payload"] {
        assert!(!ev["items"][0][f].is_null(), "{f}");
    }
    assert_eq!(ev["has_more"], false);
    for q in [
        "types=mention.created,inbox.item.created",
        "types=mention.created&types=inbox.item.created",
    ] {
        let e = srv
            .api(
                "GET",
                &format!("/api/v1/agents/me/events?after_seq=0&{q}"),
                &scout,
                None,
            )
            .expect(200);
        assert_eq!(e["items"].as_array().unwrap().len(), 2, "{q}: {e}");
    }
    let p1 = srv
        .api(
            "GET",
            "/api/v1/agents/me/events?after_seq=0&limit=1",
            &scout,
            None,
        )
        .expect(200);
    assert_eq!(p1["has_more"], true);
    let next = p1["next_after_seq"].as_u64().unwrap();
    assert_eq!(next, p1["items"][0]["seq"].as_u64().unwrap());
    let p2 = srv
        .api(
            "GET",
            &format!("/api/v1/agents/me/events?after_seq={next}&limit=100"),
            &scout,
            None,
        )
        .expect(200);
    assert!(p2["items"][0]["seq"].as_u64().unwrap() > next);
    for q in ["limit=0", "limit=abc", "limit=100000", "after_seq=-1"] {
        let r = srv
            .api(
                "GET",
                &format!("/api/v1/agents/me/events?{q}"),
                &scout,
                None,
            )
            .expect(400);
        assert_eq!(r["reason"], "invalid_input", "{q}");
    }
    // The global feed has everything, the lead's own post included.
    let g = srv
        .api(
            "GET",
            "/api/v1/events?after_seq=0&types=channel.message.created",
            &lead,
            None,
        )
        .expect(200);
    assert_eq!(g["items"].as_array().unwrap().len(), 1);
    assert_eq!(g["items"][0]["message_id"], msg.as_str());

    // Inbox.
    let ib = srv
        .api("GET", "/api/v1/agents/me/inbox?limit=10", &scout, None)
        .expect(200);
    let item = ib["items"][0].clone();
    for f in ["id", "status", "trigger_type", "source_type", "source_id"] {
        assert!(!item[f].is_null(), "{f}");
    }
    assert_eq!(item["trigger_type"], "mention");
    let id = item["id"].as_str().unwrap().to_string();
    assert_eq!(
        srv.api("GET", "/api/v1/agents/me/inbox", &lead, None)
            .expect(200)["items"],
        json!([])
    );
    let mention = env.run(&["--json", "mentions", "--agent", "scout"]).json()["mentions"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Mention claims: see, take, conflict, release.
    let mc = "/api/v1/mentions/claim";
    let see = srv
        .api("GET", &format!("{mc}?mention_id={mention}"), &scout, None)
        .expect(200);
    assert_eq!(see["claimed"], false);
    srv.api("GET", mc, &scout, None).expect(400);
    srv.api("GET", &format!("{mc}?mention_id=men-999999"), &scout, None)
        .expect(404);
    // Canopy's server clamps the TTL to 15..1800 s, and takes exactly one way to name it.
    let r = srv
        .api(
            "POST",
            mc,
            &scout,
            Some(json!({"mention_id": mention, "ttl_seconds": 5})),
        )
        .expect(200);
    assert_eq!(r["claim"]["ttl_seconds"], 15);
    srv.api(
        "POST",
        mc,
        &scout,
        Some(json!({"mention_id": mention, "inbox_id": "inb-1"})),
    )
    .expect(400);
    let m = &env.run(&["--json", "mentions", "--agent", "scout"]).json()["mentions"][0];
    let by_source = srv
        .api(
            "GET",
            &format!(
                "{mc}?source_type={}&source_id={}",
                m["source_type"].as_str().unwrap(),
                m["source_id"].as_str().unwrap()
            ),
            &scout,
            None,
        )
        .expect(200);
    assert_eq!(by_source["mention_id"], mention.as_str());
    assert_eq!(by_source["mine"], true);
    srv.api("DELETE", mc, &scout, Some(json!({"mention_id": mention})))
        .expect(200);
    let got = srv
        .api(
            "POST",
            mc,
            &scout,
            Some(json!({"mention_id": mention, "ttl_seconds": 60})),
        )
        .expect(200);
    assert_eq!(got["claim"]["agent"], "scout");
    let c = srv.api("POST", mc, &lead, Some(json!({"mention_id": mention})));
    let cj = c.expect(409);
    assert_eq!(cj["holder"], "scout");
    assert!(cj["retry_after_seconds"].as_u64().unwrap() > 0);
    assert!(c.header("retry-after").is_some());
    let see = srv
        .api("GET", &format!("{mc}?mention_id={mention}"), &lead, None)
        .expect(200);
    assert_eq!(see["holder"], "scout");
    srv.api("DELETE", &format!("{mc}?mention_id={mention}"), &lead, None)
        .expect(409);
    srv.api("DELETE", mc, &scout, Some(json!({"mention_id": mention})))
        .expect(200);
    let see = srv
        .api("GET", &format!("{mc}?mention_id={mention}"), &scout, None)
        .expect(200);
    assert_eq!(see["claimed"], false);

    // PATCH one item: bad bodies (nothing changes), seen, completed, gone.
    let path = format!("/api/v1/agents/me/inbox/{id}");
    let before = env.snapshot();
    for (body, field) in [
        (json!({}), "status"),
        (json!({"status": "done"}), "status"),
        (json!({"status": "expired"}), "status"),
        (json!({"status": "completed"}), "completion_ref"),
        (
            json!({"status": "completed", "completion_ref": {}}),
            "completion_ref",
        ),
        (
            json!({"status": "completed", "completion_ref": "msg-1"}),
            "completion_ref",
        ),
    ] {
        let r = srv.api("PATCH", &path, &scout, Some(body)).expect(400);
        assert_eq!(r["field"], field);
    }
    // Another agent cannot touch it.
    srv.api("PATCH", &path, &lead, Some(json!({"status": "seen"})))
        .expect(404);
    assert_eq!(env.snapshot(), before);
    let s = srv
        .api("PATCH", &path, &scout, Some(json!({"status": "seen"})))
        .expect(200);
    assert_eq!(s["success"], true);
    assert_eq!(s["item"]["status"], "seen");
    let d = srv
        .api(
            "PATCH",
            &path,
            &scout,
            Some(json!({"status": "completed", "completion_ref": {"post_id": msg}})),
        )
        .expect(200);
    assert_eq!(d["item"]["status"], "completed");
    assert_eq!(d["item"]["completion_ref"]["post_id"], msg.as_str());
    srv.api("PATCH", &path, &scout, Some(json!({"status": "seen"})))
        .expect(404);

    // Batch PATCH: all or nothing.
    for n in 0..2 {
        srv.api(
            "POST",
            "/api/v1/channels/ops/messages",
            &lead,
            Some(json!({"content": format!("@scout task {n}")})),
        )
        .expect(201);
    }
    let ids: Vec<String> = srv
        .api("GET", "/api/v1/agents/me/inbox", &scout, None)
        .expect(200)["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2);
    let before = env.snapshot();
    let mut with_unknown = ids.clone();
    with_unknown.push("inb-999999".into());
    srv.api(
        "PATCH",
        "/api/v1/agents/me/inbox",
        &scout,
        Some(json!({"ids": with_unknown, "status": "skipped"})),
    )
    .expect(404);
    srv.api(
        "PATCH",
        "/api/v1/agents/me/inbox",
        &scout,
        Some(json!({"status": "skipped"})),
    )
    .expect(400);
    srv.api(
        "PATCH",
        "/api/v1/agents/me/inbox",
        &scout,
        Some(json!({"ids": [], "status": "skipped"})),
    )
    .expect(400);
    srv.api(
        "PATCH",
        "/api/v1/agents/me/inbox",
        &scout,
        Some(json!({"items": [{"id": ids[0]}]})),
    )
    .expect(400);
    assert_eq!(env.snapshot(), before, "a failed batch changes nothing");
    let b = srv
        .api(
            "PATCH",
            "/api/v1/agents/me/inbox",
            &scout,
            Some(json!({"items": [{"id": ids[0], "status": "skipped"},
                                  {"id": ids[1], "status": "completed", "completion_ref": {"note": "done"}}]})),
        )
        .expect(200);
    assert_eq!(b["updated"], 2);
    let h = srv.api("GET", hb, &scout, None).expect(200);
    assert_eq!(h["pending_inbox"], 0);
}

/// Read SSE lines until `pred` holds for an `id:` (or `event:`) line, within `secs`.
fn sse_until(s: &mut BufReader<TcpStream>, secs: f64, pred: impl Fn(&str) -> bool) -> Vec<String> {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut seen = Vec::new();
    while Instant::now() < end {
        let mut l = String::new();
        match s.read_line(&mut l) {
            Ok(0) => break,
            Ok(_) => {
                let l = l.trim_end().to_string();
                let hit = pred(&l);
                seen.push(l);
                if hit {
                    return seen;
                }
            }
            Err(_) => continue,
        }
    }
    panic!("no matching line within {secs} s; got {seen:?}");
}

fn sse(srv: &Server, cookie: &str, extra: &str) -> BufReader<TcpStream> {
    let mut s = TcpStream::connect(&srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    write!(
        s,
        "GET /dashboard/events HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n{extra}\r\n"
    )
    .unwrap();
    BufReader::new(s)
}

#[test]
fn dashboard_token_cookie_state_and_live_events_resume() {
    let env = setup();
    let srv = Server::start(&env);
    // Without the cookie: 401 everywhere; a wrong token gets no cookie.
    for p in ["/", "/dashboard/state", "/dashboard/events"] {
        srv.raw("GET", p, &[], b"").expect(401);
    }
    let r = srv.raw("GET", "/?token=wrong", &[], b"");
    assert_eq!(r.status, 401);
    assert!(r.header("set-cookie").is_none());
    srv.raw("GET", "/nope", &[], b"").expect(404);
    let r = srv.raw("GET", &format!("/?token={}", srv.token), &[], b"");
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location").as_deref(), Some("/"));
    let set = r.header("set-cookie").unwrap();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_string();
    assert!(!cookie.contains(&srv.token), "the cookie is not the token");
    let page = srv.raw("GET", "/", &[("Cookie", &cookie)], b"");
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    for panel in [
        "Instances",
        "Agents",
        "Workflow sessions",
        "Queue",
        "EventSource",
    ] {
        assert!(page.body.contains(panel), "{panel}");
    }
    assert!(
        !page.body.contains("http://") && !page.body.contains("https://"),
        "no CDN"
    );
    let st = srv
        .raw("GET", "/dashboard/state", &[("Cookie", &cookie)], b"")
        .expect(200);
    assert_eq!(st["agents"].as_array().unwrap().len(), 2);
    let seq = st["seq"].as_u64().unwrap();

    // Live: a post from the CLI arrives as an event whose id is its journal seq.
    let mut s = sse(&srv, &cookie, &format!("Last-Event-ID: {seq}\r\n"));
    sse_until(&mut s, 5.0, |l| l.starts_with(": resuming"));
    let t = Instant::now();
    env.run(&["post", "ops", "@scout hello", "--as", "ana"])
        .code(0);
    let lines = sse_until(&mut s, 5.0, |l| {
        l.starts_with("data:") && l.contains("channel.message.created")
    });
    assert!(t.elapsed() < Duration::from_secs(5));
    let ids: Vec<u64> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(ids[0], seq + 1, "{lines:?}");
    let last = env
        .run(&["--json", "events", "--after", "0", "--limit", "1000"])
        .json()["next_after_seq"]
        .as_u64()
        .unwrap();
    // A reconnect resumes after Last-Event-ID: the events after it, again.
    let mut s2 = sse(&srv, &cookie, &format!("Last-Event-ID: {seq}\r\n"));
    let again = sse_until(&mut s2, 5.0, |l| l == format!("id: {last}"));
    assert!(again.contains(&format!("id: {}", seq + 1)));
    // Ahead of the journal (it was reset) or garbled: the page is told to reload.
    for bad in [format!("{}", last + 50), "x".to_string()] {
        let mut s3 = sse(&srv, &cookie, &format!("Last-Event-ID: {bad}\r\n"));
        sse_until(&mut s3, 5.0, |l| l == "event: reload");
    }
}

#[test]
fn serve_token_is_the_dashboards_token() {
    let env = setup();
    let mine = "my-own-dashboard-token-0123";
    let srv = Server::start_with(&env, &["--token", mine]);
    assert_eq!(srv.token, mine, "the dashboard URL carries the given token");
    let r = srv.raw("GET", &format!("/?token={mine}"), &[], b"");
    assert_eq!(r.status, 303, "the given token opens the dashboard");
    assert!(r.header("set-cookie").is_some());
}

#[test]
fn dashboard_page_behind_by_more_than_the_window_reloads() {
    let env = setup();
    // Each post addressing ten agents writes 21 events (message, 10 mentions, 10 items).
    let names: Vec<String> = (0..10).map(|n| format!("a{n}")).collect();
    for n in &names {
        env.run(&["agent", "register", n]).code(0);
    }
    let text = names
        .iter()
        .map(|n| format!("@{n}"))
        .collect::<Vec<_>>()
        .join(" ");
    let srv = Server::start(&env);
    let r = srv.raw("GET", &format!("/?token={}", srv.token), &[], b"");
    let cookie = r
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let first = srv
        .raw("GET", "/dashboard/state", &[("Cookie", &cookie)], b"")
        .expect(200)["seq"]
        .as_u64()
        .unwrap();
    for _ in 0..50 {
        env.run(&["post", "ops", &text, "--as", "ana"]).code(0);
    }
    let seq = srv
        .raw("GET", "/dashboard/state", &[("Cookie", &cookie)], b"")
        .expect(200)["seq"]
        .as_u64()
        .unwrap();
    assert!(seq > first + 1000, "{seq}");
    // Within the window it replays; past it, the page reloads.
    let mut near = sse(&srv, &cookie, &format!("Last-Event-ID: {}\r\n", seq - 500));
    sse_until(&mut near, 5.0, |l| l == format!("id: {}", seq - 499));
    let mut far = sse(&srv, &cookie, &format!("Last-Event-ID: {first}\r\n"));
    sse_until(&mut far, 5.0, |l| l == "event: reload");
}

#[test]
fn end_to_end_a_canopy_client_posts_and_conductors_agent_run_completes_it() {
    let env = setup();
    let lead = key(&env, "lead");
    let scout = key(&env, "scout");
    let worker = env.dir("bin").join("worker.sh");
    std::fs::write(
        &worker,
        "#!/bin/sh\ncat >/dev/null\nprintf '[result]\\nchecked %s\\n[/result]\\n[completion]\\nbuild is green\\n[/completion]\\n' \"$CONDUCTOR_ITEM_ID\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&worker, std::fs::Permissions::from_mode(0o755)).unwrap();
    let srv = Server::start(&env);
    let mut c = env.cmd();
    c.args([
        "-q",
        "agent",
        "run",
        "scout",
        "--exec",
        worker.to_str().unwrap(),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut run = c.spawn().unwrap();
    // A Canopy client (lead) posts through the API.
    let m = srv
        .api(
            "POST",
            "/api/v1/channels/ops/messages",
            &lead,
            Some(json!({"content": "@scout please check the build"})),
        )
        .expect(201);
    let msg = m["message"]["id"].as_str().unwrap().to_string();
    // The loop claims, runs the worker, posts its artifact as a reply and completes the item.
    let done = wait_until(30.0, || {
        let g = srv
            .api(
                "GET",
                "/api/v1/events?after_seq=0&types=inbox.item.updated&limit=500",
                &lead,
                None,
            )
            .expect(200);
        g["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["payload"]["status"] == "completed")
    });
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    run.wait().unwrap();
    assert!(done, "the API never showed the item completed");
    let h = srv
        .api("GET", "/api/v1/agents/me/heartbeat", &scout, None)
        .expect(200);
    assert_eq!(h["pending_inbox"], 0);
    let l = srv
        .api("GET", "/api/v1/channels/ops/messages", &lead, None)
        .expect(200);
    let reply = l["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["reply_to"] == msg.as_str())
        .cloned()
        .expect("the loop's reply is in the channel");
    assert_eq!(reply["user_id"], "scout");
    assert!(
        reply["content"]
            .as_str()
            .unwrap()
            .contains("build is green")
    );
    // The reply lands in lead's inbox, through the API.
    let ib = srv
        .api("GET", "/api/v1/agents/me/inbox", &lead, None)
        .expect(200);
    assert!(
        ib["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["trigger_type"] == "reply" && i["source_id"] == reply["id"])
    );
}

/// What the browser test needs, with how to install it when missing.
fn browser_tools() -> std::result::Result<(), String> {
    let have = |cmd: &str, args: &[&str]| {
        std::process::Command::new(cmd)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let mut missing = Vec::new();
    if !std::path::Path::new("/usr/bin/chromium").exists()
        || !std::path::Path::new("/usr/bin/chromedriver").exists()
    {
        missing.push("apt-get install chromium chromium-driver");
    }
    if !have("python3", &["-c", "import selenium"]) {
        missing.push("pip3 install selenium==4.51.0");
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the browser test needs Debian's chromium and Selenium: {} (./test does this)",
            missing.join("; ")
        ))
    }
}

#[test]
fn dashboard_in_a_headless_browser_shows_claims_posts_jobs_and_workflows_live() {
    if let Err(e) = browser_tools() {
        panic!("{e}");
    }
    let env = setup();
    let srv = Server::start(&env);
    let shot = std::env::var_os("CONDUCTOR_DASHBOARD_SCREENSHOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env.root.path().join("dashboard.png"));
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/browser/dashboard.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(crate::common::bin())
        .arg(&env.home)
        .arg(&env.project)
        .arg(format!("http://{}/?token={}", srv.addr, srv.token))
        .arg(&shot)
        .env("HOME", env.root.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "browser test failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    for k in ["claim", "conflict", "post", "job", "workflow"] {
        let t = v["shown_within_seconds"][k].as_f64().unwrap();
        assert!(t < 10.0, "{k} took {t} s");
    }
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a real screenshot"
    );
}

/// The dashboard names the worktree, branch and repository of each session working in one of
/// several worktrees of a repository, lists them together, and serves the grouping as
/// `repositories`.
#[test]
fn dashboard_names_each_sessions_worktree_and_branch() {
    use crate::worktrees::{repo, worktree};
    let env = TestEnv::new();
    let main = repo(&env, "app");
    let b = worktree(&main, "app-b", "feature/b");
    let plain = env.dir("plain");
    let first = env.start_in(&plain, "notes", "outside", "P2");
    let bb = env.start_in(&b, "app", "B", "P1");
    let a = env.start_in(&main, "app", "A", "P1");
    env.run(&[
        "claim",
        "--instance",
        &bb,
        &b.join("lib/").to_string_lossy(),
    ])
    .code(0);
    let srv = Server::start(&env);
    let r = srv.raw("GET", &format!("/?token={}", srv.token), &[], b"");
    let cookie = r.header("set-cookie").unwrap();
    let cookie = cookie.split(';').next().unwrap();
    let st = srv
        .raw("GET", "/dashboard/state", &[("Cookie", cookie)], b"")
        .expect(200);
    let ids: Vec<&str> = st["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [a.as_str(), bb.as_str(), first.as_str()], "{st:#}");
    let repo_dir = main.join(".git").to_string_lossy().into_owned();
    assert_eq!(
        st["instances"][1]["worktree"],
        json!({"repository": repo_dir, "worktree": b.to_str().unwrap(), "branch": "feature/b"})
    );
    assert_eq!(st["instances"][1]["claims"][0]["shown"], "lib/");
    assert!(st["instances"][2]["worktree"].is_null(), "{st:#}");
    assert_eq!(st["repositories"][0]["worktree_count"], 2, "{st:#}");
}

/// The dashboard's state lists what is landing (docs/protocol.md, "Agents in worktrees").
#[test]
fn dashboard_state_shows_landing_branches() {
    use crate::worktrees::{git, repo};
    let env = TestEnv::new();
    let main = repo(&env, "app");
    let v = env
        .exec_in(
            &main,
            &[
                "--json",
                "start",
                "F",
                "--priority",
                "P1",
                "--worktree",
                "feat",
            ],
        )
        .json();
    let wt = std::path::PathBuf::from(v["worktree"].as_str().unwrap());
    std::fs::write(wt.join("src/x.rs"), "fn x() { 9 }\n").unwrap();
    git(&wt, &["commit", "-q", "-am", "x"]);
    env.exec(&["done", "--instance", v["instance_id"].as_str().unwrap()])
        .code(0);
    let srv = Server::start(&env);
    let r = srv.raw("GET", &format!("/?token={}", srv.token), &[], b"");
    let cookie = r.header("set-cookie").unwrap();
    let cookie = cookie.split(';').next().unwrap();
    let st = srv
        .raw("GET", "/dashboard/state", &[("Cookie", cookie)], b"")
        .expect(200);
    assert_eq!(st["landing"][0]["branch"], "feat", "{st}");
    assert_eq!(st["landing"][0]["base"], "main", "{st}");
    assert_eq!(st["landing"][0]["worktree"], wt.to_str().unwrap(), "{st}");
    assert_eq!(st["landing"][0]["files"], serde_json::json!(["src/x.rs"]));
}
