#!/usr/bin/env bash
# Benchmarks on a machine without MariaDB, Galera or sysbench installed (the 16-core device
# machine): pack everything here, carry .devbench/ there, run there.
#
#   scripts/device-bench.sh pack [EXTRA.so ...]   # here: .devbench/ (git-ignored; about 45 MiB)
#   scripts/device-bench.sh run OUTDIR            # there, from the repository root
#
# `pack` takes target/release/libtandem.so, tandem and tandem-lab (build them first) and, optionally,
# other builds of the provider to compare (named variant-1.so, variant-2.so, ... there).
# `run` measures, each step bounded so that a slow one leaves the next its time:
#   1. the causal-read and flow-control cells (quick sizes, 10 s runs) on Tandem and Galera (Tandem's
#      causal reads twice: by default and with repl.causal_read_lease=YES);
#   2. the same cells on Tandem once per variant;
#   3. with TLS=1: the TLS cell (oltp_write_only 16 threads spread, plaintext and TLS clusters of both
#      providers, 3 rounds; quick sizes), issue 9's measurement;
#   4. unless MATRIX=0: oltp_write_only at 1, 16 and 128 threads on node 1 and spread, on Tandem, Galera and
#      standalone, plus the 1-node cell; 8 tables x 100k rows, one 8 s round per cell;
#   5. with GROUP_THREADS=N: that matrix once more on Tandem alone with gcomm.threads=N (the default is
#      one group thread; N=2 measures what a second one gives on this machine).
# CELLS=0 skips steps 1 and 2; PLACEMENTS=node1 runs the matrix on node 1 only; T_MATRIX and T_THREADS
# bound steps 4 and 5 in seconds (360 and 240): for a short device lease.
# Reports land in OUTDIR (render a report again with `tandem-lab bench --render-from X.json`).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
dev=$here/.devbench

pack() {
    rm -rf "$dev" && mkdir -p "$dev/bins"
    grep -qs '^/.devbench/' "$(git -C "$here" rev-parse --git-dir)/info/exclude" \
        || echo /.devbench/ >>"$(git -C "$here" rev-parse --git-dir)/info/exclude"
    cp "$here/target/release/tandem" "$here/target/release/tandem-lab" "$here/target/release/libtandem.so" "$dev/bins/"
    local n=0
    for so in "$@"; do n=$((n + 1)); cp "$so" "$dev/bins/variant-$n.so"; done
    strip --strip-unneeded "$dev/bins/"*
    tar -C "$dev/bins" -czf "$dev/tandem-bins.tar.gz" . && rm -rf "$dev/bins"
    bash "$here/../shared/tools/relocatable-bundle.sh" "$dev/b.tar.gz"
    du -sh "$dev"
}

run() {
    local out=$1 t=/tmp/t
    mkdir -p "$out"
    rm -rf /tmp/b $t && mkdir -p $t && tar -C /tmp -xzf "$dev/b.tar.gz" && tar -C $t -xzf "$dev/tandem-bins.tar.gz" || exit 1
    export PATH=/tmp/b/bin:$PATH LD_LIBRARY_PATH=/tmp/b/lib LUA_PATH="/tmp/b/share/sysbench/?.lua;;"
    { nproc; uname -r; grep -m1 "model name" /proc/cpuinfo; ldd --version | head -1; } >"$out/machine.txt" 2>&1
    local cells=(bench --basedir /tmp/b --quick --duration 10 --no-matrix --no-rejoin --no-single-node --causal-cell --fc-cell)
    local placements=${PLACEMENTS:-node1,spread}
    [ "${CELLS:-1}" = 0 ] || timeout 200 $t/tandem-lab "${cells[@]}" --targets tandem,galera --tandem-path $t/libtandem.so \
        --dir /tmp/causal --doc "$out/cells.md" --json "$out/cells.json" >"$out/cells.log" 2>&1
    for so in $t/variant-*.so; do
        [ -e "$so" ] && [ "${CELLS:-1}" != 0 ] || continue
        local v; v=$(basename "$so" .so)
        timeout 130 $t/tandem-lab "${cells[@]}" --targets tandem --tandem-path "$so" \
            --dir "/tmp/$v" --doc "$out/cells-$v.md" --json "$out/cells-$v.json" >"$out/cells-$v.log" 2>&1
    done
    if [ "${TLS:-0}" = 1 ]; then
        timeout 300 $t/tandem-lab bench --basedir /tmp/b --quick --duration 10 --targets tandem,galera \
            --workloads oltp_write_only --threads 16 --placements spread --rounds 3 --no-rejoin --no-single-node \
            --tls-cell --tandem-path $t/libtandem.so --dir /tmp/tls --doc "$out/tls.md" --json "$out/tls.json" \
            >"$out/tls.log" 2>&1
    fi
    [ "${MATRIX:-1}" = 0 ] && return
    timeout "${T_MATRIX:-360}" $t/tandem-lab bench --basedir /tmp/b --targets tandem,galera,standalone --workloads oltp_write_only \
        --threads 1,16,128 --placements "$placements" --rounds 1 --duration 8 --warmup 2 --no-rejoin \
        --tandem-path $t/libtandem.so --dir /tmp/matrix --doc "$out/matrix.md" --json "$out/matrix.json" \
        >"$out/matrix.log" 2>&1
    [ -n "${GROUP_THREADS:-}" ] || return
    rm -rf /tmp/matrix
    timeout "${T_THREADS:-240}" $t/tandem-lab bench --basedir /tmp/b --targets tandem --workloads oltp_write_only \
        --threads 1,16,128 --placements "$placements" --rounds 1 --duration 8 --warmup 2 --no-rejoin \
        --no-single-node --tandem-option "gcomm.threads=$GROUP_THREADS" --tandem-path $t/libtandem.so \
        --dir /tmp/matrix-threads --doc "$out/matrix-threads.md" --json "$out/matrix-threads.json" \
        >"$out/matrix-threads.log" 2>&1
}

case "${1:-}" in
pack) shift; pack "$@" ;;
run) run "${2:?OUTDIR}" ;;
*) echo "usage: $0 pack [EXTRA.so ...] | run OUTDIR" >&2; exit 2 ;;
esac
