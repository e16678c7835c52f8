#!/usr/bin/env bash
# Run MariaDB MTR tests (installed mariadb-test package) against a wsrep provider.
#
#   scripts/mtr.sh [--provider tandem|galera] [--provider-path PATH]
#                  [--list FILE | TEST ...] [--suite galera]
#                  [--parallel N] [--testcase-timeout MIN] [--out DIR] [--no-snapshot]
#                  [-- EXTRA-MTR-ARGS]
#
# TEST is "suite.name" (e.g. galera.basic); a bare name gets "<suite>." prepended.
# --list FILE: one test per line, first word used; blank lines and words starting
#   with '#' (comments) ignored.
# Default provider: tandem = <repo>/target/release/libtandem.so,
#                   galera = /usr/lib/galera/libgalera_smm.so.
# Output: raw MTR log + summary files under --out DIR (default: a new
# ${TMPDIR:-/tmp}/tandem-mtr.XXXXXX); the MTR vardir is DIR/var.
# The provider library is copied to DIR/provider/ first and the servers load
# that copy, so rebuilding target/release/libtandem.so during a run does not
# mix two builds in one run (--no-snapshot: load it in place). Its md5 and
# mtime are written to the log header.
# Prints one line per test: test result mtr-ms wall-s reason, then totals.
# Exit: 0 all listed tests passed or were skipped, 1 something failed / not run,
#       2 usage or environment error (no mariadb-test, no provider, ...).
#
# Environment quirks handled here (see docs/compatibility.md):
#  * SST: stock rsync SST fails when MTR runs as root, so every server gets
#    --wsrep_sst_method=mariabackup --wsrep_sst_auth=root: (MTR's root has no password).
#  * MTR runs mysqld with --user=root by itself when euid is 0.
#  * --timestamp --timediff are added so per-test wall time can be computed.
set -euo pipefail

die() { echo "mtr.sh: $*" >&2; exit 2; }

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MTR_DIR="${MTR_DIR:-/usr/share/mysql/mysql-test}"
SUMMARY="$REPO/scripts/mtr-summary.py"

provider=tandem
provider_path=""
suite=galera
list=""
parallel=1
tc_timeout=10
out=""
tests=()
extra=()
snapshot=1

while [ $# -gt 0 ]; do
  case "$1" in
    --provider) provider="${2:?}"; shift 2 ;;
    --provider=*) provider="${1#*=}"; shift ;;
    --provider-path) provider_path="${2:?}"; shift 2 ;;
    --provider-path=*) provider_path="${1#*=}"; shift ;;
    --list) list="${2:?}"; shift 2 ;;
    --list=*) list="${1#*=}"; shift ;;
    --suite) suite="${2:?}"; shift 2 ;;
    --suite=*) suite="${1#*=}"; shift ;;
    --parallel) parallel="${2:?}"; shift 2 ;;
    --parallel=*) parallel="${1#*=}"; shift ;;
    --testcase-timeout) tc_timeout="${2:?}"; shift 2 ;;
    --testcase-timeout=*) tc_timeout="${1#*=}"; shift ;;
    --out) out="${2:?}"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    --no-snapshot) snapshot=0; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    -*) die "unknown option $1 (use -- to pass options to MTR)" ;;
    *) tests+=("$1"); shift ;;
  esac
done

# ---- environment checks -------------------------------------------------
[ -f "$MTR_DIR/mariadb-test-run.pl" ] || \
  die "mariadb-test not found: $MTR_DIR/mariadb-test-run.pl missing (apt-get install mariadb-test, or set MTR_DIR)"
[ -d "$MTR_DIR/suite/$suite" ] || die "MTR suite '$suite' not found under $MTR_DIR/suite"
command -v perl >/dev/null || die "perl not found"
command -v python3 >/dev/null || die "python3 not found (needed by scripts/mtr-summary.py)"
command -v mariabackup >/dev/null || command -v mariadb-backup >/dev/null || \
  die "mariabackup not found (needed for SST under MTR as root; apt-get install mariadb-backup)"
command -v socat >/dev/null || echo "mtr.sh: warning: socat not found; mariabackup SST falls back to nc" >&2

if [ -z "$provider_path" ]; then
  case "$provider" in
    tandem) provider_path="$REPO/target/release/libtandem.so" ;;
    galera)
      for p in /usr/lib/galera/libgalera_smm.so /usr/lib/galera-4/libgalera_smm.so \
               /usr/lib64/galera-4/libgalera_smm.so /usr/lib64/galera/libgalera_smm.so; do
        if [ -f "$p" ]; then provider_path="$p"; break; fi
      done
      [ -n "$provider_path" ] || die "galera provider not found (apt-get install galera-4)" ;;
    *) die "--provider must be tandem or galera (or give --provider-path)" ;;
  esac
fi
[ -f "$provider_path" ] || die "provider library not found: $provider_path"
provider_path="$(realpath -s "$provider_path")"   # absolute, symlinks kept

check="$MTR_DIR/lib/My/SafeProcess/wsrep_check_version"
if [ -x "$check" ]; then
  if ! msg="$(WSREP_PROVIDER="$provider_path" "$check" -p 2>&1)"; then
    die "provider rejected by MTR's wsrep_check_version (the galera suite would be skipped): $msg"
  fi
fi

# ---- test list ----------------------------------------------------------
if [ -n "$list" ]; then
  [ -f "$list" ] || die "list file not found: $list"
  # '#' starts a comment only at line start or after whitespace: test names
  # such as galera.galera#505 or galera.mysql-wsrep#201 contain '#'.
  while IFS= read -r line || [ -n "$line" ]; do
    first=""
    read -r first _ <<<"$line" || true
    case "$first" in ''|'#'*) continue ;; esac
    tests+=("$first")
  done <"$list"
fi
[ ${#tests[@]} -gt 0 ] || die "no tests given (use --list FILE or TEST ...)"
for i in "${!tests[@]}"; do
  case "${tests[$i]}" in *.*) ;; *) tests[$i]="$suite.${tests[$i]}" ;; esac
done

# ---- run ----------------------------------------------------------------
if [ -z "$out" ]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/tandem-mtr.XXXXXX")"
else
  mkdir -p "$out"
  out="$(readlink -f "$out")"
fi
orig_provider="$provider_path"
provider_info="md5=$(md5sum <"$provider_path" | cut -d' ' -f1) mtime=$(date -u -r "$provider_path" +%Y-%m-%dT%H:%M:%SZ)"
if [ "$snapshot" -eq 1 ]; then
  mkdir -p "$out/provider"
  cp "$provider_path" "$out/provider/"
  provider_path="$out/provider/$(basename "$provider_path")"
  provider_info="copy of $orig_provider, $provider_info"
fi
log="$out/mtr.log"
expect="$out/tests.txt"
printf '%s\n' "${tests[@]}" >"$expect"

mtr_args=(
  --vardir="$out/var"
  --parallel="$parallel"
  --force
  --retry=0
  --max-test-fail=0
  --testcase-timeout="$tc_timeout"
  --timestamp --timediff
  --xml-report="$out/report.xml"
  --mysqld=--wsrep_sst_method=mariabackup
  --mysqld=--wsrep_sst_auth=root:
)
cmd=(perl ./mariadb-test-run.pl "${mtr_args[@]}" ${extra[@]+"${extra[@]}"} "${tests[@]}")

{
  echo "# mtr.sh $(date -Is) host=$(hostname) provider=$provider path=$provider_path ($provider_info)"
  echo "# cd $MTR_DIR && WSREP_PROVIDER=$provider_path ${cmd[*]}"
} >"$log"
echo "mtr.sh: provider=$provider ($provider_info), ${#tests[@]} test(s), log: $log" >&2

start=$(date +%s)
set +e
(cd "$MTR_DIR" && WSREP_PROVIDER="$provider_path" "${cmd[@]}") >>"$log" 2>&1
mtr_rc=$?
set -e
end=$(date +%s)
echo "# mtr exit status $mtr_rc, elapsed $((end - start))s" >>"$log"

set +e
python3 "$SUMMARY" "$log" --expect "$expect" --tsv "$out/summary.tsv" | tee "$out/summary.txt"
sum_rc=${PIPESTATUS[0]}
set -e
echo "elapsed $((end - start))s, mtr exit $mtr_rc, log $log, summary $out/summary.tsv"

if [ "$sum_rc" -ne 0 ] || [ "$mtr_rc" -ne 0 ]; then
  # MTR also fails for reasons the summary cannot attribute to a test
  # (e.g. bootstrap failure); report non-zero in every such case.
  exit 1
fi
exit 0
