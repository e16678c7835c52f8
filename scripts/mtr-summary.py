#!/usr/bin/env python3
"""Summarise a raw mariadb-test-run (MTR) log, one line per test.

Usage: mtr-summary.py LOG [--expect FILE] [--tsv OUT]

LOG     stdout+stderr of mariadb-test-run.pl, ideally run with
        --timestamp --timediff (gives per-test wall time) and --parallel=1.
--expect FILE  tests that were asked for (one per line, '#' comments allowed);
        any that MTR never reported are listed as "not-run" and count as failures.
--tsv OUT  also write "test<TAB>result<TAB>mtr_ms<TAB>wall_s<TAB>reason" rows.

Printed line format:  <test> <result> <mtr-ms|-> <wall-s|-> <reason>
result is one of pass, fail, skipped, disabled, not-run, plus "warn" for tests
named in MTR's "Warnings generated in error logs during shutdown" blocks
(MTR fails the whole run for those although each test itself passed).
Exit status: 0 if nothing failed, 1 otherwise, 2 on usage error.
"""
import re
import sys

TS = r"(?:\d{6}\s+\d{1,2}:\d{2}:\d{2}(?:\s+\+(?P<diff>[\d.]+))?\s+)?"
RESULT_RE = re.compile(
    r"^(?:worker\[\d+\]\s+)?" + TS +
    r"(?P<test>[A-Za-z0-9_#.\-]+\.[^\s]+(?:\s+'[^']*')?)\s+(?:w\d+\s+)?"
    r"\[ (?P<res>(?:retry-)?(?:exp-)?(?:pass|fail|skipped|disabled)) \]\s*(?P<rest>.*)$"
)
# Lines prefixed "worker[NN]" come from a forked worker with its own --timediff
# clock; only the main process's stamps (result lines and its own messages) add up.
STAMP_RE = re.compile(r"^\d{6}\s+\d{1,2}:\d{2}:\d{2}\s+\+(?P<diff>[\d.]+)\s")
SHUTDOWN_WARN_RE = re.compile(r"\*\*\*Warnings generated in error logs during shutdown after running tests: (.*)")
FATAL_RE = re.compile(r"mysql-test-run: \*\*\* ERROR: (?!there were failing test cases).*")
CHECK_FAIL_RE = re.compile(r"MTR's internal check of the test case '([^']+)' failed")

REASON_PATTERNS = [
    re.compile(r"timeout after \d+ seconds"),
    re.compile(r"Failed to start mysqld\.\d+"),
    re.compile(r"Server \[mysqld\.\d+.*\] failed during test run"),
    re.compile(r"mysqltest: At line \d+: .*"),
    re.compile(r"mysqltest: Result (?:content mismatch|length mismatch).*"),
    re.compile(r"Result (?:content|length) mismatch"),
    re.compile(r"query '.*' failed: .*"),
    re.compile(r"Could not execute 'check-testcase'.*"),
    re.compile(r"mysqltest failed but provided no output"),
]
LOGLINE_RE = re.compile(r"\[(?:ERROR|Warning)\].*|^(?:WSREP_SST: )?\[ERROR\].*")


def reason_from_block(head, block):
    if head.startswith("Found warnings/errors"):
        for line in block:
            m = LOGLINE_RE.search(line)
            if m:
                return "log-warning: " + m.group(0).strip()[:200]
        return "warnings/errors in server log"
    for pat in REASON_PATTERNS:
        for line in [head] + block:
            m = pat.search(line)
            if m:
                return m.group(0).strip()[:200]
    for line in block:
        if line.strip() and not line.strip().startswith(("Test ended", "CURRENT_TEST", "- saving")):
            return line.strip()[:200]
    return head.strip()[:200] or "unknown"


def parse(lines):
    results = {}        # test -> dict
    order = []
    cur = None          # test whose failure block we are reading
    block = []
    acc = 0.0           # accumulated --timediff seconds since last result line
    shutdown_warn = {}  # test -> first warning line
    pending_warn = None
    latest = {}         # "suite.name" -> key of its most recent result line

    def close():
        nonlocal cur, block
        if cur is not None:
            r = results[cur]
            if r["result"] == "fail":
                r["reason"] = reason_from_block(r["reason"], block)
        cur, block = None, []

    for raw in lines:
        line = raw.rstrip("\n")
        m = RESULT_RE.match(line)
        if m:
            close()
            diff = float(m.group("diff")) if m.group("diff") else None
            wall = None
            if diff is not None:
                wall = acc + diff
                acc = 0.0
            test = m.group("test").strip()
            res = m.group("res").replace("retry-", "").replace("exp-", "")
            rest = m.group("rest").strip()
            ms = None
            if res == "pass":
                try:
                    ms = int(rest.split()[0])
                except (ValueError, IndexError):
                    ms = None
                rest = ""
            if test not in results:
                order.append(test)
            latest[test.split()[0]] = test
            results[test] = {"result": res, "ms": ms, "wall": wall, "reason": rest}
            if res == "fail":
                cur = test
            continue
        s = STAMP_RE.match(line)
        if s:
            acc += float(s.group("diff"))
        w = SHUTDOWN_WARN_RE.search(line)
        if w:
            close()
            # MTR names a test with combinations without the combination
            # ("galera.galera_aria"): it is the one that ran last, i.e. on the
            # server being shut down.
            pending_warn = [latest.get(t, t) for t in w.group(1).split()]
            continue
        c = CHECK_FAIL_RE.search(line)
        if c and c.group(1) in results and results[c.group(1)]["result"] == "pass":
            results[c.group(1)]["result"] = "fail"
            results[c.group(1)]["reason"] = "check-testcase failed (test left state behind)"
        if pending_warn is not None:
            lm = LOGLINE_RE.search(line)
            if lm:
                for t in pending_warn:
                    shutdown_warn.setdefault(t, lm.group(0).strip()[:200])
                pending_warn = None
            elif line.startswith("-----"):
                pending_warn = None
        if cur is not None:
            if line.startswith("-----") or line.startswith("The servers were restarted"):
                close()
            else:
                block.append(line)
    close()
    for t, w in shutdown_warn.items():
        r = results.get(t)
        if r is None:
            continue
        if r["result"] == "pass":
            r["result"] = "warn"
            r["reason"] = "shutdown log-warning: " + w
        elif r["result"] == "fail" and "shutdown" not in r["reason"]:
            r["reason"] += " | shutdown log-warning: " + w
    return results, order


def read_expect(path):
    out = []
    for line in open(path):
        words = line.split()
        # '#' only starts a comment as a word of its own: galera.galera#505 is a test
        if words and not words[0].startswith("#"):
            out.append(words[0])
    return out


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    log = argv[0]
    expect, tsv = None, None
    i = 1
    while i < len(argv):
        if argv[i] == "--expect":
            expect = read_expect(argv[i + 1]); i += 2
        elif argv[i] == "--tsv":
            tsv = argv[i + 1]; i += 2
        else:
            print(f"mtr-summary: unknown argument {argv[i]}", file=sys.stderr)
            return 2
    with open(log, errors="replace") as f:
        lines = f.readlines()
    results, order = parse(lines)
    fatal = [m.group(0) for m in (FATAL_RE.search(l) for l in lines) if m]
    if expect:
        for t in expect:
            if t not in results and not any(k.split()[0] == t for k in results):
                results[t] = {"result": "not-run", "ms": None, "wall": None,
                              "reason": "not reported by MTR (aborted run or unknown test)"}
                order.append(t)
    width = max([len(t) for t in order] + [10])
    counts = {}
    rows = []
    for t in order:
        r = results[t]
        counts[r["result"]] = counts.get(r["result"], 0) + 1
        ms = str(r["ms"]) if r["ms"] is not None else "-"
        wall = f"{r['wall']:.1f}" if r["wall"] is not None else "-"
        print(f"{t:<{width}} {r['result']:<8} {ms:>7} {wall:>7}  {r['reason']}")
        rows.append((t, r["result"], ms, wall, r["reason"]))
    total_wall = sum(r["wall"] for r in results.values() if r["wall"] is not None)
    summary = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    print(f"TOTAL {len(order)} tests: {summary}; wall {total_wall:.0f}s")
    if counts.get("warn"):
        print(f"NOTE: the {counts['warn']} 'warn' test(s) passed, but a server they ran on logged an "
              "unsuppressed [Warning]/[ERROR] at shutdown, which fails the MTR run")
    for line in fatal:
        print("MTR: " + line)
    if tsv:
        with open(tsv, "w") as f:
            f.write("test\tresult\tmtr_ms\twall_s\treason\n")
            for row in rows:
                f.write("\t".join(row) + "\n")
    bad = sum(v for k, v in counts.items() if k in ("fail", "not-run", "warn"))
    return 1 if bad or not order else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
