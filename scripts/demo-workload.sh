#!/usr/bin/env bash
# A short write workload on every node of a local cluster at once, then a
# check that every node holds the same rows.
# Usage: scripts/demo-workload.sh <cluster dir> [seconds]
set -euo pipefail
dir=${1:?cluster dir}
secs=${2:-15}
mapfile -t sockets < <(python3 -c '
import json, sys
state = json.load(open(sys.argv[1] + "/cluster.json"))
for n in state["nodes"]:
    print(n["socket"])' "$dir")
sb() { sysbench --db-driver=mysql --mysql-socket="$1" --mysql-user=root --mysql-db=demo \
        --tables=4 --table-size=1000 "${@:2}"; }
mariadb --no-defaults -S "${sockets[0]}" -uroot -e "CREATE DATABASE IF NOT EXISTS demo"
# Run again (as the README's restart walk-through does), it writes on the
# tables it loaded the first time.
if [ -z "$(mariadb --no-defaults -S "${sockets[0]}" -uroot -N -B -e "SHOW TABLES FROM demo LIKE 'sbtest4'")" ]; then
    echo "Loading 4 tables of 1000 rows through node 1..."
    sb "${sockets[0]}" oltp_write_only prepare >/dev/null
fi
echo "Writing on all ${#sockets[@]} nodes at once for ${secs}s (sysbench oltp_write_only, 4 threads each)..."
pids=()
for i in "${!sockets[@]}"; do
    sb "${sockets[$i]}" --threads=4 --time="$secs" --mysql-ignore-errors=1213,1205 oltp_write_only run \
        > "$dir/workload-node$((i + 1)).log" 2>&1 &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for i in "${!sockets[@]}"; do
    tps=$(grep -oP 'transactions:\s+\d+\s+\(\K[0-9.]+' "$dir/workload-node$((i + 1)).log" || echo "?")
    echo "node$((i + 1)): ${tps} commits/s"
done
echo "Checksums per node (must be identical):"
for i in "${!sockets[@]}"; do
    sums=$(mariadb --no-defaults -S "${sockets[$i]}" -uroot -N -B \
        -e "SET SESSION wsrep_sync_wait=15; CHECKSUM TABLE demo.sbtest1, demo.sbtest2, demo.sbtest3, demo.sbtest4" | awk '{print $2}' | paste -sd' ')
    echo "node$((i + 1)): $sums"
done
