#!/usr/bin/env bash
# `make test-package`: the Debian package as a user gets it. It builds the
# package (build-package.sh --lintian), installs it with dpkg -i, checks what
# went where, starts a 3-node cluster from the installed paths only (a bare
# environment, run from /, joiners by the installed wsrep_sst_tandem), writes
# through every node and compares them, then removes and purges the package
# and checks that the databases' files did not change by a byte.
#
# Root, on a machine where `make deps` and `make build` ran. It leaves the
# machine as it found it: the package purged, its cluster stopped and
# deleted, also when a check fails. A machine where a package named tandem is
# installed is refused: this test never replaces a real install.
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
started=$SECONDS
installed_by_us=no
finished=no
work=
# The mariadbd PIDs cluster.json recorded, kept for when it is gone.
node_pids=

say() { echo "test-package: $*"; }
failure=
fail() {
	failure=$*
	echo "test-package: FAIL: $*" >&2
	exit 1
}
trap 'fail "line $LINENO: \`$BASH_COMMAND\` exited $?"' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# The values of one key in cluster.json (pretty JSON: one "key": value a line).
json_values() { sed -n "s/^ *\"$1\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" "$2"; }

# Whether PID is a mariadbd of this test's cluster (its command line names a
# my.cnf under the work directory), not a PID some other process reused.
ours() {
	local cmd
	cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
	[[ "$cmd" == *mariadbd* && "$cmd" == *"--defaults-file=$work/"* ]]
}

stop_our_servers() {
	local pids=$node_pids pid i
	[ -f "$work/cluster.json" ] && pids="$pids $(json_values pid "$work/cluster.json")"
	# Joiners first, as `tandem cluster down` does.
	for pid in $(echo "$pids" | tr ' ' '\n' | tac); do
		[[ "$pid" =~ ^[0-9]+$ ]] && ours "$pid" || continue
		say "cleanup: stopping mariadbd $pid"
		kill -TERM "$pid" 2>/dev/null || continue
		for i in $(seq 1 60); do
			ours "$pid" || break
			sleep 0.5
		done
		ours "$pid" && kill -KILL "$pid" 2>/dev/null
	done
	return 0
}

cleanup() {
	local rc=$?
	trap - ERR
	set +e
	if [ "$finished" != yes ] && [ -n "$work" ] && [ -d "$work" ]; then
		for log in "$work"/node*/error.log "$work/up.log"; do
			[ -f "$log" ] || continue
			echo "--- last lines of $log"
			tail -n 25 "$log"
		done
		stop_our_servers
	fi
	if [ "$installed_by_us" = yes ] && dpkg-query -W -f='${Status}' tandem 2>/dev/null | grep -qv 'not-installed'; then
		say "cleanup: purging the package this test installed"
		dpkg --purge tandem >/dev/null
	fi
	[ -n "$work" ] && rm -rf "$work"
	[ -z "$failure" ] || echo "test-package: FAIL: $failure" >&2
	exit "$rc"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || fail "run as root (it installs a package)"
if status=$(dpkg-query -W -f='${Status}' tandem 2>/dev/null) && [[ "$status" != *" not-installed" ]]; then
	# Its conffiles may hold a real configuration, and this test ends with a purge.
	echo "test-package: a package named tandem is already on this machine ($status):" >&2
	echo "test-package: this test installs its own and purges it, conffiles included." >&2
	if [[ "$status" == *" config-files" ]]; then
		echo "test-package: run 'dpkg --purge tandem' first, once its files in /etc can go." >&2
	else
		echo "test-package: run 'dpkg -r tandem' first, then 'dpkg --purge tandem' once its files in /etc can go." >&2
	fi
	exit 1
fi
for prog in mariadbd mariadb my_print_defaults systemd-analyze dpkg-deb lintian; do
	PATH=$PATH:/usr/sbin command -v "$prog" >/dev/null || fail "$prog is not installed (make deps)"
done

# --- build -----------------------------------------------------------------
say "building the package (build-package.sh --lintian)"
deb=$("$repo/packaging/deb/build-package.sh" --lintian | tail -n 1) || fail "build-package.sh --lintian failed"
[ -f "$deb" ] || fail "build-package.sh printed '$deb', which is no file"
say "built $deb ($(stat -c %s "$deb") bytes) in $((SECONDS - started)) s, lintian: no error or warning"

# --- install ---------------------------------------------------------------
# mariadb-server's dpkg trigger on /etc/mysql restarts its service where
# systemd does not run (invoke-rc.d): the distribution's server (the one
# whose pid file is the service's) started, stopped or restarted is a change
# this test made to the machine. Other clusters may come and go meanwhile.
distribution_server() {
	local pidfile pid
	pidfile=$(my_print_defaults --mysqld | sed -n 's/^--pid[-_]file=//p' | tail -n 1)
	pid=$(cat "${pidfile:-/run/mysqld/mysqld.pid}" 2>/dev/null) && [ -d "/proc/$pid" ] && echo "pid $pid" ||
		echo "not running"
}
server_before=$(distribution_server)
defaults_before=$(my_print_defaults galera mysqld server mariadb mariadbd client-server)
installed_by_us=yes
dpkg -i "$deb" >/dev/null || fail "dpkg -i $deb"
[ "$(dpkg-query -W -f='${Status}' tandem)" = "install ok installed" ] ||
	fail "dpkg -s tandem says '$(dpkg-query -W -f='${Status}' tandem)', not 'install ok installed'"
say "dpkg -i: install ok installed"

check_mode() {
	local file=$1 want=$2 got
	[ -f "$file" ] || fail "$file is not installed"
	got=$(stat -c '%a %U:%G' "$file")
	[ "$got" = "$want root:root" ] || fail "$file is $got, not $want root:root"
}
check_mode /usr/lib/tandem/libtandem.so 644
check_mode /usr/bin/tandem 755
check_mode /usr/bin/wsrep_sst_tandem 755
check_mode /lib/systemd/system/tandem-arbitrator.service 644
check_mode /etc/default/tandem-arbitrator 644
check_mode /etc/mysql/mariadb.conf.d/60-tandem.cnf 644
check_mode /usr/share/doc/tandem/examples/mariadb.service.d/tandem.conf 644
say "files and modes: provider 644, tandem and wsrep_sst_tandem 755, unit, defaults and cnf 644"
conffiles=$(dpkg-query -W -f='${Conffiles}' tandem | awk 'NF { print $1 }' | sort | tr '\n' ' ')
[ "$conffiles" = "/etc/default/tandem-arbitrator /etc/mysql/mariadb.conf.d/60-tandem.cnf " ] ||
	fail "conffiles are '$conffiles'"
# What runs (not the comments, which also tell a hand install what to do).
if grep -rh -v '^ *#' /lib/systemd/system/tandem-arbitrator.service /etc/default/tandem-arbitrator \
	/usr/share/doc/tandem/examples | grep -q /usr/local/bin; then
	fail "an installed file runs something from /usr/local/bin"
fi
/usr/bin/tandem --version >/dev/null || fail "/usr/bin/tandem --version"
say "conffiles: /etc/default/tandem-arbitrator and 60-tandem.cnf; nothing runs from /usr/local/bin"

verify=$(SYSTEMD_LOG_COLOR=0 systemd-analyze verify /lib/systemd/system/tandem-arbitrator.service 2>&1) ||
	fail "systemd-analyze verify tandem-arbitrator.service: $verify"
if grep -q tandem-arbitrator <<<"$verify"; then
	fail "systemd-analyze verify warns about the unit: $verify"
fi
if systemctl is-enabled tandem-arbitrator >/dev/null 2>&1; then
	fail "the arbitrator's unit was enabled on install"
fi
say "systemd-analyze verify: the arbitrator's unit is clean, and not enabled"

sample=$(my_print_defaults --defaults-file=/etc/mysql/mariadb.conf.d/60-tandem.cnf galera mysqld server mariadbd)
[ -z "$sample" ] || fail "60-tandem.cnf sets options: $sample"
defaults_after=$(my_print_defaults galera mysqld server mariadb mariadbd client-server)
[ "$defaults_before" = "$defaults_after" ] || fail "the server's options changed with the package installed"
say "60-tandem.cnf sets nothing, and the server's options are unchanged"

# --- a cluster from the installed paths only ---------------------------------
work=$(mktemp -d /tmp/tandem-pkg.XXXXXX)
bare=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root)
say "tandem cluster up --nodes 3 in $work (bare environment, from /)"
up_started=$SECONDS
if ! (cd / && "${bare[@]}" /usr/bin/tandem cluster up --nodes 3 --provider tandem \
	--provider-path /usr/lib/tandem/libtandem.so --dir "$work" \
	--extra-option wsrep_sst_method=tandem) >"$work/up.log" 2>&1; then
	fail "tandem cluster up failed (the last lines of its output, up.log, are printed)"
fi
node_pids=$(json_values pid "$work/cluster.json" | tr '\n' ' ')
mapfile -t sockets < <(json_values socket "$work/cluster.json")
mapfile -t datadirs < <(json_values datadir "$work/cluster.json")
mapfile -t logs < <(json_values error_log "$work/cluster.json")
[ "${#sockets[@]}" = 3 ] && [ "${#datadirs[@]}" = 3 ] && [ "${#logs[@]}" = 3 ] ||
	fail "cluster.json names ${#sockets[@]} sockets, ${#datadirs[@]} data dirs, ${#logs[@]} logs, not 3 each"
say "3 nodes Synced in $((SECONDS - up_started)) s (mariadbd pids $node_pids)"

[ ! -e "$work/bin/wsrep_sst_tandem" ] || fail "cluster up wrote $work/bin/wsrep_sst_tandem instead of using /usr/bin's"
! grep -rqs -e "$repo" "$work"/node*/my.cnf "$work/cluster.json" || fail "the cluster's files name the build tree $repo"
for pid in $node_pids; do
	grep -q ' /usr/lib/tandem/libtandem.so$' "/proc/$pid/maps" ||
		fail "mariadbd $pid did not load /usr/lib/tandem/libtandem.so"
done
for n in 2 3; do
	log=${logs[n - 1]}
	grep -q "WSREP: Running: 'wsrep_sst_tandem --role 'joiner'" "$log" ||
		fail "node $n's log ($log) shows no wsrep_sst_tandem --role joiner"
	grep -q 'WSREP_SST: \[INFO\] Received [0-9]* files, .* installed in ' "$log" ||
		fail "node $n's log ($log) shows no tandem state transfer received"
	pid=$(echo "$node_pids" | cut -d' ' -f"$n")
	path=$(tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^PATH=//p')
	[[ "$path" == /usr/bin:* ]] || fail "node $n's mariadbd runs with PATH=$path, not /usr/bin first"
done
say "the provider mariadbd loaded is /usr/lib/tandem/libtandem.so; no bin/ written in the cluster dir"
say "nodes 2 and 3 joined by wsrep_sst_tandem from /usr/bin (PATH=/usr/bin:...; logs: 'WSREP_SST: [INFO] Received')"

sql() {
	local node=$1
	shift
	"${bare[@]}" mariadb --no-defaults -S "${sockets[node - 1]}" -uroot -N -B -e "$*"
}
rows=100
sql 1 "CREATE DATABASE pkgtest; CREATE TABLE pkgtest.t (id INT PRIMARY KEY, node INT NOT NULL, v VARCHAR(64) NOT NULL)" ||
	fail "CREATE TABLE on node 1"
for n in 1 2 3; do
	values=$(for i in $(seq 1 $rows); do printf "(%d,%d,'row %d of node %d')," $((n * 1000 + i)) "$n" "$i" "$n"; done)
	sql "$n" "INSERT INTO pkgtest.t VALUES ${values%,}" || fail "INSERT on node $n"
done
for n in 1 2 3; do
	next=$(((n % 3) + 1))
	got=$(sql "$n" "SET SESSION wsrep_sync_wait=15;
		UPDATE pkgtest.t SET v = CONCAT(v, ' +$n') WHERE id BETWEEN $((next * 1000 + 1)) AND $((next * 1000 + 5));
		SELECT ROW_COUNT()") || fail "UPDATE of node $next's rows on node $n"
	[ "$got" = 5 ] || fail "node $n updated $got of node $next's rows, not 5"
done
say "wrote $rows rows through each node, and updated 5 of the next node's rows on each"
checksums=
for n in 1 2 3; do
	got=$(sql "$n" "SET SESSION wsrep_sync_wait=15; SELECT COUNT(*), COUNT(DISTINCT node) FROM pkgtest.t") ||
		fail "SELECT on node $n"
	[ "$got" = "$((3 * rows))	3" ] || fail "node $n holds '$got' rows/nodes, not $((3 * rows)) rows from 3 nodes"
	sum=$(sql "$n" "SET SESSION wsrep_sync_wait=15; CHECKSUM TABLE pkgtest.t" | cut -f2) || fail "CHECKSUM on node $n"
	checksums="$checksums $sum"
done
read -r c1 c2 c3 <<<"$checksums"
[ "$c1" = "$c2" ] && [ "$c2" = "$c3" ] || fail "the nodes' CHECKSUM TABLE differ:$checksums"
say "all 3 nodes hold $((3 * rows)) rows, CHECKSUM TABLE $c1 on each"
for n in 1 2 3; do
	said=$(cd / && "${bare[@]}" /usr/bin/tandem node check --node "${sockets[n - 1]}" 2>&1) ||
		fail "tandem node check on node $n exited $?: $said"
	say "tandem node check, node $n: exit 0 ($said)"
done

# --- stop, remove, purge -------------------------------------------------------
(cd / && "${bare[@]}" /usr/bin/tandem cluster down --dir "$work") >/dev/null 2>&1 || fail "tandem cluster down"
for pid in $node_pids; do
	! ours "$pid" || fail "mariadbd $pid still runs after tandem cluster down"
done
node_pids=
say "tandem cluster down: every mariadbd stopped"

listing() { find "${datadirs[@]}" -type f -print0 | sort -z | xargs -0 md5sum; }
listing >"$work/data.md5"
files=$(wc -l <"$work/data.md5")
[ "$files" -gt 30 ] || fail "the data dirs hold only $files files"

dpkg -r tandem >/dev/null || fail "dpkg -r tandem"
for f in /usr/lib/tandem/libtandem.so /usr/bin/tandem /usr/bin/wsrep_sst_tandem \
	/lib/systemd/system/tandem-arbitrator.service /usr/share/doc/tandem/copyright; do
	[ ! -e "$f" ] || fail "$f is still there after dpkg -r"
done
[ "$(dpkg-query -W -f='${Status}' tandem)" = "deinstall ok config-files" ] ||
	fail "after dpkg -r, dpkg says '$(dpkg-query -W -f='${Status}' tandem)', not 'deinstall ok config-files'"
for f in /etc/default/tandem-arbitrator /etc/mysql/mariadb.conf.d/60-tandem.cnf; do
	[ -f "$f" ] || fail "dpkg -r removed the conffile $f (only --purge may)"
done
listing | cmp -s - "$work/data.md5" || fail "dpkg -r changed the data dirs: $(listing | diff - "$work/data.md5" | head)"
say "dpkg -r: binaries, provider and unit gone, conffiles kept, $files data files unchanged (md5)"

dpkg --purge tandem >/dev/null || fail "dpkg --purge tandem"
installed_by_us=no
for f in /etc/default/tandem-arbitrator /etc/mysql/mariadb.conf.d/60-tandem.cnf /usr/lib/tandem; do
	[ ! -e "$f" ] || fail "$f is still there after dpkg --purge"
done
if dpkg-query -W -f='${Status}' tandem 2>/dev/null | grep -qv 'not-installed'; then
	fail "after dpkg --purge, dpkg says '$(dpkg-query -W -f='${Status}' tandem)'"
fi
listing | cmp -s - "$work/data.md5" || fail "dpkg --purge changed the data dirs"
say "dpkg --purge: conffiles gone, the $files data files still unchanged"
server_after=$(distribution_server)
[ "$server_after" = "$server_before" ] ||
	fail "the distribution's mariadbd was $server_before, is $server_after (mariadb-server's dpkg trigger?)"
say "the distribution's own mariadbd is as it was ($server_before)"

finished=yes
rm -rf "$work"
work=
say "OK ($((SECONDS - started)) s)"
