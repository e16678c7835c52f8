//! A progress line for runs that take many minutes (`tandem-lab bench`).
//!
//! On a terminal the line is redrawn in place; anywhere else (CI logs, a
//! pipe) each finished step prints one plain line, so logs stay readable.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct Progress {
    total: usize,
    done: usize,
    started: Instant,
    terminal: bool,
    /// Width of the line last drawn, so a shorter one can blank it out.
    drawn: usize,
}

impl Progress {
    pub fn new(total: usize) -> Progress {
        Progress { total, done: 0, started: Instant::now(), terminal: std::io::stderr().is_terminal(), drawn: 0 }
    }

    /// Shows what is running now. A log gets a line too: when a step hangs,
    /// the log's last line names it.
    pub fn start(&mut self, what: &str) {
        let line = self.line(what);
        if self.terminal {
            self.draw(&line);
        } else {
            let _ = writeln!(std::io::stderr(), "{line} ...");
        }
    }

    /// Records one finished step and what came of it.
    pub fn finish(&mut self, what: &str) {
        self.done = (self.done + 1).min(self.total);
        let line = self.line(what);
        if self.terminal {
            self.draw(&line);
        } else {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }

    /// Prints a message of its own without tearing the progress line.
    pub fn note(&mut self, message: &str) {
        self.clear();
        let _ = writeln!(std::io::stderr(), "{message}");
    }

    /// Leaves the terminal clean for whatever prints next.
    pub fn clear(&mut self) {
        if self.terminal && self.drawn > 0 {
            let _ = write!(std::io::stderr(), "\r{}\r", " ".repeat(self.drawn));
            self.drawn = 0;
        }
    }

    fn line(&self, what: &str) -> String {
        let elapsed = self.started.elapsed();
        let left =
            remaining(elapsed, self.done, self.total).map(|d| format!(", ~{} left", clock(d))).unwrap_or_default();
        let width = self.total.to_string().len();
        format!("[{:>width$}/{}] {what}  ({} elapsed{left})", self.done, self.total, clock(elapsed))
    }

    fn draw(&mut self, line: &str) {
        let pad = self.drawn.saturating_sub(line.chars().count());
        let _ = write!(std::io::stderr(), "\r{line}{}", " ".repeat(pad));
        let _ = std::io::stderr().flush();
        self.drawn = line.chars().count();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Linear estimate from the steps done so far; none before the first one.
pub fn remaining(elapsed: Duration, done: usize, total: usize) -> Option<Duration> {
    if done == 0 || done >= total {
        return None;
    }
    let per_step = elapsed.as_secs_f64() / done as f64;
    Some(Duration::from_secs_f64(per_step * (total - done) as f64))
}

/// `1h02m03s`, `12m03s`, `7s`.
pub fn clock(d: Duration) -> String {
    tandem::time_fmt::duration(d.as_secs() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_formats() {
        assert_eq!(clock(Duration::from_secs(7)), "7s");
        assert_eq!(clock(Duration::from_secs(723)), "12m03s");
        assert_eq!(clock(Duration::from_secs(3723)), "1h02m03s");
    }

    #[test]
    fn remaining_is_linear_and_absent_at_the_ends() {
        let ten = Duration::from_secs(10);
        assert_eq!(remaining(ten, 0, 4), None);
        assert_eq!(remaining(ten, 4, 4), None);
        assert_eq!(remaining(ten, 1, 4), Some(Duration::from_secs(30)));
    }

    #[test]
    fn line_counts_steps() {
        let mut p = Progress::new(12);
        p.terminal = false;
        p.done = 3;
        let line = p.line("galera oltp_write_only");
        assert!(line.starts_with("[ 3/12] galera oltp_write_only  ("), "{line}");
        assert!(line.contains("left)"), "{line}");
    }
}
