//! Secret values blanked out of a job's output on its way to the log, whatever the pieces it
//! arrives in: a value split across reads, across lines (a PEM key) or written a few bytes at a
//! time is still replaced whole. Works on bytes (binary output passes through unchanged).
//!
//! The copier holds back only the end of what it read when that end could be the start of a
//! secret; everything else reaches the log as soon as it is read.

use std::io::{Read, Write};

/// What to look for and what to write instead.
pub struct Needles {
    /// Longest first, so that a whole value wins over one of its lines.
    list: Vec<(Vec<u8>, Vec<u8>)>,
    /// The bytes a needle starts with: any other byte is copied without looking further.
    first: [bool; 256],
}

impl Needles {
    /// From `(name, value)` pairs: each value becomes `[secret NAME]`. A value of several lines
    /// is also looked for line by line (lines of 8 bytes or more), so that a PEM key printed
    /// one line at a time, with something between its lines, is blanked all the same.
    pub fn new(secrets: &[(String, String)]) -> Needles {
        let mut list: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for (name, value) in secrets {
            if value.is_empty() {
                continue;
            }
            let with = format!("[secret {name}]").into_bytes();
            list.push((value.as_bytes().to_vec(), with.clone()));
            if value.contains('\n') {
                for line in value.lines() {
                    let line = line.trim_end_matches('\r');
                    if line.len() >= 8 {
                        list.push((line.as_bytes().to_vec(), with.clone()));
                    }
                }
            }
        }
        list.sort_by_key(|n| std::cmp::Reverse(n.0.len()));
        list.dedup_by(|a, b| a.0 == b.0);
        let mut first = [false; 256];
        for (n, _) in &list {
            first[n[0] as usize] = true;
        }
        Needles { list, first }
    }

    /// Replace what `buf` holds; returns the output and how many bytes of `buf` it covers.
    /// Unless `eof`, a tail that may be the start of a needle is left for the next call.
    fn scan(&self, buf: &[u8], eof: bool) -> (Vec<u8>, usize) {
        let mut out = Vec::with_capacity(buf.len());
        let mut i = 0;
        'outer: while i < buf.len() {
            if !self.first[buf[i] as usize] {
                out.push(buf[i]);
                i += 1;
                continue;
            }
            let rest = &buf[i..];
            // What is read so far may begin a needle (perhaps a longer one than a needle that
            // matches already: a whole value over one of its lines): wait for more.
            if !eof
                && self
                    .list
                    .iter()
                    .any(|(n, _)| n.len() > rest.len() && n.starts_with(rest))
            {
                break;
            }
            for (n, with) in &self.list {
                if rest.starts_with(n) {
                    out.extend_from_slice(with);
                    i += n.len();
                    continue 'outer;
                }
            }
            out.push(buf[i]);
            i += 1;
        }
        (out, i)
    }
}

/// Copy `from` to `to` until the end of `from`, every needle replaced.
pub fn copy(mut from: impl Read, mut to: impl Write, needles: &Needles) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let (n, eof) = match from.read(&mut chunk) {
            Ok(0) => (0, true),
            Ok(n) => (n, false),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => (0, true),
        };
        buf.extend_from_slice(&chunk[..n]);
        let (out, used) = needles.scan(&buf, eof);
        buf.drain(..used);
        if !out.is_empty() && to.write_all(&out).is_err() {
            return;
        }
        if eof {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `input` in pieces of `step` bytes through a pipe-like reader.
    fn through(secrets: &[(&str, &str)], input: &[u8], step: usize) -> Vec<u8> {
        struct Pieces<'a>(&'a [u8], usize);
        impl Read for Pieces<'_> {
            fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
                let n = self.1.min(self.0.len()).min(b.len());
                b[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let s: Vec<(String, String)> = secrets
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let mut out = Vec::new();
        copy(Pieces(input, step), &mut out, &Needles::new(&s));
        out
    }

    #[test]
    fn a_value_split_anywhere_is_replaced_whole() {
        let key = "-----BEGIN KEY-----\nAAAAbbbbCCCCdddd\nEEEE==\n-----END KEY-----";
        let input = format!("before {key} after\nx");
        for step in [1, 2, 3, 7, 64, 8192] {
            let out = through(&[("K", key)], input.as_bytes(), step);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "before [secret K] after\nx",
                "step {step}"
            );
        }
    }

    #[test]
    fn lines_of_a_multi_line_value_are_replaced_one_by_one() {
        let key = "-----BEGIN KEY-----\nAAAAbbbbCCCCdddd\n-----END KEY-----";
        let out = through(
            &[("K", key)],
            b"l1: AAAAbbbbCCCCdddd\nl2: -----END KEY-----\n",
            5,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "l1: [secret K]\nl2: [secret K]\n"
        );
    }

    #[test]
    fn other_bytes_pass_unchanged() {
        let input: Vec<u8> = (0..=255u8).chain(b"se".iter().copied()).collect();
        assert_eq!(through(&[("S", "secret")], &input, 3), input);
    }
}
