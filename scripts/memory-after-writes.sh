#!/usr/bin/env bash
# What a node holds after a burst of writes: for each variant, one after
# the other, a 3-node cluster, sysbench oltp_write_only on node 1 (4
# threads, 4 tables of 10,000 rows) for SECONDS, then 5 s of quiet, then
# each node's RssAnon (anonymous memory the kernel counts for mariadbd:
# the heap and thread stacks, not the mapped files of the buffer pool's
# data or Galera's gcache).
#
# Usage: scripts/memory-after-writes.sh SECONDS VARIANT...
#   VARIANT: galera, or the path of a libtandem.so build.
# Example: scripts/memory-after-writes.sh 30 galera target/release/libtandem.so
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?seconds}; shift
tandem=target/release/tandem
dir=$(mktemp -d /tmp/tandem-memory.XXXXXX)
current=""
cleanup() {
    [ -n "$current" ] && $tandem cluster down --dir "$current" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT

n=0
for v in "$@"; do
    n=$((n + 1))
    case $v in
        galera) provider=(--provider galera) ;;
        *) provider=(--provider-path "$(realpath "$v")") ;;
    esac
    current=$dir/c$n
    $tandem cluster up --nodes 3 "${provider[@]}" --dir "$current" >"$dir/up.$n.log" 2>&1 || {
        cat "$dir/up.$n.log" >&2
        exit 1
    }
    sock=$current/node1/mysql.sock
    mariadb -S "$sock" -uroot -e "CREATE DATABASE IF NOT EXISTS sbtest"
    sb=(sysbench oltp_write_only --mysql-socket="$sock" --mysql-user=root --tables=4 --table-size=10000 --threads=4)
    "${sb[@]}" prepare >/dev/null
    tps=$("${sb[@]}" --time="$seconds" run | awk '/transactions:/ { gsub("[(]", "", $3); print $3 }')
    sleep 5 # quiet: what a burst leaves behind, not what it uses
    line=$(printf '%-16s tps=%-8s' "$(basename "$v")" "$tps")
    for i in 1 2 3; do
        kb=$(awk '/^RssAnon:/ { print $2 }' /proc/"$(cat "$current/node$i/mariadbd.pid")"/status)
        line+=$(printf ' node%d_rss_anon_mib=%d' "$i" $((kb / 1024)))
    done
    echo "$line"
    $tandem cluster down --dir "$current" >/dev/null 2>&1
    current=""
done
