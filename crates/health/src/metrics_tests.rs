use super::*;

fn page(status: &[(&str, Value)]) -> String {
    render(status, &[], &[])
}

type Pairs = Vec<(String, String)>;

/// (name with labels, value) of every sample, and every name's TYPE.
fn samples(page: &str) -> (Pairs, Pairs) {
    let mut samples = vec![];
    let mut types = vec![];
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            types.push((name.to_string(), kind.to_string()));
        } else if !line.starts_with('#') {
            let (series, value) = line.rsplit_once(' ').unwrap();
            samples.push((series.to_string(), value.to_string()));
        }
    }
    (samples, types)
}

#[test]
fn counters_gauges_and_units_follow_prometheus_naming() {
    let text = page(&[
        ("replicated_bytes", Value::Int(4096)),
        ("local_recv_queue", Value::Int(3)),
        ("flow_control_paused_ns", Value::Int(1_500_000_000)),
        ("flow_control_paused", Value::Double(0.25)),
        ("flow_control_active", Value::Text("true".into())),
        ("flow_control_requested", Value::Text("false".into())),
    ]);
    let (samples, types) = samples(&text);
    let expect = |name: &str, value: &str, kind: &str| {
        assert!(samples.contains(&(name.to_string(), value.to_string())), "{name} {value} in\n{text}");
        assert!(types.contains(&(name.to_string(), kind.to_string())), "{name} is a {kind} in\n{text}");
    };
    expect("wsrep_replicated_bytes_total", "4096", "counter");
    expect("wsrep_local_recv_queue", "3", "gauge");
    expect("wsrep_flow_control_paused_seconds_total", "1.5", "counter");
    expect("wsrep_flow_control_paused", "0.25", "gauge");
    expect("wsrep_flow_control_active", "1", "gauge");
    expect("wsrep_flow_control_requested", "0", "gauge");
}

#[test]
fn text_becomes_an_info_label_escaped_and_progress_lines_are_left_out() {
    let text = page(&[
        ("local_state_comment", Value::Text("Donor/Desynced".into())),
        ("incoming_addresses", Value::Text("a\"b\\c\nd".into())),
        ("ist_receive_status", Value::Text("52% complete, received seqno 1200 of 1001-1400".into())),
    ]);
    assert!(text.contains("wsrep_local_state_comment_info{value=\"Donor/Desynced\"} 1\n"), "{text}");
    assert!(text.contains("wsrep_incoming_addresses_info{value=\"a\\\"b\\\\c\\nd\"} 1\n"), "{text}");
    assert!(!text.contains("ist_receive_status"), "{text}");
}

#[test]
fn every_series_has_help_and_type_before_its_sample_and_valid_names() {
    let text = page(&[
        ("local_state", Value::Int(4)),
        ("weird-name.x", Value::Int(1)),
        ("cert_deps_distance", Value::Double(f64::NAN)),
    ]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() % 3, 0, "{text}");
    for chunk in lines.chunks(3) {
        let name = chunk[2].split([' ', '{']).next().unwrap();
        assert!(chunk[0].starts_with(&format!("# HELP {name} ")), "{chunk:?}");
        assert!(chunk[1].starts_with(&format!("# TYPE {name} ")), "{chunk:?}");
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{name}");
    }
    assert!(text.contains("wsrep_weird_name_x 1\n"), "{text}");
    assert!(text.contains("wsrep_cert_deps_distance NaN\n"), "{text}");
}

#[test]
fn extra_series_come_after_the_status() {
    let text = render(&[("local_state", Value::Int(4))], &[Series::gauge("tandem_available", "Whether ...", 1.0)], &[]);
    let status_at = text.find("wsrep_local_state 4").unwrap();
    let extra_at = text.find("tandem_available 1").unwrap();
    assert!(status_at < extra_at, "{text}");
}

#[test]
fn histograms_are_cumulative_and_end_in_the_count() {
    let latency = Histogram {
        name: "tandem_commit_latency_seconds".into(),
        help: "From certify to commit.".into(),
        bounds: vec![0.001, 0.01, 0.1],
        counts: vec![5, 0, 3, 2],
        sum: 1.25,
    };
    let text = render(&[], &[], &[latency]);
    let (samples, types) = samples(&text);
    let sample = |series: &str| samples.iter().find(|(s, _)| s == series).map(|(_, v)| v.clone());
    assert_eq!(types, vec![("tandem_commit_latency_seconds".to_string(), "histogram".to_string())]);
    assert_eq!(sample("tandem_commit_latency_seconds_bucket{le=\"0.001\"}").as_deref(), Some("5"));
    assert_eq!(sample("tandem_commit_latency_seconds_bucket{le=\"0.01\"}").as_deref(), Some("5"));
    assert_eq!(sample("tandem_commit_latency_seconds_bucket{le=\"0.1\"}").as_deref(), Some("8"));
    assert_eq!(sample("tandem_commit_latency_seconds_bucket{le=\"+Inf\"}").as_deref(), Some("10"));
    assert_eq!(sample("tandem_commit_latency_seconds_count").as_deref(), Some("10"));
    assert_eq!(sample("tandem_commit_latency_seconds_sum").as_deref(), Some("1.25"));
    // The buckets come in increasing order, as scrapers expect.
    let les: Vec<&str> =
        text.lines().filter_map(|l| l.split("le=\"").nth(1)).map(|r| r.split('"').next().unwrap()).collect();
    assert_eq!(les, vec!["0.001", "0.01", "0.1", "+Inf"]);
}

#[test]
fn an_empty_histogram_still_reads_as_zero_everywhere() {
    let empty = Histogram { name: "h".into(), help: "h".into(), bounds: vec![1.0], counts: vec![], sum: 0.0 };
    let text = render(&[], &[], &[empty]);
    assert!(text.contains("h_bucket{le=\"1\"} 0\n"), "{text}");
    assert!(text.contains("h_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n"), "{text}");
}
