#!/usr/bin/env bash
# What an idle cluster costs: for each variant a 3-node cluster with no
# clients, all started first so that they idle side by side, then the CPU
# of each node's mariadbd over SECONDS, in ms per second, with the threads
# that spent it (from /proc: utime + stime, in clock ticks, so a figure
# below 10 ms / SECONDS is noise).
#
# Usage: scripts/idle-cost.sh SECONDS VARIANT...
#   VARIANT: galera, or the path of a libtandem.so build.
# Example: scripts/idle-cost.sh 30 galera target/release/libtandem.so
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?seconds}; shift
tandem=target/release/tandem
dir=$(mktemp -d /tmp/tandem-idle-cost.XXXXXX)
cleanup() {
    for c in "$dir"/c*; do $tandem cluster down --dir "$c" >/dev/null 2>&1 || true; done
    rm -rf "$dir"
}
trap cleanup EXIT

# "thread-name ticks" per thread name of process $1.
ticks() {
    for t in /proc/"$1"/task/*; do
        printf '%s %s\n' "$(tr ' ' _ <"$t/comm")" "$(awk '{ print $14 + $15 }' "$t/stat")"
    done | awk '{ a[$1] += $2 } END { for (k in a) print k, a[k] }' | sort
}

n=0
for v in "$@"; do
    n=$((n + 1))
    case $v in
        galera) provider=(--provider galera) ;;
        *) provider=(--provider-path "$(realpath "$v")") ;;
    esac
    $tandem cluster up --nodes 3 "${provider[@]}" --dir "$dir/c$n" >"$dir/up.$n.log" 2>&1 || {
        cat "$dir/up.$n.log" >&2
        exit 1
    }
done
sleep 10 # past the joins' own work
n=0
for v in "$@"; do
    n=$((n + 1))
    for i in 1 2 3; do
        pid=$(cat "$dir/c$n/node$i/mariadbd.pid")
        ticks "$pid" >"$dir/before.$n.$i"
    done
done
sleep "$seconds"
hz=$(getconf CLK_TCK)
n=0
for v in "$@"; do
    n=$((n + 1))
    for i in 1 2 3; do
        pid=$(cat "$dir/c$n/node$i/mariadbd.pid")
        ticks "$pid" | join "$dir/before.$n.$i" - | awk -v v="$(basename "$v")" -v i="$i" -v s="$seconds" -v hz="$hz" '
            { ms = ($3 - $2) * 1000 / hz / s; total += ms; if (ms > 0) threads = threads sprintf(" %s=%.2f", $1, ms) }
            END { printf "%-14s node%d cpu_ms_per_s=%.2f%s\n", v, i, total, threads }'
    done
done
