# Sourced by scripts/commit-cost.sh and scripts/follower-cost.sh.

# "<group switches> <all switches>" of every thread of $1 so far: the group
# runtime's (tandem-group-*) threads, then all.
switches() {
    cat /proc/"$1"/task/*/status 2>/dev/null | awk '
        /^Name:/ { group = ($2 ~ /^tandem-group/) }
        /ctxt_switches/ { all += $2; if (group) g += $2 }
        END { print g + 0, all + 0 }'
}
