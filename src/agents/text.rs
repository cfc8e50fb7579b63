//! Reading posts the way Canopy does: `@handle` mentions and assignment lines. Pure.

use crate::error::Reason;
use crate::error::{Error, Result};

fn handle_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

/// Check an agent name (also a handle without its `@`): letters, digits, `_ . -`, starting and
/// ending with a letter or digit, at most 64 characters.
pub fn check_name(what: &str, s: &str) -> Result<()> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.chars().all(handle_char)
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            Reason::InvalidInput,
            format!(
                "`{}` is not a valid {what}: use letters, digits, `_ . -`, start and end with a letter or digit, at most 64 characters",
                crate::text::printable(s)
            ),
        ))
    }
}

/// Check a channel name: like an agent name, an optional leading `#` is dropped. `dm:` names
/// are reserved for direct messages.
pub fn channel_name(s: &str) -> Result<String> {
    let name = s.strip_prefix('#').unwrap_or(s);
    check_name("channel name", name)?;
    Ok(name.to_string())
}

/// The handles mentioned in `text` (without `@`, lowercased, in order, no duplicates).
///
/// Canopy's rule: `@` not preceded by a handle character (so `a@b.com` is not a mention), then
/// letters, digits and `_ . -`, ending on a letter or digit: `thanks @scout.` mentions `scout`.
pub fn mentions(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '@' && (i == 0 || !handle_char(chars[i - 1]) && chars[i - 1] != '@') {
            let mut j = i + 1;
            while j < chars.len() && handle_char(chars[j]) {
                j += 1;
            }
            let mut h: String = chars[i + 1..j].iter().collect();
            while h.ends_with(|c: char| !c.is_ascii_alphanumeric()) {
                h.pop();
            }
            if h.starts_with(|c: char| c.is_ascii_alphanumeric()) {
                let h = h.to_ascii_lowercase();
                if !out.contains(&h) {
                    out.push(h);
                }
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// The assignment keys that address an agent by name.
pub const ASSIGNMENT_KEYS: [&str; 6] = ["owner", "to", "next", "assignee", "reviewer", "members"];

/// Names given on assignment lines (`owner: scout`, `- reviewer: @lint, @docs`), lowercased,
/// without `@`, in order, no duplicates. Lines inside code fences are not read.
pub fn assigned(text: &str) -> Vec<String> {
    assigned_with(text, &ASSIGNMENT_KEYS)
}

/// Names given on `members:` lines only (they add the agents to the channel).
pub fn members(text: &str) -> Vec<String> {
    assigned_with(text, &["members"])
}

fn assigned_with(text: &str, keys: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let t = t.trim_start_matches(['-', '*']).trim_start();
        let Some((key, value)) = t.split_once(':') else {
            continue;
        };
        if !keys.contains(&key.trim().to_ascii_lowercase().as_str()) {
            continue;
        }
        for tok in value.split([',', ' ', '\t', ';']) {
            let tok = tok.trim().trim_start_matches('@');
            let tok = tok.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
            if tok.is_empty() || check_name("name", tok).is_err() {
                continue;
            }
            let tok = tok.to_ascii_lowercase();
            if !out.contains(&tok) {
                out.push(tok);
            }
        }
    }
    out
}

/// The first line of a post, shortened, for an inbox item's preview.
pub fn preview(text: &str) -> String {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    crate::text::printable_max(first.trim(), 120)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_follow_canopys_rule() {
        assert_eq!(mentions("thanks @scout."), ["scout"]);
        assert_eq!(mentions("@a-b_c.d-, @x"), ["a-b_c.d", "x"]);
        assert_eq!(mentions("mail me@scout.com or @@x"), Vec::<String>::new());
        assert_eq!(mentions("(@Scout) @scout"), ["scout"]);
        assert_eq!(mentions("@- @."), Vec::<String>::new());
    }

    #[test]
    fn assignment_lines() {
        let t = "plan\nowner: scout\n- reviewer: @lint, docs.\nTo: x\nnotes: @nobody\n```\nowner: hidden\n```";
        assert_eq!(assigned(t), ["scout", "lint", "docs", "x"]);
    }

    #[test]
    fn names() {
        assert!(check_name("n", "scout.2").is_ok());
        assert!(check_name("n", "scout.").is_err());
        assert!(check_name("n", "").is_err());
        assert!(check_name("n", "a b").is_err());
        assert_eq!(channel_name("#ops").unwrap(), "ops");
        assert!(channel_name("dm:a+b").is_err());
    }
}
