//! What an agent used, read from what it prints: the usage that conductor counts against the
//! budgets of workflow sessions and queue jobs. Pure: text in, figures out.
//!
//! The shapes (captured from the real CLIs, `fixtures/usage/`):
//! - Claude Code (`-p --output-format json`, or `stream-json`): a line `{"type":"result", ...,
//!   "total_cost_usd": C, "usage": {"input_tokens", "output_tokens",
//!   "cache_creation_input_tokens", "cache_read_input_tokens"}}`, the session's totals.
//! - Pi (`--mode json`): one `{"type":"message_end","message":{"role":"assistant", "usage":
//!   {"totalTokens": N, "cost": {"total": C}}}}` per model response (`turn_end` and `agent_end`
//!   repeat those messages and are not counted again).
//! - OpenCode (`run --format json`): one `{"type":"step_finish","part":{"tokens":{"total": N,
//!   ...},"cost": C}}` per step.
//!
//! Tokens are every token the model processed: input, output, and cache reads and writes.
//! Lines that are not JSON (an agent's plain output, warnings) are skipped.

use serde_json::Value;

/// Usage found in an agent's output.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    pub tokens: u64,
    pub cost_usd: f64,
    /// How many usage reports were found (0: the output had none).
    pub reports: u32,
}

impl Usage {
    fn add(&mut self, tokens: u64, cost: f64) {
        self.tokens = self.tokens.saturating_add(tokens);
        if cost.is_finite() && cost > 0.0 {
            self.cost_usd += cost;
        }
        self.reports += 1;
    }
}

fn num(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn float(v: Option<&Value>) -> f64 {
    v.and_then(Value::as_f64).unwrap_or(0.0)
}

/// Read the usage from an agent's output (any of the shapes above, mixed with other lines).
pub fn parse(output: &str) -> Usage {
    let mut u = Usage::default();
    for line in output.lines() {
        let line = line.trim();
        if !line.starts_with('{') {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        line_usage(&v, &mut u);
    }
    u
}

fn line_usage(v: &Value, u: &mut Usage) {
    match v.get("type").and_then(Value::as_str) {
        // Claude Code: the session's result.
        Some("result") => {
            let Some(us) = v.get("usage") else { return };
            let tokens = num(us, "input_tokens")
                + num(us, "output_tokens")
                + num(us, "cache_creation_input_tokens")
                + num(us, "cache_read_input_tokens");
            u.add(tokens, float(v.get("total_cost_usd")));
        }
        // Pi: one per message; only the model's (assistant) messages carry usage.
        Some("message_end") => {
            let Some(m) = v.get("message") else { return };
            if m.get("role").and_then(Value::as_str) != Some("assistant") {
                return;
            }
            let Some(us) = m.get("usage") else { return };
            let tokens = match us.get("totalTokens").and_then(Value::as_u64) {
                Some(t) => t,
                None => {
                    num(us, "input")
                        + num(us, "output")
                        + num(us, "cacheRead")
                        + num(us, "cacheWrite")
                }
            };
            u.add(tokens, float(us.get("cost").and_then(|c| c.get("total"))));
        }
        // OpenCode: one per step.
        Some("step_finish") => {
            let Some(p) = v.get("part") else { return };
            let Some(t) = p.get("tokens") else { return };
            let tokens = match t.get("total").and_then(Value::as_u64) {
                Some(n) => n,
                None => {
                    let cache = t.get("cache").cloned().unwrap_or(Value::Null);
                    num(t, "input")
                        + num(t, "output")
                        + num(t, "reasoning")
                        + num(&cache, "read")
                        + num(&cache, "write")
                }
            };
            u.add(tokens, float(p.get("cost")));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/usage")
            .join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn claude_code_json_result() {
        // Two model requests of 10 in + 5 out each; the result line has the session's totals.
        let u = parse(&fixture("claude-2.1.197.json"));
        assert_eq!((u.tokens, u.reports), (30, 1));
        assert!(close(u.cost_usd, 0.00035), "{u:?}");
    }

    #[test]
    fn claude_code_stream_json_counts_the_result_not_each_message() {
        let u = parse(&fixture("claude-2.1.197-stream.jsonl"));
        assert_eq!((u.tokens, u.reports), (30, 1));
        assert!(close(u.cost_usd, 0.00035), "{u:?}");
    }

    #[test]
    fn pi_json_mode_counts_each_assistant_message_once() {
        // Two responses of 15 tokens at $0.000105 (the model's configured prices); turn_end and
        // agent_end repeat the same messages.
        let u = parse(&fixture("pi-0.73.1.jsonl"));
        assert_eq!((u.tokens, u.reports), (30, 2));
        assert!(close(u.cost_usd, 0.00021), "{u:?}");
    }

    #[test]
    fn opencode_json_events_count_each_step() {
        let u = parse(&fixture("opencode-1.18.33.jsonl"));
        assert_eq!((u.tokens, u.reports), (30, 2));
        assert!(close(u.cost_usd, 0.00021), "{u:?}");
    }

    #[test]
    fn plain_text_and_broken_lines_have_no_usage() {
        let u = parse("hello\n{not json\n{\"type\":\"result\"}\n[1,2]\n");
        assert_eq!(u, Usage::default());
        // Mixed with plain output, a report still counts.
        let u = parse(
            "warning: x\n{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":3,\"output\":4,\"cache\":{\"read\":1}},\"cost\":-1}}\n",
        );
        assert_eq!((u.tokens, u.reports), (8, 1));
        assert_eq!(u.cost_usd, 0.0, "a negative cost is not counted");
    }
}
