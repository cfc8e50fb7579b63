//! The text form of the list commands: a header line and columns padded to their widest cell
//! (the last column is not padded). Cells are made printable (a control character in a task or
//! a preview never breaks a row or reaches the terminal raw). `--json` output never goes here.

/// A table being built.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row (one cell per column).
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.header.len());
        self.rows.push(
            cells
                .iter()
                .map(|c| conductor::text::printable(c))
                .collect(),
        );
    }

    /// The lines, header first, without a trailing newline.
    pub fn render(&self) -> String {
        let width = |s: &str| s.chars().count();
        let mut widths: Vec<usize> = self.header.iter().map(|h| width(h)).collect();
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(width(c));
            }
        }
        let last = widths.len().saturating_sub(1);
        std::iter::once(&self.header)
            .chain(&self.rows)
            .map(|r| {
                let mut line = String::new();
                for (i, c) in r.iter().enumerate() {
                    if i > 0 {
                        line.push_str("  ");
                    }
                    line.push_str(c);
                    if i < last {
                        line.extend(std::iter::repeat_n(' ', widths[i] - width(c)));
                    }
                }
                line.trim_end().to_string()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}
