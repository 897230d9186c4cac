//! Output: JSONL for pipes and programs, aligned tables for people.

use std::fmt::Display;
use std::io::{IsTerminal, Write};

use serde::Serialize;

use crate::Failure;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputMode {
    /// A table on a terminal, JSONL otherwise.
    Auto,
    Table,
    Jsonl,
}

impl OutputMode {
    /// Whether to print a table, resolving `auto` by looking at stdout.
    pub fn table(self) -> bool {
        match self {
            OutputMode::Auto => std::io::stdout().is_terminal(),
            OutputMode::Table => true,
            OutputMode::Jsonl => false,
        }
    }
}

/// A failed write to stdout, kept typed so the exit code follows its kind
/// (a closed pipe included).
pub fn stdout_error(e: std::io::Error) -> Failure {
    Failure::from(stepscore::Error::io("<stdout>", e))
}

/// Writes one JSON value as a line.
pub fn jsonl(out: &mut impl Write, value: &impl Serialize) -> Result<(), Failure> {
    serde_json::to_writer(&mut *out, value).map_err(|e| match e.io_error_kind() {
        Some(kind) => stdout_error(std::io::Error::new(kind, e)),
        // Only I/O can fail here: the values written are plain data.
        None => Failure::from(stepscore::Error::Internal(format!("writing JSON: {e}"))),
    })?;
    out.write_all(b"\n").map_err(stdout_error)
}

/// Prints one line on stdout (never panics, unlike `println!`, when stdout
/// is a closed pipe).
pub fn print_line(text: impl Display) -> Result<(), Failure> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(stdout_error)
}

/// A plain text table: a header row, a rule, and rows, columns padded to fit.
/// Cells are counted in chars so non-ASCII text lines up.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn write(&self, out: &mut impl Write) -> Result<(), Failure> {
        let cols = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| -> String {
            let mut s = String::new();
            for (i, w) in widths.iter().enumerate() {
                let cell = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = w.saturating_sub(cell.chars().count());
                s.push_str(cell);
                if i + 1 < cols {
                    s.push_str(&" ".repeat(pad + 2));
                }
            }
            s.trim_end().to_string()
        };
        writeln!(out, "{}", line(&self.header)).map_err(stdout_error)?;
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        writeln!(out, "{}", line(&rule)).map_err(stdout_error)?;
        for row in &self.rows {
            writeln!(out, "{}", line(row)).map_err(stdout_error)?;
        }
        Ok(())
    }
}

/// A number for a table: fixed decimals, `-` when absent, `NaN` spelled out.
pub fn num(x: Option<f64>, decimals: usize) -> String {
    match x {
        None => "-".to_string(),
        Some(v) if v.is_nan() => "NaN".to_string(),
        Some(v) => format!("{v:.decimals$}"),
    }
}

/// Shortens text for a table cell, on a char boundary, on one line.
pub fn clip(text: &str, max_chars: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max_chars {
        one_line
    } else {
        let mut s: String = one_line.chars().take(max_chars.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}
