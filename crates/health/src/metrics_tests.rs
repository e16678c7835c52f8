use super::*;

fn page(status: &[(&str, Value)]) -> String {
    render(status, &[])
}

/// (name, labels, value) of every sample, and every name's TYPE.
fn samples(page: &str) -> (Vec<(String, String)>, Vec<(String, String)>) {
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
        let name = chunk[2].split(|c| c == ' ' || c == '{').next().unwrap();
        assert!(chunk[0].starts_with(&format!("# HELP {name} ")), "{chunk:?}");
        assert!(chunk[1].starts_with(&format!("# TYPE {name} ")), "{chunk:?}");
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{name}");
    }
    assert!(text.contains("wsrep_weird_name_x 1\n"), "{text}");
    assert!(text.contains("wsrep_cert_deps_distance NaN\n"), "{text}");
}

#[test]
fn extra_series_come_after_the_status() {
    let text = render(&[("local_state", Value::Int(4))], &[Series::gauge("tandem_available", "Whether ...", 1.0)]);
    let status_at = text.find("wsrep_local_state 4").unwrap();
    let extra_at = text.find("tandem_available 1").unwrap();
    assert!(status_at < extra_at, "{text}");
}
