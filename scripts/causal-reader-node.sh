#!/usr/bin/env bash
# Causal reads on the leader and on a follower, Tandem and Galera: a 3-node
# cluster of each, oltp_write_only with 4 threads on node 1 while
# oltp_point_select with 4 threads and wsrep_sync_wait=1 reads on node 1 (the
# group's leader on Tandem, its first node) and then on node 2; 10 s each.
# The bench's causal cell (`tandem-lab bench --causal-cell`) reads on node 2 only.
#
# Usage: scripts/causal-reader-node.sh [BASEDIR]
#   BASEDIR: a relocated MariaDB/Galera/sysbench tree (scripts/device-bench.sh
#   unpacks one at /tmp/b); without it the installed packages are used.
# Environment: TANDEM (the CLI, default target/release/tandem), PROVIDER
# (default target/release/libtandem.so).
set -u
cd "$(dirname "$0")/.."
tandem=${TANDEM:-target/release/tandem}
provider=$(realpath "${PROVIDER:-target/release/libtandem.so}")
base=() lua=/usr/share/sysbench galera=/usr/lib/libgalera_smm.so
if [ -n "${1:-}" ]; then
    base=(--basedir "$1") lua=$1/share/sysbench galera=$1/lib/libgalera_smm.so
    export PATH=$1/bin:$PATH LD_LIBRARY_PATH=$1/lib LUA_PATH="$1/share/sysbench/?.lua;;"
fi
sb() { sysbench "$lua/$1.lua" --mysql-socket="$2" --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=20000 "${@:3}"; }
sql() { mariadb --no-defaults -S "$1" -uroot -e "$2"; }
for p in tandem galera; do
    dir=$(mktemp -d /tmp/causal-reader-node.XXXXXX)
    path=$provider; [ $p = galera ] && path=$galera
    if ! timeout 300 "$tandem" cluster up "${base[@]}" --nodes 3 --provider $p --provider-path "$path" --dir "$dir/c" \
        --extra-option innodb_flush_log_at_trx_commit=2 --extra-option innodb_buffer_pool_size=1G >"$dir/up.log" 2>&1; then
        echo "$p: the cluster did not start ($dir/up.log)"
        "$tandem" cluster down --dir "$dir/c" >/dev/null 2>&1
        continue
    fi
    s1=$dir/c/node1/mysql.sock
    sql "$s1" "CREATE DATABASE IF NOT EXISTS sbtest"
    sb oltp_write_only "$s1" prepare >/dev/null
    for reader in 1 2; do
        s=$dir/c/node$reader/mysql.sock
        sql "$s" "SET GLOBAL wsrep_sync_wait=1"
        sb oltp_write_only "$s1" --threads=4 --time=10 run >"$dir/writes.txt" &
        reads=$(sb oltp_point_select "$s" --threads=4 --time=10 run |
            awk '/queries:/ { gsub(/\(/, "", $3); printf "%s reads/s", $3 } /95th/ { printf ", p95 %s ms", $3 }')
        wait
        writes=$(awk '/transactions:/ { gsub(/\(/, "", $3); print $3 }' "$dir/writes.txt")
        echo "$p, causal reads on node $reader: $reads; writes on node 1 meanwhile: $writes/s"
        sql "$s" "SET GLOBAL wsrep_sync_wait=0"
    done
    "$tandem" cluster down --dir "$dir/c" >/dev/null 2>&1
    rm -rf "$dir"
done
