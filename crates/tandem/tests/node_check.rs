//! `tandem node check`: its verdict on what a node shows, its exit
//! statuses as scripts see them, and the keepalived configuration shipped
//! with it, checked by keepalived itself (`keepalived -t`). A live node's
//! verdicts are in tests/cluster/tests/health.rs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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

const PLAIN: CheckOptions = CheckOptions { available_when_donor: false, unavailable_when_readonly: false };
const DONOR: CheckOptions = CheckOptions { available_when_donor: true, unavailable_when_readonly: false };
const WRITER: CheckOptions = CheckOptions { available_when_donor: false, unavailable_when_readonly: true };

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
fn read_only_counts_only_when_asked() {
    let read_only = node(4, "Synced", "Primary", "ON");
    assert_eq!(status(&read_only, PLAIN), 0, "as /health: read_only is not its business");
    let Ok(Verdict::NotAvailable(why)) = decide(&read_only, &WRITER) else { panic!("a read_only node passed") };
    assert!(why.contains("read_only=ON"), "{why}");
    assert_eq!(status(&node(4, "Synced", "Primary", "OFF"), WRITER), 0);
    assert_eq!(status(&node(1, "Joining", "Primary", "OFF"), WRITER), 1);
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
    for want in ["0 the node should take traffic", "1 it should not", "2 cannot tell", "--unavailable-when-readonly"] {
        assert!(said.contains(want), "no {want:?} in:\n{said}");
    }
}

fn shipped_config() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/keepalived/keepalived.conf");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// keepalived refuses a loopback interface for VRRP: the test needs one of
/// this host's others in place of the example's `eth0`.
fn an_interface() -> String {
    let names = std::fs::read_dir("/sys/class/net").expect("/sys/class/net");
    names
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name != "lo")
        .min()
        .expect("a network interface other than lo for keepalived's VRRP instance")
}

fn keepalived() -> Option<PathBuf> {
    ["/usr/sbin/keepalived", "/sbin/keepalived", "/usr/local/sbin/keepalived"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// `keepalived -t`: its exit status and what it said.
fn config_test(keepalived: &Path, dir: &Path, name: &str, config: &str) -> (bool, String) {
    let file = dir.join(name);
    std::fs::write(&file, config).unwrap();
    let o = Command::new(keepalived).arg("-t").arg("-f").arg(&file).output().expect("running keepalived -t");
    (o.status.success(), text(&o))
}

#[test]
fn keepalived_accepts_the_shipped_vrrp_script() {
    let Some(keepalived) = keepalived() else {
        println!("SKIPPED: keepalived is not installed (`make deps` installs it)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The example as a host would have it: the binary where it was
    // installed, the host's own interface.
    let config = shipped_config()
        .replace("/usr/local/bin/tandem", env!("CARGO_BIN_EXE_tandem"))
        .replace("interface eth0", &format!("interface {}", an_interface()));
    assert!(config.contains(&format!("{} node check", env!("CARGO_BIN_EXE_tandem"))), "{config}");
    let (ok, said) = config_test(&keepalived, dir.path(), "keepalived.conf", &config);
    assert!(ok, "keepalived -t refused the example:\n{said}");

    // The test can fail: keepalived refuses a misspelt keyword, a check
    // script that is not there, and a track_script naming no vrrp_script.
    let misspelt = config.replacen("interval 2", "intervall 2", 1);
    let missing = config.replace(env!("CARGO_BIN_EXE_tandem"), "/nonexistent/tandem");
    let untracked = config.replacen("        tandem_node\n", "        tandem_nod\n", 1);
    for (name, broken) in [("misspelt", misspelt), ("missing", missing), ("untracked", untracked)] {
        assert_ne!(broken, config, "{name}: the example changed; this copy is not broken");
        let (ok, said) = config_test(&keepalived, dir.path(), name, &broken);
        assert!(!ok, "keepalived -t accepted the {name} copy:\n{said}");
    }
}
