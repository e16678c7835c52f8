//! Progress on stderr. On a terminal: one line, rewritten in place
//! (`[tandem 37/412] galera.galera_foo pass  elapsed 12m03s`) and cleared
//! at the end. Otherwise (CI logs, `| tee`): one plain line per finished test.

use super::parse::Outcome;
use std::io::{IsTerminal, Write};
use std::time::Instant;
use tandem::time_fmt::duration;

pub struct Progress {
    tty: bool,
    label: String,
    total: Option<usize>,
    done: usize,
    last: String,
    started: Instant,
    /// Whether the terminal line currently shows something to clear.
    drawn: bool,
}

impl Progress {
    pub fn new() -> Progress {
        Progress::with_tty(std::io::stderr().is_terminal())
    }

    pub fn with_tty(tty: bool) -> Progress {
        Progress {
            tty,
            label: String::new(),
            total: None,
            done: 0,
            last: String::new(),
            started: Instant::now(),
            drawn: false,
        }
    }

    /// A new counted phase (one provider's MTR run).
    pub fn start(&mut self, label: &str, total: Option<usize>) {
        self.label = label.to_string();
        self.total = total;
        self.done = 0;
        self.last = "starting MTR".into();
        self.started = Instant::now();
        self.draw();
    }

    /// A step message: a line of its own, above the progress line.
    pub fn say(&mut self, message: &str) {
        self.clear();
        let _ = writeln!(std::io::stderr(), "tandem-lab mtr: {message}");
        self.draw();
    }

    /// MTR's start-up phase (terminal only).
    pub fn status(&mut self, phase: &str) {
        self.last = phase.to_string();
        self.draw();
    }

    pub fn result(&mut self, test: &str, outcome: Outcome) {
        self.done += 1;
        self.last = format!("{test} {outcome}");
        if self.tty {
            self.draw();
        } else {
            let _ = writeln!(std::io::stderr(), "{}", self.line());
        }
    }

    /// Redraws the terminal line (the elapsed time moves on during long tests).
    pub fn tick(&mut self) {
        self.draw();
    }

    /// Ends the counted phase and clears the terminal line.
    pub fn finish(&mut self) {
        self.clear();
        self.label.clear();
    }

    fn line(&self) -> String {
        let count = match self.total {
            Some(total) => format!("{}/{total}", self.done),
            None => self.done.to_string(),
        };
        format!("[{} {count}] {}  elapsed {}", self.label, self.last, duration(self.started.elapsed().as_secs_f64()))
    }

    fn draw(&mut self) {
        if !self.tty || self.label.is_empty() {
            return;
        }
        let mut line = self.line();
        // A wrapped line cannot be rewritten with '\r'.
        let width = terminal_width().saturating_sub(1);
        if width > 0 && line.chars().count() > width {
            line = line.chars().take(width).collect();
        }
        let _ = write!(std::io::stderr(), "\r\x1b[K{line}");
        let _ = std::io::stderr().flush();
        self.drawn = true;
    }

    fn clear(&mut self) {
        if self.tty && self.drawn {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
            let _ = std::io::stderr().flush();
            self.drawn = false;
        }
    }
}

impl Default for Progress {
    fn default() -> Self {
        Progress::new()
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

fn terminal_width() -> usize {
    rustix::termios::tcgetwinsize(std::io::stderr()).map_or(0, |ws| usize::from(ws.ws_col))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_line_counts() {
        let mut p = Progress::with_tty(false);
        p.start("tandem", Some(412));
        p.done = 36;
        p.result("galera.galera_foo", Outcome::Pass);
        let line = p.line();
        assert!(line.starts_with("[tandem 37/412] galera.galera_foo pass  elapsed "), "{line}");
        p.start("galera", None);
        p.result("galera.basic", Outcome::Skipped);
        assert!(p.line().starts_with("[galera 1] galera.basic skipped"));
    }
}
