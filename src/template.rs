//! Command templates filled in one pass: every `{name}` of the template is replaced by its
//! value, shell-quoted, and a value is never scanned again. So a value is data whatever it holds:
//! `{model}` written inside an agent's name stays those seven characters, and `$(...)`, backticks,
//! `;`, quotes and newlines reach the program as they were written, never the shell's parser.
//!
//! Every template conductor fills goes through [`fill`]: the queue's agent command and its
//! `--runner` templates, and the workflow worker command.

/// Quote a value for `sh`: plain words as they are, anything else in single quotes.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Fill `template` in one left-to-right pass. `{name}` for a name in `values` becomes the
/// value, shell-quoted (an absent value counts as empty); any other brace is kept as written.
/// With `optional_groups`, a `[...]` part of the template is kept (without its brackets) only
/// when every placeholder in it has a non-empty value, and runs of whitespace in the template's
/// own text are collapsed (a dropped group leaves no gap); values are never touched.
pub fn fill(template: &str, values: &[(&str, Option<&str>)], optional_groups: bool) -> String {
    let mut out = String::new();
    let mut rest = template;
    while !rest.is_empty() {
        if optional_groups
            && rest.starts_with('[')
            && let Some(close) = rest.find(']')
        {
            let group = &rest[1..close];
            let empty = values
                .iter()
                .any(|(k, v)| group.contains(&format!("{{{k}}}")) && v.is_none_or(str::is_empty));
            if !empty {
                fill_plain(group, values, optional_groups, &mut out);
            }
            rest = &rest[close + 1..];
            continue;
        }
        // Up to the next group start (or the end), as plain text with placeholders.
        let end = if optional_groups {
            rest.char_indices()
                .skip(1)
                .find(|(_, c)| *c == '[')
                .map_or(rest.len(), |(i, _)| i)
        } else {
            rest.len()
        };
        fill_plain(&rest[..end], values, optional_groups, &mut out);
        rest = &rest[end..];
    }
    if optional_groups {
        out.trim().to_string()
    } else {
        out
    }
}

/// One run of template text: placeholders replaced, the template's whitespace collapsed when
/// `collapse`.
fn fill_plain(s: &str, values: &[(&str, Option<&str>)], collapse: bool, out: &mut String) {
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if c == '{'
            && let Some(close) = rest.find('}')
            && let Some((_, v)) = values.iter().find(|(k, _)| *k == &rest[1..close])
        {
            out.push_str(&shell_quote(v.unwrap_or("")));
            rest = &rest[close + 1..];
            continue;
        }
        if collapse && c.is_whitespace() {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_never_scanned_again() {
        let t = "run --agent {agent} [--model {model}]";
        let got = fill(
            t,
            &[("agent", Some("{model}")), ("model", Some("$(id)"))],
            true,
        );
        assert_eq!(got, "run --agent '{model}' --model '$(id)'");
        let got = fill(t, &[("agent", Some("a;b `c` [x]")), ("model", None)], true);
        assert_eq!(got, "run --agent 'a;b `c` [x]'");
    }

    #[test]
    fn whitespace_inside_values_is_kept() {
        let got = fill("x  {a}", &[("a", Some("p  q\nr"))], true);
        assert_eq!(got, "x 'p  q\nr'");
        assert_eq!(fill("x  {a}", &[("a", Some("p"))], false), "x  p");
    }

    #[test]
    fn unknown_braces_and_brackets_stay() {
        assert_eq!(
            fill("echo {x} {a}", &[("a", Some("v"))], false),
            "echo {x} v"
        );
        assert_eq!(
            fill("[ -f x ] && {a}", &[("a", Some("v"))], false),
            "[ -f x ] && v"
        );
        assert_eq!(fill("it's ]", &[], true), "it's ]");
    }
}
