//! `wsrep_*` status in Prometheus' text exposition format (version 0.0.4).
//!
//! Every status the provider reports becomes a series named after it, so a
//! dashboard written against `SHOW STATUS` reads the same names:
//! - counters (what only grows until `FLUSH STATUS`) get `_total`, and
//!   nanoseconds become seconds, as Prometheus' naming rules ask;
//! - other numbers are gauges; `true`/`false` become 1/0;
//! - text becomes an `_info` series whose label carries it, except text that
//!   changes all the time (progress lines), which would only churn series.

/// One status value, as `SHOW STATUS` shows it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Double(f64),
    Text(String),
}

/// Statuses that only grow (until `FLUSH STATUS`, which Prometheus reads as
/// a counter reset).
const COUNTERS: &[&str] = &[
    "replicated",
    "replicated_bytes",
    "repl_keys",
    "repl_keys_bytes",
    "repl_data_bytes",
    "repl_other_bytes",
    "received",
    "received_bytes",
    "local_commits",
    "local_cert_failures",
    "local_bf_aborts",
    "local_replays",
    "flow_control_sent",
    "flow_control_recv",
    "apply_waits",
    "causal_reads",
];

/// Text that is a moving progress report or a list that changes with every
/// message: as a label it would make a new series each scrape.
const NOT_AS_LABELS: &[&str] = &["ist_receive_status", "evs_repl_latency", "evs_delayed", "evs_evict_list"];

/// Renders `(name without "wsrep_", value)` pairs, then `extra` series and
/// `histograms` the caller computed itself (already in the final form).
pub fn render(status: &[(&str, Value)], extra: &[Series], histograms: &[Histogram]) -> String {
    let mut out = String::new();
    for (name, value) in status {
        if let Some(series) = series(name, value) {
            series.write(&mut out);
        }
    }
    for series in extra {
        series.write(&mut out);
    }
    for histogram in histograms {
        histogram.write(&mut out);
    }
    out
}

/// A distribution: how many observations fell at or below each bound.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    pub name: String,
    pub help: String,
    /// Upper bounds, increasing; the `+Inf` bucket is implied.
    pub bounds: Vec<f64>,
    /// Observations per bucket, not cumulative: one per bound, then one for
    /// those above the last bound.
    pub counts: Vec<u64>,
    pub sum: f64,
}

impl Histogram {
    /// Prometheus' buckets are cumulative (`le`: at or below), and the
    /// `+Inf` bucket equals `_count`. A `counts` one short (no overflow
    /// bucket) is read as none above the last bound.
    fn write(&self, out: &mut String) {
        use std::fmt::Write;
        let name = &self.name;
        let _ = write!(out, "# HELP {name} {}\n# TYPE {name} histogram\n", self.help);
        let mut seen = 0u64;
        for (i, bound) in self.bounds.iter().enumerate() {
            seen += self.counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {seen}", number(*bound));
        }
        let count = seen + self.counts.iter().skip(self.bounds.len()).sum::<u64>();
        let _ = write!(
            out,
            "{name}_bucket{{le=\"+Inf\"}} {count}\n{name}_sum {}\n{name}_count {count}\n",
            number(self.sum)
        );
    }
}

/// One metric with a single sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub kind: &'static str,
    pub help: String,
    /// `name="value"` pairs, already escaped.
    pub labels: String,
    pub value: f64,
}

impl Series {
    pub fn gauge(name: &str, help: &str, value: f64) -> Series {
        Series { name: name.into(), kind: "gauge", help: help.into(), labels: String::new(), value }
    }

    fn write(&self, out: &mut String) {
        use std::fmt::Write;
        let labels = if self.labels.is_empty() { String::new() } else { format!("{{{}}}", self.labels) };
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{labels} {value}\n",
            name = self.name,
            help = self.help,
            kind = self.kind,
            value = number(self.value)
        );
    }
}

fn series(name: &str, value: &Value) -> Option<Series> {
    let base = format!("wsrep_{}", metric_name(name));
    let help = format!("SHOW STATUS LIKE 'wsrep_{name}'.");
    let numeric = match value {
        Value::Int(v) => Some(*v as f64),
        Value::Double(v) => Some(*v),
        Value::Text(t) if t == "true" => Some(1.0),
        Value::Text(t) if t == "false" => Some(0.0),
        Value::Text(_) => None,
    };
    match (value, numeric) {
        _ if name.ends_with("_ns") && numeric.is_some() => {
            let seconds = format!("{}_seconds_total", base.trim_end_matches("_ns"));
            let help = format!("SHOW STATUS LIKE 'wsrep_{name}', in seconds.");
            Some(Series { name: seconds, kind: "counter", help, labels: String::new(), value: numeric? / 1e9 })
        }
        (_, Some(v)) if COUNTERS.contains(&name) => {
            Some(Series { name: format!("{base}_total"), kind: "counter", help, labels: String::new(), value: v })
        }
        (_, Some(v)) => Some(Series { name: base, kind: "gauge", help, labels: String::new(), value: v }),
        (Value::Text(_), None) if NOT_AS_LABELS.contains(&name) => None,
        (Value::Text(text), None) => Some(Series {
            name: format!("{base}_info"),
            kind: "gauge",
            help,
            labels: format!("value=\"{}\"", escape_label(text)),
            value: 1.0,
        }),
        _ => None,
    }
}

/// Prometheus names are `[a-zA-Z_:][a-zA-Z0-9_:]*`; status names already
/// are, but a character outside that set must not break the whole page.
fn metric_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c.to_ascii_lowercase() } else { '_' }).collect()
}

fn escape_label(s: &str) -> String {
    s.chars()
        .flat_map(|c| match c {
            '\\' => vec!['\\', '\\'],
            '"' => vec!['\\', '"'],
            '\n' => vec!['\\', 'n'],
            c => vec![c],
        })
        .collect()
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
