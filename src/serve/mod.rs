//! `conductor serve`: Canopy's agent API over the agents domain's ledgers, plus a live
//! dashboard, on one synchronous HTTP server (`tiny_http`, a thread per request; no async
//! runtime).
//!
//! - `/api/v1/...` ([`api`]): what CanopyKit 0.1.0 calls, authenticated by `X-API-Key`
//!   (see [`keys`]); every answer is JSON, errors included (401, 404, 400, 409).
//! - `/` ([`dash`]): one embedded HTML page; `/dashboard/state` (a JSON snapshot of the home)
//!   and `/dashboard/events` (Server-Sent Events, each event's `id` its journal seq). The page
//!   is opened once with `/?token=...` (printed at start) and then holds a cookie.
//!
//! Live updates are woken by the journal through the store's watcher, never by polling: one
//! thread waits on the watcher and wakes every event stream through a condition variable.

pub mod api;
pub mod dash;
mod http;
pub mod keys;

use http::parse_url;
pub use http::{Reply, Req, header};

use std::io::Read;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use clap::Args;
use serde_json::json;
use tiny_http::{Header, Method, Request, Response, Server};

use crate::face::Ctx;
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::store::Store;
use conductor::store::watch::{self, Wake};

/// The largest request body read, in bytes (a post is at most 16 KiB of text, JSON-escaped).
pub const MAX_BODY: usize = 256 * 1024;

/// `serve`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Serves Canopy's agent API (what CanopyKit calls) over this home, \
and a live dashboard at /.\n\nAPI requests carry an X-API-Key header made with `conductor agent \
key create AGENT`; the key is the agent (\"me\"). The dashboard's address, with a one-time token, \
is printed at start; the page swaps the token for a cookie.\n\nThe server listens on loopback \
only unless --allow-remote is given and at least one API key exists. Stop it with Ctrl-C.\n\n\
Example:\n  conductor serve --listen 127.0.0.1:7777"
)]
pub struct ServeArgs {
    /// The address to listen on (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7777")]
    pub listen: String,
    /// Allow a non-loopback --listen address (needs an API key to exist; the dashboard is then
    /// reachable by anyone holding its token: put TLS in front of it).
    #[arg(long)]
    pub allow_remote: bool,
    /// The dashboard token [default: a fresh random one, printed at start].
    #[arg(long, env = "CONDUCTOR_SERVE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// What every request thread shares.
pub struct Shared {
    pub store: Store,
    /// The dashboard's token (in `/?token=`) and the cookie it is swapped for.
    pub token: String,
    pub cookie: String,
    /// The journal's last seq as the watcher last saw it, and the stop flag.
    pub journal: Mutex<(u64, bool)>,
    pub changed: Condvar,
}

impl Shared {
    /// Wait until the journal passes `seq` (or `timeout` passes, or the server stops). Returns
    /// false when stopping.
    pub fn wait_past(&self, seq: u64, timeout: Duration) -> bool {
        let g = self.journal.lock().unwrap_or_else(|e| e.into_inner());
        let (g, _) = self
            .changed
            .wait_timeout_while(g, timeout, |(s, stop)| *s <= seq && !*stop)
            .unwrap_or_else(|e| e.into_inner());
        !g.1
    }
}

/// Run `serve`.
pub fn run(ctx: &Ctx, a: ServeArgs) -> Result<u8> {
    let addr: SocketAddr = a
        .listen
        .to_socket_addrs()
        .ok()
        .and_then(|mut i| i.next())
        .ok_or_else(|| {
            Error::invalid(
                Reason::InvalidInput,
                format!(
                    "--listen `{}` is not an address like 127.0.0.1:7777",
                    conductor::text::printable(&a.listen)
                ),
            )
        })?;
    if !loopback(addr.ip()) {
        if !a.allow_remote {
            return Err(Error::invalid(
                Reason::RemoteRefused,
                format!(
                    "--listen {addr} is not a loopback address: pass --allow-remote to serve other machines"
                ),
            ));
        }
        if !keys::any(&ctx.store, ctx.now)? {
            return Err(Error::invalid(
                Reason::RemoteRefused,
                format!(
                    "--listen {addr} with --allow-remote needs an API key first (conductor agent key create AGENT)"
                ),
            ));
        }
    }
    if let Some(t) = &a.token
        && (t.len() < 16
            || !t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
    {
        return Err(Error::invalid(
            Reason::InvalidInput,
            "--token needs at least 16 letters, digits, `-` or `_`",
        ));
    }
    watch::block_stop_signals();
    // Watch first, then read the journal's end: nothing appended in between is missed.
    let watcher = ctx
        .store
        .watcher(conductor::store::journal::is_journal_file)?;
    watcher.stop_on_signals_and_closed_stdout();
    let server = Server::http(addr).map_err(|e| {
        Error::invalid(
            Reason::ListenFailed,
            format!("cannot listen on {addr}: {e}"),
        )
    })?;
    let bound = server
        .server_addr()
        .to_ip()
        .expect("an HTTP server listens on an IP address");
    let dir = ctx.store.home().dir().to_path_buf();
    let store = Store::open(dir, Duration::from_secs(10))?;
    let seq = store.last_event_seq()?;
    let token = a.token.clone().unwrap_or_else(|| keys::random_hex(16));
    let shared = Arc::new(Shared {
        store,
        cookie: keys::random_hex(24),
        token,
        journal: Mutex::new((seq, false)),
        changed: Condvar::new(),
    });
    let server = Arc::new(server);
    {
        // The journal's watcher wakes every event stream; a stop ends the accept loop.
        let shared = shared.clone();
        let server = server.clone();
        std::thread::spawn(move || {
            loop {
                let wake = watcher.wait(Some(Duration::from_secs(60)));
                let seq = shared.store.last_event_seq().ok();
                let mut g = shared.journal.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(s) = seq {
                    g.0 = s;
                }
                if wake == Wake::Stop {
                    g.1 = true;
                }
                drop(g);
                shared.changed.notify_all();
                if wake == Wake::Stop {
                    server.unblock();
                    return;
                }
            }
        });
    }
    let url = format!("http://{bound}");
    let line = json!({"status": "ok", "listening": url, "dashboard": format!("{url}/?token={}", shared.token)});
    if ctx.out.json {
        println!("{line}");
    } else {
        println!(
            "Serving Canopy's agent API on {url}/api/v1 (X-API-Key)\nDashboard: {url}/?token={}",
            shared.token
        );
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    for rq in server.incoming_requests() {
        let shared = shared.clone();
        std::thread::spawn(move || handle(&shared, rq));
    }
    Ok(0)
}

fn loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v) => v.is_loopback(),
        IpAddr::V6(v) => v.is_loopback() || v.to_ipv4_mapped().is_some_and(|v| v.is_loopback()),
    }
}

fn handle(shared: &Shared, mut rq: Request) {
    let Some((segments, query)) = parse_url(rq.url()) else {
        respond(
            rq,
            Reply::error(
                400,
                "invalid_url",
                "the URL is not valid percent-encoded UTF-8",
            ),
        );
        return;
    };
    // The event stream takes the connection over.
    if segments == ["dashboard", "events"] && *rq.method() == Method::Get {
        dash::events(shared, rq, &query);
        return;
    }
    let mut body = Vec::new();
    let too_big = rq
        .as_reader()
        .take(MAX_BODY as u64 + 1)
        .read_to_end(&mut body)
        .is_err()
        || body.len() > MAX_BODY;
    if too_big {
        respond(
            rq,
            Reply::error(
                413,
                "body_too_large",
                format!("a body is at most {MAX_BODY} bytes"),
            ),
        );
        return;
    }
    let req = Req {
        method: rq.method().clone(),
        segments,
        query,
        body,
    };
    let reply = if req.segments.first().is_some_and(|s| s == "api") {
        let key = header(&rq, "X-API-Key").map(str::to_string);
        api::handle(shared, &req, key.as_deref())
    } else {
        let cookie = header(&rq, "Cookie").map(str::to_string);
        dash::handle(shared, &req, cookie.as_deref())
    };
    respond(rq, reply);
}

fn respond(rq: Request, r: Reply) {
    let mut resp = Response::from_data(r.body).with_status_code(r.status);
    let mut headers = vec![
        ("Content-Type".to_string(), r.content_type.to_string()),
        ("Cache-Control".into(), "no-store".into()),
        ("X-Content-Type-Options".into(), "nosniff".into()),
    ];
    headers.extend(r.headers);
    for (k, v) in headers {
        if let Ok(h) = Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            resp.add_header(h);
        }
    }
    let _ = rq.respond(resp);
}
