//! The HTTP plumbing under `serve`: a parsed request ([`Req`]), an answer ([`Reply`], with the
//! status a library error means), percent-decoding and headers.

use serde_json::{Value, json};
use tiny_http::{Method, Request};

use conductor::error::Error;

/// A parsed request: method, decoded path segments, query pairs, headers, body.
pub struct Req {
    pub method: Method,
    pub segments: Vec<String>,
    pub query: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Req {
    /// The first value of a query parameter.
    pub fn param(&self, k: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(x, _)| x == k)
            .map(|(_, v)| v.as_str())
    }
    /// Every value of a query parameter.
    pub fn params(&self, k: &str) -> Vec<&str> {
        self.query
            .iter()
            .filter(|(x, _)| x == k)
            .map(|(_, v)| v.as_str())
            .collect()
    }
    /// The body as a JSON object (`{}` when empty).
    pub fn json(&self) -> std::result::Result<serde_json::Map<String, Value>, Reply> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(serde_json::Map::new());
        }
        match serde_json::from_slice::<Value>(&self.body) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(Reply::error(
                400,
                "invalid_body",
                "the body must be a JSON object",
            )),
            Err(e) => Err(Reply::error(
                400,
                "invalid_body",
                format!("the body is not JSON: {e}"),
            )),
        }
    }
}

/// An answer: status, JSON body and extra headers.
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    pub content_type: &'static str,
    pub headers: Vec<(String, String)>,
}

impl Reply {
    pub fn json(status: u16, v: Value) -> Reply {
        Reply {
            status,
            body: serde_json::to_vec(&v).expect("values serialize"),
            content_type: "application/json",
            headers: Vec::new(),
        }
    }
    /// `{"error": message, "reason": reason, "status": status}`.
    pub fn error(status: u16, reason: &str, message: impl Into<String>) -> Reply {
        Reply::json(
            status,
            json!({"success": false, "error": message.into(), "reason": reason, "status": status}),
        )
    }
    /// A library error, with the status its reason means.
    pub fn from_error(e: &Error) -> Reply {
        let reason = e.reason();
        let status = match reason {
            "unknown_item" | "unknown_agent" | "unknown_channel" | "message_not_found"
            | "not_actionable" | "unknown_key" => 404,
            "not_holder" | "conflict" => 409,
            "lock_timeout" | "store_unavailable" => 503,
            _ if e.exit_code() == 2 => 400,
            _ => 500,
        };
        Reply::error(status, reason, e.to_string())
    }
}

/// Percent-decode (`+` is a space in queries).
pub fn decode(s: &str, plus: bool) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let h = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(h, 16).ok()?);
                i += 3;
            }
            b'+' if plus => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Query pairs, decoded.
pub type Query = Vec<(String, String)>;

pub fn parse_url(url: &str) -> Option<(Vec<String>, Query)> {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let segments = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| decode(s, false))
        .collect::<Option<Vec<_>>>()?;
    let query = query
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            Some((decode(k, true)?, decode(v, true)?))
        })
        .collect::<Option<Vec<_>>>()?;
    Some((segments, query))
}

/// A request header's value.
pub fn header<'a>(rq: &'a Request, name: &str) -> Option<&'a str> {
    rq.headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}
