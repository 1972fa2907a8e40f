#!/usr/bin/env python3
"""Tables and plot data for bench/restore_bench.sh.

    python3 bench/restore_report.py RESULTS_TSV PLOT_DATA_DIR

Reads the raw timings that restore_bench.sh writes (one line per timed
command, columns below), prints Markdown tables (medians over rounds) on
stdout and writes gnuplot data files into PLOT_DATA_DIR:

    restore_jobs.dat      jobs, MiB/s with --cpu-workers 1, 2, ...
    restore_latency.dat   jobs, MiB/s of fixed --jobs N per injected latency
    restore_latency_auto.dat  --jobs auto per latency, as a horizontal line

Columns of RESULTS_TSV: round section case jobs cpu lat seconds rss_kib
bytes json_s jobs_final jobs_max jobs_mean ("-" where not applicable).
Throughput is always `bytes` (the image size) over the wall-clock seconds of
the command, the same way for every tool.
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


def rate(r):
    return int(r["bytes"]) / MIB / float(r["seconds"])


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt_rate(x):
    return "–" if x != x else f"{x:.0f}"


def jobs_key(j):
    return (0, 0) if j == "auto" else (1, int(j))


def jobs_note(rs):
    """'final/max/mean' reads in flight of --jobs auto, from the median-time run."""
    rs = sorted(rs, key=lambda r: float(r["seconds"]))
    r = rs[len(rs) // 2]
    parts = [r.get("jobs_final", "-"), r.get("jobs_max", "-")]
    mean = r.get("jobs_mean", "-")
    if mean not in ("-", ""):
        parts.append(f"{float(mean):.1f}")
    return "/".join(parts)


def compare(rows, out):
    rs = [r for r in rows if r["section"] == "compare"]
    if not rs:
        return
    by = collections.OrderedDict()
    for r in rs:
        by.setdefault(r["case"], []).append(r)
    order = ["cairn", "cairn-j1", "cairn-rehearse", "cat", "cat+sync", "restic", "borg"]
    notes = {
        "cairn": "`cairn restore` (`--jobs auto`), holes for zero chunks, fsync",
        "cairn-j1": "`cairn restore --jobs 1`",
        "cairn-rehearse": "`cairn restore --rehearse` (fetch, decode, check; writes nothing)",
        "cat": "`cat IMG > NEW` (copy limit, page cache only)",
        "cat+sync": "`cat IMG > NEW && sync NEW`",
        "restic": "`restic restore latest --target DIR && sync FILE` (zeros written)",
        "borg": "`borg extract --sparse REPO::img && sync FILE`",
    }
    out.append("**compare**: restore of the image from a local store, warm cache, "
               "tools interleaved in each round")
    out.append("")
    out.append("| tool | command | median MiB/s | min – max MiB/s | median s | peak RSS MiB "
               "| reads in flight final/max/mean |")
    out.append("|---|---|---:|---:|---:|---:|---|")
    medians = {}
    secs = {}
    for case in sorted(by, key=lambda c: order.index(c) if c in order else 99):
        v = by[case]
        rates = [rate(r) for r in v]
        medians[case] = med(rates)
        secs[case] = med([float(r["seconds"]) for r in v])
        rss = max(int(r["rss_kib"]) for r in v) / 1024
        inflight = jobs_note(v) if v[0]["jobs_final"] != "-" else ""
        out.append(f"| {case} | {notes.get(case, '')} | {medians[case]:.0f} | "
                   f"{min(rates):.0f} – {max(rates):.0f} | {secs[case]:.2f} | {rss:.0f} | {inflight} |")
    out.append("")
    ratios = []
    if "cairn" in medians:
        for other in ("restic", "borg", "cairn-j1"):
            if other in medians:
                ratios.append(f"cairn ÷ {other} (MiB/s): **{medians['cairn'] / medians[other]:.2f}**")
        for copy in ("cat+sync", "cat"):
            if copy in secs:
                ratios.append(f"cairn time ÷ {copy} time: **{secs['cairn'] / secs[copy]:.2f}**")
    if ratios:
        out.append("Ratios of medians: " + "; ".join(ratios) + ".")
        out.append("")


def latency(rows, out, plot_dir):
    rs = [r for r in rows if r["section"] == "latency"]
    if not rs:
        return
    ops = [op for op in ("restore", "verify") if any(r["case"] == op for r in rs)]
    for op in ops:
        by = collections.defaultdict(list)  # (lat, jobs) -> rows
        for r in rs:
            if r["case"] == op:
                by[(int(r["lat"]), r["jobs"])].append(r)
        lats = sorted({k[0] for k in by})
        fixed = sorted({k[1] for k in by if k[1] != "auto"}, key=int)
        out.append(f"**latency, {op}**: MiB/s (median) with `--inject-latency MS` on every chunk "
                   f"read; `auto` = `--jobs auto` (reads in flight final/max/mean)")
        out.append("")
        out.append("| latency | auto | " + " | ".join(f"jobs {j}" for j in fixed) +
                   " | best fixed | auto ÷ best |")
        out.append("|---|---:|" + "---:|" * len(fixed) + "---|---:|")
        autos = {}
        table = {}
        for lat in lats:
            auto = med([rate(r) for r in by.get((lat, "auto"), [])])
            autos[lat] = auto
            vals = {j: med([rate(r) for r in by.get((lat, j), [])]) for j in fixed}
            table[lat] = vals
            best_j = max((j for j in fixed if vals[j] == vals[j]), key=lambda j: vals[j], default=None)
            note = jobs_note(by[(lat, "auto")]) if by.get((lat, "auto")) else "-"
            cells = [f"{lat} ms", f"{fmt_rate(auto)} ({note})"]
            cells += [fmt_rate(vals[j]) for j in fixed]
            if best_j is not None:
                cells += [f"{vals[best_j]:.0f} (jobs {best_j})", f"{auto / vals[best_j]:.2f}"]
            else:
                cells += ["–", "–"]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
        if 0 in autos and len(lats) > 1:
            hi = max(lats)
            out.append(f"auto at {hi} ms ÷ auto at 0 ms: **{autos[hi] / autos[0]:.2f}** "
                       f"(target ≥ 0.80); auto ÷ best fixed: target ≥ 0.90.")
            out.append("")
        if op == "restore" and plot_dir:
            with open(os.path.join(plot_dir, "restore_latency.dat"), "w") as f:
                f.write("jobs " + " ".join(f'"{lat} ms"' for lat in lats) + "\n")
                for j in fixed:
                    f.write(j + " " + " ".join(f"{table[lat][j]:.1f}" for lat in lats) + "\n")
            with open(os.path.join(plot_dir, "restore_latency_auto.dat"), "w") as f:
                f.write("jobs " + " ".join(f'"auto, {lat} ms"' for lat in lats) + "\n")
                for j in (fixed[0], fixed[-1]) if fixed else ():
                    f.write(j + " " + " ".join(f"{autos[lat]:.1f}" for lat in lats) + "\n")


def rss(rows, out):
    rs = [r for r in rows if r["section"] == "rss"]
    if not rs:
        return
    by = collections.OrderedDict()
    for r in rs:
        by.setdefault(r["case"], []).append(r)
    out.append("**rss**: peak RSS (`/usr/bin/time -f %M`) of `cairn restore` (`--jobs auto`) to a new file")
    out.append("")
    out.append("| image | size | median s | median MiB/s | peak RSS MiB (median) | min – max "
               "| reads in flight final/max/mean |")
    out.append("|---|---:|---:|---:|---:|---:|---|")
    peaks = {}
    for case, v in by.items():
        r = [int(x["rss_kib"]) / 1024 for x in v]
        peaks[case] = med(r)
        size = int(v[0]["bytes"])
        out.append(f"| {case} | {size / MIB / 1024:.2f} GiB | "
                   f"{med([float(x['seconds']) for x in v]):.2f} | {med([rate(x) for x in v]):.0f} | "
                   f"{peaks[case]:.0f} | {min(r):.0f} – {max(r):.0f} | {jobs_note(v)} |")
    out.append("")
    cases = list(by)
    if len(cases) == 2:
        a, b = cases
        out.append(f"Peak RSS {b} ÷ {a}: **{peaks[b] / peaks[a]:.2f}** "
                   f"(the image is {int(by[b][0]['bytes']) / int(by[a][0]['bytes']):.0f}× larger).")
        out.append("")


def jobs(rows, out, plot_dir):
    rs = [r for r in rows if r["section"] == "jobs"]
    if not rs:
        return
    by = collections.defaultdict(list)
    for r in rs:
        by[(r["cpu"], r["jobs"])].append(r)
    cpus = sorted({k[0] for k in by}, key=int)
    js = sorted({k[1] for k in by}, key=jobs_key)
    out.append("**jobs**: MiB/s (median) of `cairn restore --jobs N --cpu-workers W` "
               "to a new file, no injected latency")
    out.append("")
    out.append("| cpu workers | " + " | ".join(f"jobs {j}" for j in js) + " | best |")
    out.append("|---|" + "---:|" * len(js) + "---|")
    table = {}
    for c in cpus:
        vals = {j: med([rate(r) for r in by.get((c, j), [])]) for j in js}
        table[c] = vals
        best = max((j for j in js if vals[j] == vals[j]), key=lambda j: vals[j])
        out.append(f"| {c} | " + " | ".join(fmt_rate(vals[j]) for j in js) +
                   f" | {vals[best]:.0f} (jobs {best}) |")
    out.append("")
    if plot_dir:
        with open(os.path.join(plot_dir, "restore_jobs.dat"), "w") as f:
            f.write("jobs " + " ".join(f'"cpu-workers {c}"' for c in cpus) + "\n")
            for j in js:
                if j != "auto":
                    f.write(j + " " + " ".join(f"{table[c][j]:.1f}" for c in cpus) + "\n")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = load(sys.argv[1])
    plot_dir = sys.argv[2]
    os.makedirs(plot_dir, exist_ok=True)
    out = []
    compare(rows, out)
    latency(rows, out, plot_dir)
    rss(rows, out)
    jobs(rows, out, plot_dir)
    print("\n".join(out).rstrip("\n"))


if __name__ == "__main__":
    main()
