#!/usr/bin/env python3
"""Pick "basic functionality" tests from the installed MTR galera suite.

Static filter only (no test is run here).  A test is excluded when
  * its name matches one of NAME_EXCLUDE (debug/sync/SST/IST/gcache/streaming
    replication/SSL/encryption/multi-node/restart-style names), or
  * it is listed in suite/galera/disabled.def, or
  * it (transitively, through --source) includes one of INC_EXCLUDE
    (debug server build, Galera debug sync points, big tests, SSL, stunnel,
    qpress, mariabackup, node kill/restart/shutdown, wsrep-recover), or
  * it uses a SET of debug variables directly (debug_dbug, debug_sync,
    wsrep_provider_options dbug/signal), or
  * its own .cnf/.opt/-master.opt does not build on the plain 2-node cluster
    (galera_2nodes.cnf) or asks for SSL/an explicit SST method, or
  * it has .combinations (would run several times).
Prints "galera.<name><TAB><lines>" sorted by test length (shortest first),
with galera.basic and galera.fk always first.

Usage: select-candidates.py [--max N] [--all] [--notes]   (default N=80)
  --all    every test of the suite with its exclusion reason (or KEEP)
  --notes  add a third column: provider-facing features the kept test touches
           (own .cnf/.opt => server restart, provider options it sets, provider
           status variables it reads, error-log greps, suppressed provider text)
"""
import os
import re
import sys

MTR = os.environ.get("MTR_DIR", "/usr/share/mysql/mysql-test")
SUITE = os.path.join(MTR, "suite", "galera")

NAME_EXCLUDE = re.compile(
    r"debug|sync|sst|(^|_)ist(_|$)|gcache|gcs|_sr_|_sr$|^galera_sr|^GCF|ssl|tls|encrypt|3nodes|4nodes|"
    r"restart|kill|recover|crash|wan|segment|evs|split_brain|garbd|notify|"
    r"as_slave|as_master|replica|backup|bf_abort|bf_kill|bf_lock_wait|"
    r"pc_|quorum|bootstrap|isolate|galera_partition$|shutdown|desync|vote|"
    r"rsu|toi_lock|ftwrl|flush_local|galera_gra_log|inject|mysqldump",
    re.I,
)

INC_EXCLUDE = {
    "have_debug.inc", "have_debug_sync.inc", "galera_have_debug_sync.inc",
    "big_test.inc", "have_ssl_communication.inc", "have_ssl_crypto_functs.inc",
    "have_openssl.inc", "have_stunnel.inc", "have_qpress.inc",
    "have_mariabackup.inc", "kill_galera.inc", "restart_mysqld.inc",
    "shutdown_mysqld.inc", "start_mysqld.inc", "force_restart.inc",
    "galera_wsrep_recover.inc", "galera_set_sync_point.inc",
    "galera_signal_sync_point.inc", "galera_wait_sync_point.inc",
    "galera_clear_sync_point.inc", "wait_until_disconnected.inc",
    "have_file_key_management_plugin.inc", "galera_4nodes.inc",
    "galera_3nodes.inc", "wsrep_wait_membership.inc",
    "have_innodb_4k.inc", "have_innodb_8k.inc", "have_innodb_16k.inc",
    "have_innodb_32k.inc", "have_innodb_64k.inc", "galera_st_kill_slave.inc",
    "galera_st_shutdown_slave.inc", "galera_st_clean_slave.inc",
    "galera_st_disconnect_slave.inc", "galera_st_kill_slave_ddl.inc",
    "galera_sst_set_mysqldump.inc", "galera_sst_restore.inc",
}

BODY_EXCLUDE = re.compile(
    r"debug_dbug|debug_sync|dbug=|signal=|gmcast\.isolate|pc\.bootstrap|"
    r"grastate\.dat|--exec\s+\$MYSQLD|wsrep_cluster_address\s*=|"
    r"wsrep_provider\s*=|wsrep_on\s*=\s*(0|OFF)|wsrep_sst_method",
    re.I,
)

SRC_RE = re.compile(r"^\s*-{0,2}source\s+([^\s;]+)", re.I | re.M)


def resolve(ref, here):
    for base in (here, SUITE, os.path.join(SUITE, "t"), MTR,
                 os.path.join(MTR, "include")):
        p = os.path.normpath(os.path.join(base, ref))
        if os.path.isfile(p):
            return p
    return None


def closure(path, seen=None):
    seen = set() if seen is None else seen
    if path in seen:
        return seen
    seen.add(path)
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return seen
    for ref in SRC_RE.findall(text):
        if "$" in ref:
            continue
        p = resolve(ref, os.path.dirname(path))
        if p:
            closure(p, seen)
    return seen


def disabled():
    out = set()
    try:
        for line in open(os.path.join(SUITE, "disabled.def")):
            line = line.split("#", 1)[0].strip()
            if ":" in line:
                out.add(line.split(":", 1)[0].strip())
    except OSError:
        pass
    return out


def reason(name):
    tdir = os.path.join(SUITE, "t")
    test = os.path.join(tdir, name + ".test")
    if NAME_EXCLUDE.search(name):
        return "name"
    if os.path.exists(os.path.join(tdir, name + ".combinations")):
        return "combinations"
    files = closure(test)
    for f in files:
        if os.path.basename(f) in INC_EXCLUDE:
            return "include " + os.path.basename(f)
    body = open(test, errors="replace").read()
    m = BODY_EXCLUDE.search(body)
    if m:
        return "body " + m.group(0)
    cnf = os.path.join(tdir, name + ".cnf")
    if os.path.exists(cnf):
        c = open(cnf, errors="replace").read()
        if "galera_2nodes.cnf" not in c:
            return "cnf topology"
        if re.search(r"ssl|sst_method|wsrep_provider_options=.*(isolate|segment)",
                     c, re.I):
            return "cnf options"
    for opt in (name + ".opt", name + "-master.opt"):
        p = os.path.join(tdir, opt)
        if os.path.exists(p) and re.search(r"ssl|debug|sst", open(p).read(), re.I):
            return "opt"
    return None


# Status variables that come from the provider's stats_get (contract section 5.2)
PROVIDER_STATUS = set("""local_state_uuid protocol_version last_committed replicated
replicated_bytes repl_keys repl_keys_bytes repl_data_bytes repl_other_bytes received
received_bytes local_commits local_cert_failures local_replays local_send_queue
local_send_queue_max local_send_queue_min local_send_queue_avg local_recv_queue
local_recv_queue_max local_recv_queue_min local_recv_queue_avg local_cached_downto
flow_control_paused_ns flow_control_paused flow_control_sent flow_control_recv
flow_control_active flow_control_requested cert_deps_distance apply_oooe apply_oool
apply_window apply_waits commit_oooe commit_oool commit_window local_state
local_state_comment cert_index_size causal_reads cert_interval open_transactions
open_connections incoming_addresses cluster_weight desync_count evs_delayed
evs_evict_list evs_repl_latency evs_state gcomm_uuid gmcast_segment""".split())

# keys every node already gets from galera_2nodes.cnf
DEFAULT_KEYS = {"repl.causal_read_timeout", "base_port", "evs.suspect_timeout",
                "evs.inactive_timeout", "evs.install_timeout", "pc.wait_prim_timeout",
                "gcache.size"}

PROVIDER_LOG_TEXT = re.compile(r"Unknown parameter|Maximum writeset size|"
                               r"conflict state|SST failed", re.I)


def notes(name):
    tdir = os.path.join(SUITE, "t")
    test = os.path.join(tdir, name + ".test")
    texts = []
    for f in closure(test):
        if f == test or os.path.dirname(f) == tdir:
            texts.append(open(f, errors="replace").read())
    body = "\n".join(texts)
    out = []
    own = [ext for ext in (".cnf", ".opt", "-master.opt") if
           os.path.exists(os.path.join(tdir, name + ext))]
    if own:
        out.append("own " + "/".join(own) + " (restart)")
    keys = set()
    for m in re.finditer(r"wsrep_provider_options\s*=\s*['\"]([^'\"]*)", body, re.I):
        for kv in m.group(1).split(";"):
            k = kv.split("=", 1)[0].strip()
            if k and not k.startswith("$"):
                keys.add(k)
    cnf = os.path.join(tdir, name + ".cnf")
    if os.path.exists(cnf):
        for m in re.finditer(r"wsrep_provider_options\s*=\s*['\"]([^'\"]*)",
                             open(cnf, errors="replace").read(), re.I):
            for kv in m.group(1).split(";"):
                k = kv.split("=", 1)[0].strip()
                if k and k not in DEFAULT_KEYS:
                    keys.add(k + "(cnf)")
    if re.search(r"wsrep_provider_options\s*=\s*\$", body, re.I):
        keys.add("(restore)")
    if keys:
        out.append("sets provider options " + ",".join(sorted(keys)))
    st = sorted({v.lower() for v in re.findall(r"wsrep_([a-z_]+)", body, re.I)}
                & PROVIDER_STATUS)
    if st:
        out.append("reads provider status " + ",".join(st))
    if any(os.path.basename(f) == "check_galera_version.inc" for f in closure(test)):
        out.append("parses wsrep_provider_version (check_galera_version.inc)")
    if re.search(r"@@(global\.)?wsrep_provider_options|LIKE\s+'wsrep_provider_options'", body, re.I):
        out.append("prints/parses @@wsrep_provider_options")
    if re.search(r"search_pattern_in_file|assert_grep", body):
        out.append("greps error log")
    sup = [m.group(1) for m in re.finditer(r"add_suppression\(\s*[\"'](.*?)[\"']\s*\)", body)
           if PROVIDER_LOG_TEXT.search(m.group(1))]
    if sup:
        out.append("suppresses provider log text: " + " / ".join(sup))
    return "; ".join(out)


def main():
    args = sys.argv[1:]
    limit = 80
    if "--max" in args:
        limit = int(args[args.index("--max") + 1])
    show_all = "--all" in args
    with_notes = "--notes" in args
    dis = disabled()
    tdir = os.path.join(SUITE, "t")
    keep = []
    for fn in sorted(os.listdir(tdir)):
        if not fn.endswith(".test"):
            continue
        name = fn[:-5]
        r = "disabled.def" if name in dis else reason(name)
        if name in ("basic", "fk"):
            r = None
        n = sum(1 for _ in open(os.path.join(tdir, fn), errors="replace"))
        if show_all:
            print(f"galera.{name}\t{n}\t{r or 'KEEP'}")
        elif r is None:
            keep.append((name not in ("basic", "fk"), n, name))
    if not show_all:
        keep.sort()
        for _, n, name in keep[:limit]:
            if with_notes:
                print(f"galera.{name}\t{n}\t{notes(name)}")
            else:
                print(f"galera.{name}\t{n}")


if __name__ == "__main__":
    main()
