#!/usr/bin/env python3
"""Tables and plot data for bench/verify_bench.sh.

    python3 bench/verify_report.py RESULTS_TSV PLOT_DATA_DIR

Reads the raw results that verify_bench.sh writes (one line per timed
command, columns below), prints Markdown tables (medians over rounds) on
stdout and writes gnuplot data files into PLOT_DATA_DIR:

    verify_compare.dat        tool, logical MiB/s (warm), plus the decode limit
    verify_latency.dat        jobs, MiB/s of fixed --jobs N per injected latency
    verify_latency_auto.dat   --jobs auto per latency, as a horizontal line
    verify_rss.dat            chunks, peak RSS MiB per mode (no ledger, ledger
                              recording, ledger skipping)

Columns of RESULTS_TSV: round section case jobs cpu lat seconds rss_kib bytes
chunks json_s jobs_final jobs_max checked ("-" where not applicable).
`bytes` are logical bytes: the plaintext of every distinct chunk (cairn
verify's raw_bytes), the same for every tool. Throughput is bytes over the
wall-clock seconds of the command, except for the decode limit (section
limit, cases limit*), whose own timed pass (json_s) excludes loading the
chunks into memory.
"""
import collections
import os
import statistics
import sys

MIB = 1 << 20


def load(path):
    rows = []
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            rows.append(dict(zip(header, line.rstrip("\n").split("\t"))))
    return rows


def is_limit(r):
    return r["section"] == "limit" and r["case"].startswith("limit")


def rate(r):
    secs = float(r["json_s"]) if is_limit(r) else float(r["seconds"])
    return int(r["bytes"]) / MIB / secs


def own_rate(r):
    """cairn's own figure: bytes over the `seconds` of its JSON."""
    return int(r["bytes"]) / MIB / float(r["json_s"]) if r["json_s"] not in ("-", "") else float("nan")


def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def fmt_rate(x):
    return "–" if x != x else f"{x:.0f}"


def inflight(rs):
    """'final/max' reads in flight, from the median-time run."""
    rs = sorted(rs, key=lambda r: float(r["seconds"]))
    r = rs[len(rs) // 2]
    if r.get("jobs_final", "-") == "-":
        return ""
    return f"{r['jobs_final']}/{r['jobs_max']}"


COMPARE_ORDER = ["cairn", "cairn-seq", "cairn-j1", "restic", "borg"]
COMPARE_NOTES = {
    "cairn": "`cairn verify -r STORE --no-ledger` (`--jobs auto`)",
    "cairn-seq": "`cairn verify --no-ledger --jobs 1 --cpu-workers 1` (sequential: one reader, one checker)",
    "cairn-j1": "`cairn verify --no-ledger --jobs 1` (one reader, checks on all cores)",
    "restic": "`restic check --read-data`",
    "borg": "`borg check --verify-data`",
}


def compare(rows, out, plot_dir, section, limit_rate):
    rs = [r for r in rows if r["section"] == section]
    if not rs:
        return {}
    by = collections.OrderedDict()
    for r in rs:
        by.setdefault(r["case"], []).append(r)
    cache = "page cache dropped before every command" if section == "compare-cold" else "warm cache"
    out.append(f"**{section}**: every snapshot of the store checked, {cache}, tools interleaved "
               f"in each round; logical MiB/s = distinct chunks' plaintext bytes ÷ wall-clock time")
    out.append("")
    out.append("| tool | command | median MiB/s | min – max MiB/s | median s | cairn's own s "
               "| peak RSS MiB | reads in flight final/max |")
    out.append("|---|---|---:|---:|---:|---:|---:|---|")
    medians = {}
    for case in sorted(by, key=lambda c: COMPARE_ORDER.index(c) if c in COMPARE_ORDER else 99):
        v = by[case]
        rates = [rate(r) for r in v]
        medians[case] = med(rates)
        secs = med([float(r["seconds"]) for r in v])
        own = med([float(r["json_s"]) for r in v if r["json_s"] not in ("-", "")])
        rss = max(int(r["rss_kib"]) for r in v) / 1024
        out.append(f"| {case} | {COMPARE_NOTES.get(case, '')} | {medians[case]:.0f} | "
                   f"{min(rates):.0f} – {max(rates):.0f} | {secs:.2f} | "
                   f"{'' if own != own else f'{own:.2f}'} | {rss:.0f} | {inflight(v)} |")
    out.append("")
    ratios = []
    targets = {"restic": " (target ≥ 5)", "cairn-seq": " (target ≥ 1.8)"}
    if "cairn" in medians:
        for other in ("restic", "borg", "cairn-seq", "cairn-j1"):
            if other in medians:
                ratios.append(f"cairn ÷ {other}: **{medians['cairn'] / medians[other]:.2f}**"
                              f"{targets.get(other, '')}")
    if ratios:
        out.append("Ratios of median MiB/s: " + "; ".join(ratios) + ".")
        out.append("")
    if plot_dir and section == "compare":
        with open(os.path.join(plot_dir, "verify_compare.dat"), "w") as f:
            f.write('tool "MiB/s"\n')
            for case in sorted(medians, key=lambda c: COMPARE_ORDER.index(c) if c in COMPARE_ORDER else 99):
                f.write(f'"{case}" {medians[case]:.1f}\n')
            if limit_rate == limit_rate:
                f.write(f'"decode limit" {limit_rate:.1f}\n')
    return medians


def limit(rows, out):
    rs = [r for r in rows if r["section"] == "limit"]
    if not rs:
        return float("nan")
    by = collections.defaultdict(list)
    for r in rs:
        by[r["case"]].append(r)
    out.append("**limit**: verify's CPU work per chunk (CRC32C, zstd decompression, SHA-256, length) "
               "on every distinct chunk, held in memory, by `cairn-synth-store decode-limit` "
               "(its own timing, median of 3 passes per round), beside `cairn verify --no-ledger`")
    out.append("")
    out.append("| case | threads | median MiB/s | min – max MiB/s | median s | peak RSS MiB |")
    out.append("|---|---:|---:|---:|---:|---:|")
    names = {"limit": "decode limit, all CPUs", "limit-1t": "decode limit, one thread",
             "cairn": "`cairn verify` (wall clock)"}
    meds = {}
    for case in ("limit", "limit-1t", "cairn"):
        v = by.get(case)
        if not v:
            continue
        rates = [rate(r) for r in v]
        meds[case] = med(rates)
        secs_key = "json_s" if case.startswith("limit") else "seconds"
        threads = v[0]["cpu"] if case.startswith("limit") else "auto"
        out.append(f"| {names[case]} | {threads} | {meds[case]:.0f} | {min(rates):.0f} – "
                   f"{max(rates):.0f} | {med([float(r[secs_key]) for r in v]):.2f} | "
                   f"{max(int(r['rss_kib']) for r in v) / 1024:.0f} |")
        if case == "cairn":
            own = [own_rate(r) for r in v]
            meds["cairn-own"] = med(own)
            out.append(f"| `cairn verify` (its own `seconds`: without start-up, listing, exit) | auto | "
                       f"{meds['cairn-own']:.0f} | {min(own):.0f} – {max(own):.0f} | "
                       f"{med([float(r['json_s']) for r in v]):.2f} | |")
    out.append("")
    notes = []
    if "limit" in meds and "cairn" in meds:
        notes.append(f"cairn verify ÷ decode limit: **{meds['cairn'] / meds['limit']:.2f}** wall clock, "
                     f"**{meds['cairn-own'] / meds['limit']:.2f}** by its own seconds (target ≥ 0.85)")
    if "limit" in meds and "limit-1t" in meds:
        notes.append(f"decode limit all CPUs ÷ one thread: {meds['limit'] / meds['limit-1t']:.2f}")
    if notes:
        out.append("; ".join(notes) + ".")
        out.append("")
    return meds.get("limit", float("nan"))


def latency(rows, out, plot_dir):
    rs = [r for r in rows if r["section"] == "latency"]
    if not rs:
        return
    by = collections.defaultdict(list)  # (lat, jobs) -> rows
    for r in rs:
        by[(int(r["lat"]), r["jobs"])].append(r)
    lats = sorted({k[0] for k in by})
    fixed = sorted({k[1] for k in by if k[1] != "auto"}, key=int)
    out.append("**latency**: logical MiB/s (median) of `cairn verify --no-ledger` with "
               "`--inject-latency MS` on every chunk read; `auto` = `--jobs auto` (reads in flight "
               "final/max)")
    out.append("")
    out.append("| latency | auto | " + " | ".join(f"jobs {j}" for j in fixed) +
               " | best fixed | auto ÷ best |")
    out.append("|---|---:|" + "---:|" * len(fixed) + "---|---:|")
    autos, table, worst = {}, {}, None
    for lat in lats:
        auto = med([rate(r) for r in by.get((lat, "auto"), [])])
        autos[lat] = auto
        vals = {j: med([rate(r) for r in by.get((lat, j), [])]) for j in fixed}
        table[lat] = vals
        best_j = max((j for j in fixed if vals[j] == vals[j]), key=lambda j: vals[j], default=None)
        note = inflight(by[(lat, "auto")]) if by.get((lat, "auto")) else "-"
        cells = [f"{lat} ms", f"{fmt_rate(auto)} ({note})"]
        cells += [fmt_rate(vals[j]) for j in fixed]
        if best_j is not None and auto == auto:
            q = auto / vals[best_j]
            worst = q if worst is None else min(worst, q)
            cells += [f"{vals[best_j]:.0f} (jobs {best_j})", f"{q:.2f}"]
        else:
            cells += ["–", "–"]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    if worst is not None:
        out.append(f"Lowest auto ÷ best fixed over the latencies: **{worst:.2f}** (target ≥ 0.90 at every latency).")
        out.append("")
    if plot_dir and fixed:
        with open(os.path.join(plot_dir, "verify_latency.dat"), "w") as f:
            f.write("jobs " + " ".join(f'"{lat} ms"' for lat in lats) + "\n")
            for j in fixed:
                f.write(j + " " + " ".join(f"{table[lat][j]:.1f}" for lat in lats) + "\n")
        with open(os.path.join(plot_dir, "verify_latency_auto.dat"), "w") as f:
            f.write("jobs " + " ".join(f'"auto, {lat} ms"' for lat in lats) + "\n")
            for j in (fixed[0], fixed[-1]):
                f.write(j + " " + " ".join(f"{autos[lat]:.1f}" for lat in lats) + "\n")


RSS_MODES = [("no-ledger", "`--no-ledger`"),
             ("ledger-record", "fresh ledger: checks and records every chunk"),
             ("ledger-skip", "`--outdated-after 1`: loads the ledger, skips every chunk")]


def rss(rows, out, plot_dir):
    rs = [r for r in rows if r["section"] == "rss"]
    if not rs:
        return
    by = collections.defaultdict(list)  # (mode, chunks) -> rows
    for r in rs:
        by[(r["case"], int(r["chunks"]))].append(r)
    ns = sorted({k[1] for k in by})
    modes = [m for m, _ in RSS_MODES if any(k[0] == m for k in by)]
    out.append("**rss**: peak RSS (`/usr/bin/time -f %M`, median over rounds) of `cairn verify` "
               "(`--jobs auto`) on a synthetic store of N distinct 64 KiB chunks (one snapshot)")
    out.append("")
    out.append("| chunks | " + " | ".join(f"{m} MiB (s)" for m in modes) + " |")
    out.append("|---:|" + "---:|" * len(modes))
    peak = {}
    for n in ns:
        cells = [f"{n:,}"]
        for m in modes:
            v = by.get((m, n), [])
            if not v:
                cells.append("–")
                continue
            kib = med([int(r["rss_kib"]) for r in v])
            peak[(m, n)] = kib * 1024
            cells.append(f"{kib / 1024:.1f} ({med([float(r['seconds']) for r in v]):.1f})")
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    if len(ns) > 1:
        out.append("Memory per chunk, bytes: the slope of peak RSS between consecutive sizes "
                   "(target ≤ ~64 without the ledger)")
        out.append("")
        out.append("| between | " + " | ".join(modes) + " | " +
                   " | ".join(f"{m} − no-ledger" for m in modes if m != "no-ledger") + " |")
        out.append("|---|" + "---:|" * (2 * len(modes) - 1))
        for a, b in zip(ns, ns[1:]):
            slopes = {}
            for m in modes:
                if (m, a) in peak and (m, b) in peak:
                    slopes[m] = (peak[(m, b)] - peak[(m, a)]) / (b - a)
            cells = [f"{a:,} → {b:,}"] + [f"{slopes[m]:.0f}" if m in slopes else "–" for m in modes]
            for m in modes:
                if m == "no-ledger":
                    continue
                cells.append(f"{slopes[m] - slopes['no-ledger']:.0f}"
                             if m in slopes and "no-ledger" in slopes else "–")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    out.append("Modes: " + "; ".join(f"{m}: {d}" for m, d in RSS_MODES if m in modes) + ".")
    out.append("")
    if plot_dir:
        with open(os.path.join(plot_dir, "verify_rss.dat"), "w") as f:
            f.write("chunks " + " ".join(f'"{m}"' for m in modes) + "\n")
            for n in ns:
                f.write(f"{n} " + " ".join(f"{peak[(m, n)] / MIB:.2f}" if (m, n) in peak else "NaN"
                                          for m in modes) + "\n")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = load(sys.argv[1])
    plot_dir = sys.argv[2]
    os.makedirs(plot_dir, exist_ok=True)
    for name in ("verify_compare.dat", "verify_latency.dat", "verify_latency_auto.dat", "verify_rss.dat"):
        try:
            os.remove(os.path.join(plot_dir, name))
        except FileNotFoundError:
            pass
    out = []
    lim_out = []
    limit_rate = limit(rows, lim_out)
    compare(rows, out, plot_dir, "compare", limit_rate)
    compare(rows, out, None, "compare-cold", limit_rate)
    out += lim_out
    latency(rows, out, plot_dir)
    rss(rows, out, plot_dir)
    print("\n".join(out).rstrip("\n"))


if __name__ == "__main__":
    main()
