//! `tandem node check`: its verdict on what a node shows, and its exit
//! statuses as scripts see them.

use std::collections::BTreeMap;
use std::process::{Command, Output};
use tandem::remote::check::*;

/// What a Tandem or Galera node shows, with the state, the component and
/// `read_only` the test gives.
fn node(state: i64, comment: &str, cluster: &str, read_only: &str) -> BTreeMap<String, String> {
    [
        ("wsrep_provider_name", "Tandem"),
        ("wsrep_local_state", &state.to_string()),
        ("wsrep_local_state_comment", comment),
        ("wsrep_cluster_status", cluster),
        ("read_only", read_only),
        ("wsrep_provider_options", "gcs.fc_limit = 16; health.donor_available = no; pc.weight = 1; "),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn status(shown: &BTreeMap<String, String>, options: CheckOptions) -> u8 {
    match decide(shown, &options) {
        Ok(verdict) => verdict.exit_status(),
        Err(_) => CANNOT_TELL,
    }
}

const PLAIN: CheckOptions = CheckOptions { available_when_donor: false, available_when_readonly: false };
const DONOR: CheckOptions = CheckOptions { available_when_donor: true, available_when_readonly: false };
const READONLY: CheckOptions = CheckOptions { available_when_donor: false, available_when_readonly: true };

#[test]
fn synced_in_the_primary_component_exits_0() {
    let synced = node(4, "Synced", "Primary", "OFF");
    assert_eq!(decide(&synced, &PLAIN), Ok(Verdict::Available("synced".into())));
    assert_eq!(status(&synced, PLAIN), 0);
}

#[test]
fn every_other_state_exits_1_with_the_health_checks_reason() {
    for (state, comment) in [(0, "Initialized"), (1, "Joining"), (2, "Donor/Desynced"), (3, "Joined")] {
        let shown = node(state, comment, "Primary", "OFF");
        assert_eq!(decide(&shown, &PLAIN), Ok(Verdict::NotAvailable(comment.into())), "{comment}");
        assert_eq!(status(&shown, PLAIN), 1, "{comment}");
    }
    let cut_off = node(4, "Synced", "non-Primary", "OFF");
    assert_eq!(decide(&cut_off, &DONOR), Ok(Verdict::NotAvailable("not in the primary component".into())));
    assert_eq!(status(&cut_off, PLAIN), 1);
}

#[test]
fn a_donor_counts_when_asked_or_when_the_node_counts_donors() {
    let donor = node(2, "Donor/Desynced", "Primary", "OFF");
    assert_eq!(status(&donor, PLAIN), 1);
    assert_eq!(status(&donor, DONOR), 0);
    let mut counts_donors = donor.clone();
    counts_donors.insert("wsrep_provider_options".into(), "health.donor_available = YES; pc.weight = 1; ".into());
    assert_eq!(status(&counts_donors, PLAIN), 0, "the node's health.donor_available, as /health reads it");
    // Only a donor: a joiner stays out whatever the options say.
    assert_eq!(status(&node(1, "Joining", "Primary", "OFF"), DONOR), 1);
    assert_eq!(status(&node(3, "Joined", "Primary", "OFF"), DONOR), 1);
}

#[test]
fn read_only_is_out_unless_allowed() {
    let read_only = node(4, "Synced", "Primary", "ON");
    let Ok(Verdict::NotAvailable(why)) = decide(&read_only, &PLAIN) else { panic!("a read_only node passed") };
    assert!(why.contains("read_only=ON"), "{why}");
    assert_eq!(status(&read_only, READONLY), 0);
    // Allowing read_only does not let in a node that is not synced.
    assert_eq!(status(&node(1, "Joining", "Primary", "ON"), READONLY), 1);
}

#[test]
fn a_server_without_a_provider_exits_1() {
    let mut alone = node(0, "Initialized", "Disconnected", "OFF");
    alone.insert("wsrep_provider_name".into(), String::new());
    let Ok(Verdict::NotAvailable(why)) = decide(&alone, &PLAIN) else { panic!("a server alone passed") };
    assert!(why.contains("no wsrep provider"), "{why}");
}

#[test]
fn missing_or_garbled_status_exits_2() {
    let synced = node(4, "Synced", "Primary", "OFF");
    for key in ["wsrep_local_state", "wsrep_local_state_comment", "wsrep_cluster_status", "read_only"] {
        let mut shown = synced.clone();
        shown.remove(key);
        let got = decide(&shown, &PLAIN);
        assert!(matches!(&got, Err(why) if why.contains(key)), "{key}: {got:?}");
        assert_eq!(status(&shown, PLAIN), CANNOT_TELL, "{key}");
    }
    let mut garbled = synced.clone();
    garbled.insert("wsrep_local_state".into(), "synced".into());
    assert_eq!(status(&garbled, PLAIN), CANNOT_TELL);
    assert_eq!((AVAILABLE, NOT_AVAILABLE, CANNOT_TELL), (0, 1, 2), "the codes --help documents");
}

fn tandem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(args)
        .env_remove("TANDEM_PASSWORD")
        .env_remove("TANDEM_PASSWORD_FILE")
        .output()
        .expect("running tandem")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn a_node_that_does_not_answer_exits_2() {
    // Port 1 on loopback: nothing listens, the connection is refused.
    let gone = tandem(&["node", "check", "--node", "127.0.0.1:1", "--timeout", "3"]);
    assert_eq!(gone.status.code(), Some(2), "{}", text(&gone));
    assert!(text(&gone).contains("127.0.0.1:1: cannot tell:"), "{}", text(&gone));
    let bad = tandem(&["node", "check", "--node", "db1:notaport"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("bad port"), "{}", text(&bad));
}

#[test]
fn help_documents_the_exit_statuses() {
    let help = tandem(&["node", "check", "--help"]);
    assert!(help.status.success(), "{}", text(&help));
    let said = text(&help).split_whitespace().collect::<Vec<_>>().join(" ");
    for want in ["0 the node should take traffic", "1 it should not", "2 cannot tell", "--available-when-readonly"] {
        assert!(said.contains(want), "no {want:?} in:\n{said}");
    }
}
