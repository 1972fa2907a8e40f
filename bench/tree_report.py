#!/usr/bin/env python3
"""Tables for bench/tree_bench.sh.

    python3 bench/tree_report.py RESULTS_TSV

Reads the raw timings tree_bench.sh writes (one line per timed command:
round tool op seconds rss_kib bytes) and prints Markdown tables of medians
over rounds on stdout: one row per operation, one column group per tool,
then the ratios the tree-archive issue sets targets for.

Throughput is `bytes` (the tree's file bytes) over the wall-clock seconds of
the command, the same for every tool; ls and cat are shown in seconds.
"""
import collections
import statistics
import sys

MIB = 1 << 20
OPS = ["backup-1", "backup-2", "restore", "ls", "cat"]
OP_NOTES = {
    "backup-1": "first backup",
    "backup-2": "second backup, nothing changed",
    "restore": "full restore + sync",
    "ls": "list the whole snapshot",
    "cat": "one small file to stdout",
}
TOOLS = ["cairn", "cairn-enc", "cairn-seq", "restic", "borg", "cp"]
RATE_OPS = {"backup-1", "backup-2", "restore"}


def load(path):
    rows = []
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            if line.strip():
                rows.append(dict(zip(header, line.rstrip("\n").split("\t"))))
    return rows


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rows = load(sys.argv[1])
    by = collections.defaultdict(list)  # (op, tool) -> rows
    for r in rows:
        by[(r["op"], r["tool"])].append(r)
    tools = [t for t in TOOLS if any(k[1] == t for k in by)]
    tools += sorted({k[1] for k in by} - set(tools))
    rounds = len({r["round"] for r in rows})

    secs = {k: med([float(r["seconds"]) for r in v]) for k, v in by.items()}
    rate = {}
    for k, v in by.items():
        if k[0] in RATE_OPS:
            rate[k] = med([int(r["bytes"]) / MIB / float(r["seconds"]) for r in v])
    rss = {k: max(int(r["rss_kib"]) for r in v) / 1024 for k, v in by.items()}

    out = []
    out.append(f"**Medians over {rounds} round(s)**: MiB/s for backups and restores (file bytes "
               "÷ wall-clock seconds), seconds for ls and cat; peak RSS (`/usr/bin/time -f %M`, "
               "the largest of the rounds) in MiB.")
    out.append("")
    out.append("| operation | " + " | ".join(tools) + " |")
    out.append("|---|" + "---:|" * len(tools))
    for op in OPS:
        if not any((op, t) in by for t in tools):
            continue
        cells = []
        for t in tools:
            k = (op, t)
            if k not in by:
                cells.append("–")
            elif op in RATE_OPS:
                lo = min(int(r["bytes"]) / MIB / float(r["seconds"]) for r in by[k])
                hi = max(int(r["bytes"]) / MIB / float(r["seconds"]) for r in by[k])
                span = f" ({lo:.0f}–{hi:.0f})" if len(by[k]) > 1 else ""
                cells.append(f"{rate[k]:.0f} MiB/s{span} · {secs[k]:.2f} s")
            else:
                cells.append(f"{secs[k]:.3f} s")
        out.append(f"| {op} ({OP_NOTES.get(op, '')}) | " + " | ".join(cells) + " |")
    out.append("")
    out.append("| peak RSS, MiB | " + " | ".join(tools) + " |")
    out.append("|---|" + "---:|" * len(tools))
    for op in OPS:
        if not any((op, t) in by for t in tools):
            continue
        cells = [f"{rss[(op, t)]:.0f}" if (op, t) in rss else "–" for t in tools]
        out.append(f"| {op} | " + " | ".join(cells) + " |")
    out.append("")

    ratios = []

    def ratio(label, a, b, target=None, lower_is_better=False):
        if a not in secs or b not in secs:
            return
        if lower_is_better:  # seconds: b's time over a's, >1 means a is faster
            x = secs[b] / secs[a]
        else:
            x = rate[a] / rate[b]
        s = f"{label}: **{x:.2f}×**"
        if target is not None:
            s += f" (target ≥ {target}×: {'met' if x >= target else 'NOT met'})"
        ratios.append(s)

    ratio("cairn restore ÷ restic restore (MiB/s)", ("restore", "cairn"), ("restore", "restic"), 2)
    ratio("cairn backup ÷ borg backup, first (MiB/s)", ("backup-1", "cairn"), ("backup-1", "borg"), 1.5)
    ratio("cairn restore ÷ borg restore (MiB/s)", ("restore", "cairn"), ("restore", "borg"))
    ratio("cairn backup ÷ restic backup, first (MiB/s)", ("backup-1", "cairn"), ("backup-1", "restic"))
    ratio("cairn second backup ÷ borg second backup (MiB/s)", ("backup-2", "cairn"), ("backup-2", "borg"))
    ratio("cairn second backup ÷ restic second backup (MiB/s)", ("backup-2", "cairn"), ("backup-2", "restic"))
    ratio("cairn restore ÷ cairn --jobs 1 (MiB/s)", ("restore", "cairn"), ("restore", "cairn-seq"))
    ratio("cairn restore ÷ cp -a (MiB/s)", ("restore", "cairn"), ("restore", "cp"))
    ratio("restic ls time ÷ cairn ls time", ("ls", "cairn"), ("ls", "restic"), lower_is_better=True)
    ratio("borg list time ÷ cairn ls time", ("ls", "cairn"), ("ls", "borg"), lower_is_better=True)
    ratio("restic dump time ÷ cairn cat time", ("cat", "cairn"), ("cat", "restic"), lower_is_better=True)
    ratio("borg extract --stdout time ÷ cairn cat time", ("cat", "cairn"), ("cat", "borg"),
          lower_is_better=True)
    if ratios:
        out.append("Ratios of medians (above 1: cairn is faster):")
        out.append("")
        for s in ratios:
            out.append(f"- {s}")
        out.append("")
    print("\n".join(out).rstrip("\n"))


if __name__ == "__main__":
    main()
