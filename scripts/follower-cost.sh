#!/usr/bin/env bash
# What a commit on a follower costs, build against build: for each variant a
# fresh 3-node cluster, oltp_write_only on node 2 (a follower of Tandem's
# group: node 1 leads) at 1 and 4 client threads, and per transaction the
# context switches of node 2's and node 1's threads (the group runtime's
# tandem-group-* threads, then all). Variants alternate within each round,
# so drift on the machine hits them alike.
# Context switches count hand-offs between threads, which CPU contention on
# a small machine hides from TPS; they change little from run to run.
#
# Usage: scripts/follower-cost.sh ROUNDS LIBTANDEM.so...
# Environment: SECONDS_PER_RUN (default 20), THREADS (default "1 4").
# Example: scripts/follower-cost.sh 4 /tmp/base.so target/release/libtandem.so
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:?rounds}; shift
tandem=target/release/tandem
seconds=${SECONDS_PER_RUN:-20}
dir=$(mktemp -d /tmp/tandem-follower-cost.XXXXXX)
trap '$tandem cluster down --dir "$dir/c" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

. scripts/lib/switches.sh

for round in $(seq "$rounds"); do
    for v in "$@"; do
        $tandem cluster down --dir "$dir/c" >/dev/null 2>&1 || true
        rm -rf "$dir/c"
        $tandem cluster up --nodes 3 --provider-path "$(realpath "$v")" --dir "$dir/c" \
            --extra-option innodb_flush_log_at_trx_commit=2 \
            --extra-option innodb_buffer_pool_size=256M >/dev/null 2>&1
        p1=$(cat "$dir/c/node1/mariadbd.pid"); p2=$(cat "$dir/c/node2/mariadbd.pid")
        mariadb --no-defaults -S "$dir/c/node1/mysql.sock" -uroot -e "CREATE DATABASE IF NOT EXISTS sbtest"
        sb=(sysbench oltp_write_only --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=10000)
        "${sb[@]}" --mysql-socket="$dir/c/node1/mysql.sock" prepare >/dev/null
        "${sb[@]}" --mysql-socket="$dir/c/node2/mysql.sock" --threads=4 --time=3 run >/dev/null
        for threads in ${THREADS:-1 4}; do
            read -r g20 a20 < <(switches "$p2"); read -r g10 a10 < <(switches "$p1")
            out=$("${sb[@]}" --mysql-socket="$dir/c/node2/mysql.sock" --threads="$threads" --time="$seconds" run)
            read -r g21 a21 < <(switches "$p2"); read -r g11 a11 < <(switches "$p1")
            trx=$(awk '/transactions:/ { print $2 }' <<<"$out")
            p95=$(awk '/95th/ { print $3 }' <<<"$out")
            awk -v v="$v" -v t="$threads" -v trx="$trx" -v p95="$p95" -v s="$seconds" \
                -v g2=$((g21 - g20)) -v a2=$((a21 - a20)) -v g1=$((g11 - g10)) -v a1=$((a11 - a10)) 'BEGIN {
                printf "%-28s round=%d threads=%d tps=%d p95_ms=%s node2_group_switches_per_trx=%.2f node2_switches_per_trx=%.2f node1_group_switches_per_trx=%.2f node1_switches_per_trx=%.2f\n",
                    v, '"$round"', t, trx / s, p95, g2 / trx, a2 / trx, g1 / trx, a1 / trx }'
        done
    done
done
