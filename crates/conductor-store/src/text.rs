//! Text made safe to quote in one-line messages (every layer uses it).

/// A string made safe to quote in a one-line message: control characters escaped, long
/// strings cut.
pub fn printable(s: &str) -> String {
    printable_max(s, 80)
}

/// [`printable`] with a chosen length limit, in characters.
pub fn printable_max(s: &str, max: usize) -> String {
    let mut out = String::new();
    for c in s.chars().take(max) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if s.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}
