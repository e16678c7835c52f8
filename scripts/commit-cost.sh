#!/usr/bin/env bash
# What a commit costs a 1-node cluster, provider against provider: for each
# variant a fresh 1-node cluster, oltp_write_only at 1 and 4 client threads,
# and per transaction the CPU of mariadbd and the context switches of its
# threads (each for all its threads, then for the group runtime's
# tandem-group-* alone).
# Context switches count hand-offs between threads, which CPU contention on
# a small machine hides from TPS; they change little from run to run.
#
# Usage: scripts/commit-cost.sh ROUNDS VARIANT...
#   VARIANT: standalone, galera, or the path of a provider library: a
#   libtandem.so build, or target/release/libtandem_null.so for the floor
#   (crates/null-provider: the server's own wsrep work, no replication).
# Example: scripts/commit-cost.sh 2 standalone galera target/release/libtandem.so
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:?rounds}; shift
tandem=target/release/tandem
dir=$(mktemp -d /tmp/tandem-commit-cost.XXXXXX)
trap '$tandem cluster down --dir "$dir/c" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

. scripts/lib/switches.sh
cpu_ticks() { awk '{ print $14 + $15 }' /proc/"$1"/stat; }
# CPU ticks of the group runtime's threads so far (those alive now: the
# runtime's threads live as long as the provider).
group_ticks() {
    for t in /proc/"$1"/task/*; do
        grep -q '^tandem-group' "$t/comm" 2>/dev/null && awk '{ print $14 + $15 }' "$t/stat"
        true
    done | awk '{ s += $1 } END { print s + 0 }'
}

for round in $(seq "$rounds"); do
    for v in "$@"; do
        $tandem cluster down --dir "$dir/c" >/dev/null 2>&1 || true
        rm -rf "$dir/c"
        case $v in
            standalone|galera) provider=(--provider "$v") ;;
            *) provider=(--provider-path "$(realpath "$v")") ;;
        esac
        $tandem cluster up --nodes 1 "${provider[@]}" --dir "$dir/c" \
            --extra-option innodb_flush_log_at_trx_commit=2 \
            --extra-option innodb_buffer_pool_size=512M >/dev/null 2>&1
        pid=$(cat "$dir/c/node1/mariadbd.pid")
        sock=$dir/c/node1/mysql.sock
        mariadb --no-defaults -S "$sock" -uroot -e "CREATE DATABASE IF NOT EXISTS sbtest"
        sb=(sysbench oltp_write_only --mysql-socket="$sock" --mysql-user=root --mysql-db=sbtest
            --tables=4 --table-size=10000)
        "${sb[@]}" prepare >/dev/null
        "${sb[@]}" --threads=4 --time=3 run >/dev/null
        for threads in 1 4; do
            read -r g0 a0 < <(switches "$pid"); c0=$(cpu_ticks "$pid"); q0=$(group_ticks "$pid")
            out=$("${sb[@]}" --threads="$threads" --time=8 run)
            read -r g1 a1 < <(switches "$pid"); c1=$(cpu_ticks "$pid"); q1=$(group_ticks "$pid")
            trx=$(awk '/transactions:/ { print $2 }' <<<"$out")
            p95=$(awk '/95th/ { print $3 }' <<<"$out")
            tick=$(getconf CLK_TCK)
            awk -v v="$(basename "$v")" -v t="$threads" -v trx="$trx" -v p95="$p95" \
                -v cpu=$((c1 - c0)) -v gcpu=$((q1 - q0)) -v tick="$tick" -v g=$((g1 - g0)) -v a=$((a1 - a0)) 'BEGIN {
                printf "%-14s round=%d threads=%d tps=%d p95_ms=%s cpu_us_per_trx=%.0f group_cpu_us_per_trx=%.0f switches_per_trx=%.2f group_switches_per_trx=%.2f\n",
                    v, '"$round"', t, trx / 8, p95, cpu / tick * 1e6 / trx, gcpu / tick * 1e6 / trx, a / trx, g / trx }'
        done
    done
done
