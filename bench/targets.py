#!/usr/bin/env python3
"""Every performance target of the issues, checked against a suite run.

    python3 bench/targets.py DIR [--json OUT] [--headline] [--plot-data OUT]
                             [--ignore-other-runs]

DIR is the work directory of bench/run_all.sh: one subdirectory per script
(limits, image, restore, verify, tree, changed, crypt, remote, access, gc), each holding the
results.tsv that script writes (gc: bench/gc_bench.sh's own columns), plus DIR/suite.json (mode and wall time).
Prints a Markdown table "Performance targets": one row per numeric target
named in issues 2-10, with the measured value (or "not measured yet: why")
and met / not met / n/a. A target whose data is missing (a step not run, a
feature that does not exist yet) is never "met".

--json OUT     also writes the rows as JSON
--headline     prints the headline comparison instead (cairn vs restic vs
               borg vs the raw limit, MiB/s per operation, repository size,
               peak RSS)
--plot-data OUT  with --headline: a gnuplot data file of the MiB/s rows
--ignore-other-runs  leave out (as not measured) the steps whose results
               come from another run or commit than DIR/suite.json's, instead
               of refusing

One table, one run of one commit: each step's results.tsv has a run.json
beside it (its commit and run id, bench/lib.sh stamp_results); a step whose
run id or commit differs from DIR/suite.json's (or, without one, from the
other steps'), or that has no run.json, makes the script stop with exit 3
and say which, unless --ignore-other-runs.

Thresholds the issues state loosely ("nearly equal", "well under a second",
"~64 bytes") are given a number here, marked "(threshold ours)".
"""
import collections
import json
import math
import os
import statistics
import sys

MIB = 1 << 20
NAN = float("nan")


def load_tsv(path):
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        return []
    if not lines:
        return []
    header = lines[0].split("\t")
    return [dict(zip(header, l.split("\t"))) for l in lines[1:] if l.strip()]


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None


def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else NAN


def ok(x):
    return x == x and x is not None and not math.isinf(x)


def rate(r):
    return int(r["bytes"]) / MIB / float(r["seconds"])


# Each step's results, as the Results attributes that hold them.
STEP_ATTRS = {
    "limits": ("limits", "bench", "micro"), "image": ("image", "image_sizes"),
    "restore": ("restore",), "verify": ("verify",), "tree": ("tree",),
    "changed": ("changed", "change"), "gc": ("gc", "gc_mark"), "crypt": ("crypt",),
    "remote": ("remote", "tls"), "s3": ("s3",), "access": ("access",),
}


class MixedRuns(Exception):
    pass


def check_one_run(R, ignore_others=False):
    """Refuses (MixedRuns) results of more than one run or commit; with
    ignore_others, empties the steps that are not of DIR/suite.json's run
    instead and returns their names."""
    stamps = {}
    for step, attrs in STEP_ATTRS.items():
        if not any(getattr(R, a) for a in attrs):
            continue  # not measured: nothing to mix
        stamps[step] = load_json(os.path.join(R.dir, step, "run.json"))
    ref = None
    if R.suite.get("run_id"):
        ref = (R.suite["run_id"], R.suite.get("commit"))
    else:
        known = [(s["run_id"], s.get("commit")) for s in stamps.values() if s]
        ref = collections.Counter(known).most_common(1)[0][0] if known else None
    others = {}
    for step, s in stamps.items():
        if s is None:
            others[step] = "no run.json (results of a script older than the stamps)"
        elif ref is not None and (s.get("run_id"), s.get("commit")) != ref:
            others[step] = f"run {s.get('run_id')} of commit {s.get('commit')}"
    if not others:
        return []
    if not ignore_others:
        where = "; ".join(f"{step}: {why}" for step, why in sorted(others.items()))
        raise MixedRuns(f"{R.dir} mixes results of different runs or commits (this table is for run "
                        f"{ref[0] if ref else '?'} of commit {ref[1] if ref else '?'}): {where}. "
                        "Rerun those steps in this run, or pass --ignore-other-runs to leave them out.")
    for step in others:
        for a in STEP_ATTRS[step]:
            setattr(R, a, type(getattr(R, a))() if getattr(R, a) is not None else None)
    return sorted(others)


class Results:
    """The raw results of one suite run, with the medians the targets need."""

    def __init__(self, d):
        self.dir = d
        self.suite = load_json(os.path.join(d, "suite.json")) or {}
        self.limits = load_tsv(os.path.join(d, "limits", "results.tsv"))
        self.bench = load_json(os.path.join(d, "limits", "cairn-benchmark.json"))
        self.micro = load_json(os.path.join(d, "limits", "micro-bench.json"))
        self.image = load_tsv(os.path.join(d, "image", "results.tsv"))
        self.image_sizes = {}
        try:
            for line in open(os.path.join(d, "image", "sizes.tsv")):
                t, data, alloc = line.split()
                self.image_sizes[t] = (int(data), int(alloc))
        except FileNotFoundError:
            pass
        self.restore = load_tsv(os.path.join(d, "restore", "results.tsv"))
        self.verify = load_tsv(os.path.join(d, "verify", "results.tsv"))
        self.tree = load_tsv(os.path.join(d, "tree", "results.tsv"))
        self.changed = load_tsv(os.path.join(d, "changed", "results.tsv"))
        self.change = load_json(os.path.join(d, "changed", "change.json")) or {}
        self.gc = load_tsv(os.path.join(d, "gc", "results.tsv"))
        self.gc_mark = load_tsv(os.path.join(d, "gc", "mark.tsv"))
        self.crypt = load_tsv(os.path.join(d, "crypt", "results.tsv"))
        self.remote = load_tsv(os.path.join(d, "remote", "results.tsv"))
        self.tls = load_json(os.path.join(d, "remote", "tls_bench.json")) or {}
        self.s3 = load_tsv(os.path.join(d, "s3", "results.tsv"))
        self.access = load_tsv(os.path.join(d, "access", "results.tsv"))

    # Medians of MiB/s (or seconds) for rows matching the given columns.
    @staticmethod
    def pick(rows, **kw):
        return [r for r in rows if all(r.get(k) == v for k, v in kw.items())]

    def rate(self, rows, **kw):
        return med([rate(r) for r in self.pick(rows, **kw)])

    def secs(self, rows, **kw):
        return med([float(r["seconds"]) for r in self.pick(rows, **kw)])

    def rss_mib(self, rows, **kw):
        v = self.pick(rows, **kw)
        return max(int(r["rss_kib"]) for r in v) / 1024 if v else NAN

    def verify_rate(self, **kw):
        """verify_bench: logical bytes over wall time (json_s for the decode limit)."""
        out = []
        for r in self.pick(self.verify, **kw):
            s = float(r["json_s"]) if r["section"] == "limit" and r["case"].startswith("limit") else float(r["seconds"])
            out.append(int(r["bytes"]) / MIB / s)
        return med(out)

    def bench_row(self, name):
        for row in (self.bench or {}).get("rows", []):
            if row.get("name") == name:
                return row
        return None


def ratio_row(issue, target, a, b, threshold, what, why_missing, higher=True, ours=False):
    """A target of the form a / b >= threshold (or <= when higher is False)."""
    if not (ok(a) and ok(b)) or b == 0:
        return dict(issue=issue, target=target, measured=f"not measured yet: {why_missing}", status="n/a")
    q = a / b
    met = q >= threshold if higher else q <= threshold
    return dict(issue=issue, target=target + (" (threshold ours)" if ours else ""),
                measured=f"{q:.2f} ({what.format(a=a, b=b)})", status="met" if met else "not met", value=q)


def latency_rows(rows, case_key, case_val):
    """Lowest auto / best fixed over latencies, and auto(20) / auto(0)."""
    by = collections.defaultdict(list)
    for r in rows:
        if r["section"] == "latency" and r[case_key] == case_val:
            by[(int(r["lat"]), r["jobs"])].append(rate(r))
    lats = sorted({k[0] for k in by})
    worst, worst_lat, autos = None, None, {}
    for lat in lats:
        auto = med(by.get((lat, "auto"), []))
        autos[lat] = auto
        fixed = {j: med(v) for (l, j), v in by.items() if l == lat and j != "auto"}
        if not fixed or not ok(auto):
            continue
        best_j = max(fixed, key=lambda j: fixed[j])
        q = auto / fixed[best_j]
        if worst is None or q < worst:
            worst, worst_lat = q, f"{lat} ms: auto {auto:.0f} vs jobs {best_j} {fixed[best_j]:.0f} MiB/s"
    return worst, worst_lat, autos, lats


def targets(R):
    rows = []
    add = rows.append
    missing = lambda step: f"no {step} results in {os.path.join(R.dir, step)} (step not run or failed)"

    # --- issue 2: foundation ---------------------------------------------------
    logs = sorted(p for p in os.listdir(os.path.join(R.dir, "image", "logs"))
                  if p.endswith("-cairn-backup-unchanged.log")) if os.path.isdir(os.path.join(R.dir, "image", "logs")) else []
    news = []
    for p in logs:
        j = load_json(os.path.join(R.dir, "image", "logs", p))
        if j:
            news.append(sum(a.get("new_chunks", 0) for a in j.get("archives", [])))
    if news:
        add(dict(issue=2, target="second backup of an unchanged image stores no new chunk",
                 measured=f"{max(news)} new chunks ({len(news)} run(s))",
                 status="met" if max(news) == 0 else "not met"))
    else:
        add(dict(issue=2, target="second backup of an unchanged image stores no new chunk",
                 measured="not measured yet: " + missing("image"), status="n/a"))
    ci = R.change.get("image", {})
    if "cairn_new_chunks" in ci:
        add(dict(issue=2, target="after a small change only the touched chunks are stored",
                 measured=f"{ci['cairn_new_chunks']} new chunks for {ci['touched_chunks']} touched "
                          f"({ci['changed_bytes'] / MIB:.1f} MiB changed)",
                 status="met" if ci["cairn_new_chunks"] <= ci["touched_chunks"] else "not met"))
    else:
        add(dict(issue=2, target="after a small change only the touched chunks are stored",
                 measured="not measured yet: " + missing("changed"), status="n/a"))

    # --- issue 3: parallel restore (and image backup on the pipeline) ----------
    add(ratio_row(3, "image backup ≥ 2× borg (same run)",
                  R.rate(R.image, tool="cairn", op="backup-first"), R.rate(R.image, tool="borg", op="backup-first"),
                  2.0, "cairn {a:.0f} vs borg {b:.0f} MiB/s", missing("image")))
    sha_all = R.rate(R.limits, op="sha256-all")
    row = R.bench_row("sha256")
    if row and row.get("all_cores_mb_s"):
        sha_all = row["all_cores_mb_s"] * 1e6 / MIB
    read = R.rate(R.limits, op="cat")
    lim = min(sha_all, read) if ok(sha_all) and ok(read) else NAN
    add(ratio_row(3, "unchanged image backup limited only by reading and hashing: ≥ 0.8 × min(read, SHA-256 on all cores)",
                  R.rate(R.image, tool="cairn", op="backup-unchanged"), lim, 0.8,
                  "cairn {a:.0f} vs limit {b:.0f} MiB/s", missing("image") + " or limits", ours=True))
    add(ratio_row(3, "image restore ≥ 4× restic (same run)",
                  R.rate(R.restore, section="compare", case="cairn"), R.rate(R.restore, section="compare", case="restic"),
                  4.0, "cairn {a:.0f} vs restic {b:.0f} MiB/s", missing("restore")))
    add(ratio_row(3, "image restore time ≤ 1.5 × the copy limit's (`cat` + `sync`)",
                  R.secs(R.restore, section="compare", case="cairn"), R.secs(R.restore, section="compare", case="cat+sync"),
                  1.5, "cairn {a:.2f} s vs cat+sync {b:.2f} s", missing("restore"), higher=False))
    worst, where, autos, lats = latency_rows(R.restore, "case", "restore")
    if worst is not None:
        add(dict(issue=3, target="restore latency sweep: `--jobs auto` ≥ 0.9 × best fixed `--jobs N` at every latency",
                 measured=f"lowest {worst:.2f} ({where}; latencies {', '.join(map(str, lats))} ms)",
                 status="met" if worst >= 0.9 else "not met", value=worst))
    else:
        add(dict(issue=3, target="restore latency sweep: `--jobs auto` ≥ 0.9 × best fixed `--jobs N` at every latency",
                 measured="not measured yet: " + missing("restore"), status="n/a"))
    add(ratio_row(3, "restore `--jobs auto` at 20 ms injected latency ≥ 0.8 × its own 0 ms throughput",
                  autos.get(20, NAN), autos.get(0, NAN), 0.8, "{a:.0f} vs {b:.0f} MiB/s",
                  missing("restore") + " (needs latencies 0 and 20)"))
    rss_rows = [r for r in R.restore if r["section"] == "rss"]
    img_rss = [r for r in rss_rows if r["case"].startswith("image")]
    sp_rss = [r for r in rss_rows if r["case"].startswith("sparse")]
    add(ratio_row(3, "restore peak RSS bounded: an 8× larger (sparse) image needs ≤ 1.25 × the RSS",
                  max((int(r["rss_kib"]) for r in sp_rss), default=NAN) / 1024,
                  max((int(r["rss_kib"]) for r in img_rss), default=NAN) / 1024, 1.25,
                  "{a:.0f} vs {b:.0f} MiB" + (f" ({sp_rss[0]['case']} vs {img_rss[0]['case']})" if sp_rss and img_rss else ""),
                  missing("restore"), higher=False, ours=True))

    # --- issue 4: parallel verify ----------------------------------------------
    add(ratio_row(4, "verify ≥ 5× `restic check --read-data`",
                  R.verify_rate(section="compare", case="cairn"), R.verify_rate(section="compare", case="restic"),
                  5.0, "cairn {a:.0f} vs restic {b:.0f} logical MiB/s", missing("verify")))
    add(ratio_row(4, "verify ≥ 1.8× its own sequential mode (one reader, one checker)",
                  R.verify_rate(section="compare", case="cairn"), R.verify_rate(section="compare", case="cairn-seq"),
                  1.8, "{a:.0f} vs {b:.0f} MiB/s", missing("verify")))
    add(ratio_row(4, "verify ≥ 0.85 × the machine's limit (CRC + zstd + SHA-256 on all cores, chunks in memory)",
                  R.verify_rate(section="limit", case="cairn"), R.verify_rate(section="limit", case="limit"),
                  0.85, "cairn {a:.0f} vs decode limit {b:.0f} MiB/s", missing("verify")))
    worst, where, _, lats = latency_rows(R.verify, "case", "verify")
    if worst is not None:
        add(dict(issue=4, target="verify latency sweep: `--jobs auto` ≥ 0.9 × best fixed `--jobs N`",
                 measured=f"lowest {worst:.2f} ({where}; latencies {', '.join(map(str, lats))} ms)",
                 status="met" if worst >= 0.9 else "not met", value=worst))
    else:
        add(dict(issue=4, target="verify latency sweep: `--jobs auto` ≥ 0.9 × best fixed `--jobs N`",
                 measured="not measured yet: " + missing("verify"), status="n/a"))
    peaks = {}
    for r in R.verify:
        if r["section"] == "rss" and r["case"] == "no-ledger":
            peaks.setdefault(int(r["chunks"]), []).append(int(r["rss_kib"]) * 1024)
    ns = sorted(peaks)
    if len(ns) >= 2:
        a, b = ns[-2], ns[-1]
        slope = (med(peaks[b]) - med(peaks[a])) / (b - a)
        add(dict(issue=4, target="verify peak RSS grows by at most ~64 bytes per chunk (≤ 70, threshold ours)",
                 measured=f"{slope:.0f} bytes/chunk ({a:,} → {b:,} chunks, no ledger)",
                 status="met" if slope <= 70 else "not met", value=slope))
    else:
        add(dict(issue=4, target="verify peak RSS grows by at most ~64 bytes per chunk",
                 measured="not measured yet: " + missing("verify") + " (needs two chunk counts)", status="n/a"))

    # --- issue 5: tree archives ------------------------------------------------
    add(ratio_row(5, "tree full restore ≥ 2× restic (same run)",
                  R.rate(R.tree, tool="cairn", op="restore"), R.rate(R.tree, tool="restic", op="restore"),
                  2.0, "cairn {a:.0f} vs restic {b:.0f} MiB/s", missing("tree")))
    add(ratio_row(5, "tree backup ≥ 1.5× borg (same run)",
                  R.rate(R.tree, tool="cairn", op="backup-1"), R.rate(R.tree, tool="borg", op="backup-1"),
                  1.5, "cairn {a:.0f} vs borg {b:.0f} MiB/s", missing("tree")))
    s = R.secs(R.tree, tool="cairn", op="cat")
    add(dict(issue=5, target="single-file restore of a small file well under a second (< 0.5 s, threshold ours)",
             measured=f"{s:.2f} s (`cairn cat`)" if ok(s) else "not measured yet: " + missing("tree"),
             status=("met" if s < 0.5 else "not met") if ok(s) else "n/a"))
    row = R.bench_row("chunker")
    chunk = None
    if row and row.get("per_core_mb_s"):
        chunk = (row["per_core_mb_s"] / 1000, "`cairn benchmark`, one core")
    elif R.micro:
        for b in R.micro.get("benchmarks", []):
            if b.get("run_name") == "BM_Chunker" and b.get("aggregate_name") == "median":
                chunk = (b["bytes_per_second"] / 1e9, "`cairn-micro-bench` BM_Chunker, CPU time")
    add(dict(issue=5, target="content-defined chunker ≥ 1 GB/s per core",
             measured=f"{chunk[0]:.2f} GB/s ({chunk[1]})" if chunk else "not measured yet: " + missing("limits"),
             status=("met" if chunk[0] >= 1 else "not met") if chunk else "n/a"))

    # --- issue 6: server ---------------------------------------------------------
    # remote_bench.sh: side = local | remote, op = restore | rehearse, lat_ms
    # (0: none injected), jobs = auto | N; interleaved runs, same image.
    def remote_secs(**kw):
        return med([float(r["seconds"]) for r in R.remote if all(r.get(k) == v for k, v in kw.items())])

    secs = {(side, op): remote_secs(side=side, op=op, lat_ms="0", jobs="auto")
            for side in ("local", "remote") for op in ("restore", "rehearse")}
    loc, rem = secs[("local", "restore")], secs[("remote", "restore")]
    t6 = "remote restore over loopback TLS ≥ 0.6× local restore"
    if ok(loc) and ok(rem) and rem > 0:
        q = loc / rem
        n = int(R.remote[0]["bytes"])
        m = (f"{q:.2f} (remote {n / MIB / rem:.0f} vs local {n / MIB / loc:.0f} MiB/s, medians "
             f"{rem:.2f} s vs {loc:.2f} s, {n / MIB:.0f} MiB image, bench/remote_bench.sh")
        lr, rr = secs[("local", "rehearse")], secs[("remote", "rehearse")]
        if ok(lr) and ok(rr) and rr > 0:
            m += f"; --rehearse: {lr / rr:.2f}"
        add(dict(issue=6, target=t6, measured=m + ")", status="met" if q >= 0.6 else "not met", value=q))
    else:
        add(dict(issue=6, target=t6, measured="not measured yet: " + missing("remote"), status="n/a"))
    cells = []
    lats = sorted({r["lat_ms"] for r in R.remote if r["side"] == "remote" and r["lat_ms"] != "0"}, key=float)
    for lat in lats:
        one = remote_secs(side="remote", op="rehearse", lat_ms=lat, jobs="1")
        auto = remote_secs(side="remote", op="rehearse", lat_ms=lat, jobs="auto")
        if ok(one) and ok(auto) and auto > 0:
            cells.append(f"{lat} ms: auto {one / auto:.2f}× jobs 1 ({auto:.2f} s vs {one:.2f} s)")
    add(dict(issue=6, target="remote restore with 5 and 20 ms injected latency: auto connections vs one (no number given)",
             measured=("; ".join(cells) + " (`restore --rehearse --inject-latency`, medians)") if cells
             else "not measured yet: " + missing("remote"), status="n/a"))
    tls = {r.get("name"): r for r in R.tls.get("rows", [])}
    up, down = tls.get("tls") or {}, tls.get("tls_download") or {}
    if ok(up.get("per_core_mb_s")):
        measured = (f"upload {up['per_core_mb_s']:.0f} MB/s on one connection, "
                    f"{up['all_cores_mb_s']:.0f} MB/s on {R.tls.get('threads', '?')}; download "
                    f"{down.get('per_core_mb_s') or 0:.0f} / {down.get('all_cores_mb_s') or 0:.0f} MB/s "
                    f"(PBS reference: {up.get('pbs_reference_mb_s')} MB/s upload, one core; "
                    "client and server on the same cores)")
    else:
        measured = "not measured yet: " + missing("remote")
    add(dict(issue=6, target="`tls` upload figure in `cairn benchmark -r https://…` (no number given)",
             measured=measured, status="n/a"))

    # --- issue 7: encryption -----------------------------------------------------
    # crypt_bench.sh: tool = plain | encrypted, same data, interleaved runs.
    for op in ("restore", "rehearse", "verify"):
        secs = {v: med([float(r["seconds"]) for r in R.crypt
                        if r["data"] == "image" and r["op"] == op and r["tool"] == v])
                for v in ("plain", "encrypted")}
        if ok(secs["plain"]) and ok(secs["encrypted"]) and secs["plain"] > 0:
            ratio = secs["encrypted"] / secs["plain"]
            m = (f"encrypted takes {ratio:.2f}× the time of plain (medians {secs['encrypted']:.2f} s "
                 f"vs {secs['plain']:.2f} s, image, bench/crypt_bench.sh)")
            st = "met" if ratio <= 1.10 else "not met"
        else:
            m, st = "not measured yet: " + missing("crypt"), "n/a"
        add(dict(issue=7, target=f"{op} of encrypted data within 10 % of plain", measured=m, status=st))
    row = R.bench_row("aes256_gcm")
    if row and row.get("per_core_mb_s"):
        m = f"{row['per_core_mb_s']:.0f} MB/s per core, {row.get('all_cores_mb_s') or 0:.0f} all cores (`cairn benchmark`)"
    else:
        m = "not measured yet: " + ("this cairn has no `benchmark` command" if R.bench is None else "no aes256_gcm row")
    add(dict(issue=7, target="AES-256-GCM per-byte cost measured (no number given)", measured=m, status="n/a"))

    # --- issue 8: gc -------------------------------------------------------------
    # gc_bench.sh: round case threads wall_s ...; case garbage (all removed) or
    # live (all referenced); threads 1 against the default.
    cells, qs, nchunks = [], [], 0
    for case in ("garbage", "live"):
        v = [r for r in R.gc if r.get("case") == case]
        single = med([float(r["wall_s"]) for r in v if r["threads"] == "1"])
        par = med([float(r["wall_s"]) for r in v if r["threads"] != "1"])
        nchunks = max([nchunks] + [int(r["chunk_files"]) for r in v if r.get("chunk_files", "-").isdigit()])
        if ok(single) and ok(par):
            threads = next(r["threads"] for r in v if r["threads"] != "1")
            qs.append(single / par)
            cells.append(f"{case}: {single / par:.2f}× ({single:.2f} s → {par:.2f} s on {threads} threads)")
    if qs:
        big = nchunks >= 500000
        add(dict(issue=8, target="gc on ≥ 500 k chunks: parallel faster than one thread (speed-up > 1, threshold ours)",
                 measured="; ".join(cells) + f"; {nchunks:,} chunks" + ("" if big else ", fewer than the target asks"),
                 status=("met" if min(qs) > 1 else "not met") if big else "n/a", value=min(qs)))
    else:
        add(dict(issue=8, target="gc on ≥ 500 k chunks: parallel faster than one thread",
                 measured="not measured yet: " + missing("gc"), status="n/a"))
    # gc_bench.sh --mark-refs: gc of an index-only store of M references.
    t8 = "gc marking of 10 M chunks in bounded memory (compact structure; no number given)"
    refs = max([int(r["refs"]) for r in R.gc_mark] or [0])
    if refs:
        mk = med([float(r["mark_s"]) for r in R.gc_mark])
        rss = med([int(r["peak_rss_kib"]) * 1024 for r in R.gc_mark if r["peak_rss_kib"].isdigit()])
        m = (f"{refs:,} references marked in {mk:.2f} s, peak RSS "
             + (f"{rss / MIB:.0f} MiB ({rss / refs:.1f} bytes a reference, whole process)" if ok(rss) else "not measured")
             + " (bench/gc_bench.sh --mark-refs, index-only store, medians)")
        add(dict(issue=8, target=t8, measured=m, status="n/a"))
    else:
        add(dict(issue=8, target=t8, measured="not measured yet: " + missing("gc") + " (gc_bench.sh --mark-refs)",
                 status="n/a"))

    # --- issue 9: object storage ---------------------------------------------------
    # s3_bench.sh: tool = cairn | restic | cat, op = restore | verify | check,
    # jobs = auto | N | -; interleaved runs, one image, one RGW on loopback.
    def s3_rate(**kw):
        return med([rate(r) for r in R.s3 if r.get("status") == "ok" and all(r.get(k) == v for k, v in kw.items())])

    cells, worst = [], None
    for op in ("restore", "verify"):
        auto = s3_rate(tool="cairn", op=op, jobs="auto")
        fixed = {r["jobs"] for r in R.s3 if r["tool"] == "cairn" and r["op"] == op and r["jobs"] != "auto"}
        fixed = {j: s3_rate(tool="cairn", op=op, jobs=j) for j in fixed}
        fixed = {j: v for j, v in fixed.items() if ok(v)}
        if ok(auto) and fixed:
            best = max(fixed, key=lambda j: fixed[j])
            q = auto / fixed[best]
            worst = q if worst is None else min(worst, q)
            cells.append(f"{op}: auto {auto:.0f} vs jobs {best} {fixed[best]:.0f} MiB/s ({q:.2f})")
    t9 = "restore and verify from Ceph RGW: auto concurrency vs fixed 1, 8, 32 (auto ≥ 0.9 × best, as for local)"
    if cells:
        add(dict(issue=9, target=t9, measured=f"lowest {worst:.2f}; " + "; ".join(cells) + " (bench/s3_bench.sh, medians)",
                 status="met" if worst >= 0.9 else "not met", value=worst))
    else:
        add(dict(issue=9, target=t9, measured="not measured yet: " + missing("s3"), status="n/a"))
    cells = []
    for op, rop in (("restore", "restore"), ("verify", "check")):
        c, r = s3_rate(tool="cairn", op=op, jobs="auto"), s3_rate(tool="restic", op=rop)
        if ok(c) and ok(r) and r > 0:
            cells.append(f"{op}: {c / r:.2f}× (cairn {c:.0f} vs restic {rop} {r:.0f} MiB/s)")
    add(dict(issue=9, target="restore from Ceph RGW beside restic's from the same RGW (no number given)",
             measured="; ".join(cells) + " (same RGW, same image, medians)" if cells
             else "not measured yet: " + missing("s3"), status="n/a"))

    # --- issue 25: instant access (bench/access_bench.sh) ------------------------
    def acc(case, field="value"):
        return med([float(r[field]) for r in R.access if r["case"] == case and r[field] != "-"])
    why25 = missing("access")
    for case, label in (("nbd-first-byte", "NBD"), ("mount-first-byte", "the mount")):
        v, rv = acc(case), acc("remote-" + case)
        t = f"first byte of the image readable through {label} < 1 s after the command starts (local)"
        if ok(v):
            m = f"{v:.3f} s (through `cairn serve` on loopback: {rv:.3f} s)"
            add(dict(issue=25, target=t, measured=m + " (bench/access_bench.sh, medians)",
                     status="met" if v < 1 else "not met", value=v))
        else:
            add(dict(issue=25, target=t, measured="not measured yet: " + why25, status="n/a"))
    def per_round(ref, case):
        # ref's seconds ÷ case's seconds in each round where both ran (the two
        # ran side by side), so a round's disk or load swing hits both.
        by = {}
        for r in R.access:
            if r["case"] in (ref, case) and r["value"] != "-":
                by.setdefault(r["round"], {})[r["case"]] = float(r["value"])
        return [d[ref] / d[case] for _, d in sorted(by.items()) if ref in d and case in d and d[case] > 0]
    for case, label in (("nbdcopy", "`nbdcopy` of the export"), ("cat", "`cat` of the image in the mount")):
        t = f"{label} ≥ 0.7× `cairn restore` of the same image (both to /dev/null)"
        q, qr = per_round("restore-null", case), per_round("rehearse", case)
        if q:
            m = (f"{med(q):.2f} ({case} {acc(case):.2f} s vs `restore … -` to /dev/null {acc('restore-null'):.2f} s; "
                 f"against the stricter --rehearse, {acc('rehearse'):.2f} s: {med(qr):.2f}) (medians of per-round ratios)")
            add(dict(issue=25, target=t, measured=m, status="met" if med(q) >= 0.7 else "not met", value=med(q)))
        else:
            add(dict(issue=25, target=t, measured="not measured yet: " + why25, status="n/a"))
    cells = []
    for kind, label in (("nbd", "NBD"), ("file", "mount")):
        iops, loaded, read = acc(f"random-{kind}-iops"), acc(f"random-{kind}-loaded"), acc(f"random-{kind}-loaded", "extra")
        rss = acc(f"random-{kind}-rss") / 1024
        if ok(iops) and ok(read) and read > 0:
            cells.append(f"{label}: {iops:.0f} IOPS, {loaded / read:.0f} bytes loaded per byte read, peak RSS {rss:.0f} MiB")
    add(dict(issue=25, target="4 KiB random reads: IOPS, bytes fetched per byte read; peak RSS within the cache (256 MiB) + fixed overhead (≤ 128 MiB, threshold ours)",
             measured="; ".join(cells) if cells else "not measured yet: " + why25,
             status="n/a" if not cells else ("met" if all(float(c.split("peak RSS ")[1].split()[0]) <= 384 for c in cells) else "not met")))
    for case, label in (("tree-find", "`find` over the tree"), ("tree-cat", "`cat` of one file")):
        v = acc(case)
        t = f"tree mount: {label} < 1 s (fresh mount)"
        add(dict(issue=25, target=t, measured=f"{v:.2f} s" if ok(v) else "not measured yet: " + why25,
                 status=("met" if v < 1 else "not met") if ok(v) else "n/a", value=v))
    q = per_round("tree-restore", "tree-cp-a")
    t = "`cp -a` of the tree out of the mount ≥ 0.5× `cairn restore` of the tree"
    if q:
        rounds = ", ".join(f"{x:.2f}" for x in q)
        m = (f"{med(q):.2f} (cp -a {acc('tree-cp-a'):.2f} s vs restore {acc('tree-restore'):.2f} s, each + sync; "
             f"per round {rounds}: disk writeback takes a share of both that swings from round to round)")
        add(dict(issue=25, target=t, measured=m, status="met" if med(q) >= 0.5 else "not met", value=med(q)))
    else:
        add(dict(issue=25, target=t, measured="not measured yet: " + why25, status="n/a"))

    # --- issue 10: the suite itself ----------------------------------------------
    mode, wall = R.suite.get("mode"), R.suite.get("wall_seconds")
    for m, limit in (("quick", 300), ("full", 2700)):
        t = f"`bash bench/run_all.sh{' --quick' if m == 'quick' else ''}` finishes in under {limit // 60} minutes"
        if mode == m and wall is not None:
            complete = set(R.suite.get("steps_asked", [])) >= {"limits", "image", "restore", "verify", "tree", "changed", "gc"}
            add(dict(issue=10, target=t, measured=f"{wall / 60:.1f} min" + ("" if complete else " (not every step ran)"),
                     status=("met" if wall < limit else "not met") if complete else "n/a", value=wall))
        else:
            add(dict(issue=10, target=t, measured=f"not measured in this run ({mode or 'no suite.json'} run)", status="n/a"))
    return rows


def print_targets(rows):
    print("| issue | target | measured | status |")
    print("|---:|---|---|---|")
    for r in rows:
        status = {"met": "**met**", "not met": "**not met**"}.get(r["status"], r["status"])
        print(f"| {r['issue']} | {r['target']} | {r['measured']} | {status} |")
    c = collections.Counter(r["status"] for r in rows)
    print()
    print(f"{len(rows)} targets: {c['met']} met, {c['not met']} not met, {c['n/a']} n/a "
          "(not measurable yet, not measured in this run, or no number given).")


def headline(R, plot_out):
    # cairn-enc: cairn with --keyfile (image_bench.sh's tool of that name);
    # restic always encrypts, so cairn-enc is the figure to hold against it.
    tools = ["cairn", "cairn-enc", "restic", "borg"]
    lines = []  # (label, {tool: value}, limit text, is_rate)
    from_image = set()  # rows whose cairn-enc figure is image_bench.sh's, the others' not

    def row(label, vals, limit="", is_rate=True):
        lines.append((label, vals, limit, is_rate))

    lim = lambda op: R.rate(R.limits, op=op)
    fmt_lim = lambda name, v: f"{name} {v:.0f}" if ok(v) else ""
    row("image backup, first", {t: R.rate(R.image, tool=t, op="backup-first") for t in tools},
        fmt_lim("zstd -1", lim("zstd-1")))
    row("image backup, unchanged", {t: R.rate(R.image, tool=t, op="backup-unchanged") for t in tools},
        fmt_lim("sha256 all cores", lim("sha256-all")))
    row("image backup, 1 % changed", {t: R.rate(R.changed, data="image", tool=t, op="backup-changed") for t in tools})
    restore = {t: R.rate(R.restore, section="compare", case=t) for t in tools}
    if not any(ok(v) for v in restore.values()):
        restore = {t: R.rate(R.image, tool=t, op="restore") for t in tools}
    elif not ok(restore["cairn-enc"]):
        restore["cairn-enc"] = R.rate(R.image, tool="cairn-enc", op="restore")
        from_image.add("image restore")
    row("image restore", restore, fmt_lim("cp+fsync", lim("cp+fsync")))
    verify = {t: R.verify_rate(section="compare", case=t) for t in tools}
    if not any(ok(v) for v in verify.values()):
        verify = {t: R.rate(R.image, tool=t, op="verify") for t in tools}
    elif not ok(verify["cairn-enc"]):
        verify["cairn-enc"] = R.rate(R.image, tool="cairn-enc", op="verify")
        from_image.add("image verify (all data read)")
    row("image verify (all data read)", verify, fmt_lim("decode limit", R.verify_rate(section="limit", case="limit")))
    row("tree backup, first", {t: R.rate(R.tree, tool=t, op="backup-1") for t in tools})
    row("tree backup, unchanged", {t: R.rate(R.tree, tool=t, op="backup-2") for t in tools})
    row("tree backup, 1 % changed", {t: R.rate(R.changed, data="tree", tool=t, op="backup-changed") for t in tools})
    row("tree restore", {t: R.rate(R.tree, tool=t, op="restore") for t in tools},
        fmt_lim("cp -a", R.rate(R.tree, tool="cp", op="restore")))
    row("tree verify (all data read)", {t: R.rate(R.changed, data="tree", tool=t, op="verify") for t in tools})
    sizes = {t: R.image_sizes[t][1] / MIB if t in R.image_sizes else NAN for t in tools}
    row("image repository after 2 backups, MiB (du)", sizes, "", False)
    growth = {}
    for t in tools:
        a = [int(r["repo_bytes"]) for r in R.pick(R.changed, data="image", tool=t, op="backup-first") if r["repo_bytes"] != "-"]
        b = [int(r["repo_bytes"]) for r in R.pick(R.changed, data="image", tool=t, op="backup-changed") if r["repo_bytes"] != "-"]
        growth[t] = (med(b) - med(a)) / MIB if a and b else NAN
    row("image repository growth for 1 % changed, MiB", growth, "", False)
    tsize = {t: med([int(r["repo_bytes"]) for r in R.pick(R.changed, data="tree", tool=t, op="backup-first")
                     if r["repo_bytes"] != "-"]) / MIB for t in tools}
    row("tree repository after the first backup, MiB (du)", tsize, "", False)
    rss = {}
    for t in tools:
        v = [int(r["rss_kib"]) for rows in (R.image, R.tree) for r in rows if r.get("tool") == t]
        v += [int(r["rss_kib"]) for r in R.changed if r["tool"] == t]
        v += [int(r["rss_kib"]) for r in R.restore if r["section"] == "compare" and r["case"] == t]
        v += [int(r["rss_kib"]) for r in R.verify if r["section"] == "compare" and r["case"] == t]
        rss[t] = max(v) / 1024 if v else NAN
    row("peak RSS over all of the above, MiB", rss, "", False)

    print("MiB/s (medians) unless the row says otherwise; the limit column is the machine's raw rate "
          "for comparable work (limits_bench.sh, verify_bench.sh's decode limit, `cp -a`).")
    print("**restic always encrypts** (AES-256-CTR + Poly1305, no way to turn it off): hold it against "
          "the *cairn --keyfile* column (AES-256-GCM, keyed chunk ids, signed manifests, the key's "
          "default KDF on every command). *cairn* stores plain data, as borg does here "
          "(`borg init --encryption=none`).")
    print()
    print("| operation | cairn | cairn --keyfile | restic | borg | raw limit MiB/s "
          "| cairn ÷ best other | cairn --keyfile ÷ restic |")
    print("|---|---:|---:|---:|---:|---|---:|---:|")

    def quotient(a, b, higher):
        if not (ok(a) and ok(b)) or not b:
            return ""
        return f"{a / b:.2f}"

    for label, vals, limit, is_rate in lines:
        cells = [("–" if not ok(vals[t]) else f"{vals[t]:.1f}" if not is_rate and abs(vals[t]) < 10
                  else f"{vals[t]:.0f}") for t in tools]
        if label in from_image and cells[1] != "–":
            cells[1] += " *"
        others = [vals[t] for t in ("restic", "borg") if ok(vals[t])]
        q = ""
        if ok(vals["cairn"]) and others:
            q = quotient(vals["cairn"], max(others) if is_rate else min(others), is_rate)
        qe = quotient(vals["cairn-enc"], vals["restic"], is_rate)
        print(f"| {label} | " + " | ".join(cells) + f" | {limit} | {q} | {qe} |")
    if from_image:
        print()
        print("\\* image_bench.sh's figure: the other columns of that row come from the dedicated "
              "script (restore_bench.sh, verify_bench.sh), which has no encrypted case.")
    if plot_out:
        with open(plot_out, "w") as f:
            f.write('operation "cairn" "cairn --keyfile" "restic" "borg"\n')
            for label, vals, _, is_rate in lines:
                if is_rate and any(ok(v) for v in vals.values()):
                    f.write(f'"{label}" ' + " ".join(f"{vals[t]:.1f}" if ok(vals[t]) else "NaN" for t in tools) + "\n")


def main(argv):
    args = argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    d = args.pop(0)
    json_out = plot_out = None
    want_headline = ignore_others = False
    while args:
        a = args.pop(0)
        if a == "--json" and args:
            json_out = args.pop(0)
        elif a == "--plot-data" and args:
            plot_out = args.pop(0)
        elif a == "--headline":
            want_headline = True
        elif a == "--ignore-other-runs":
            ignore_others = True
        else:
            sys.exit(__doc__)
    R = Results(d)
    try:
        left_out = check_one_run(R, ignore_others)
    except MixedRuns as e:
        print(f"targets.py: {e}", file=sys.stderr)
        sys.exit(3)
    if left_out:
        print(f"(left out, from another run or commit: {', '.join(left_out)})", file=sys.stderr)
    if want_headline:
        headline(R, plot_out)
        return
    rows = targets(R)
    print_targets(rows)
    if json_out:
        with open(json_out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv)
