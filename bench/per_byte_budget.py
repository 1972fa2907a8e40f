#!/usr/bin/env python3
"""Per-byte budget of `cairn restore` and `cairn verify`: where the work goes.

Generates a small image (default 64 MiB) with cairn-gendata, backs it up into
a fresh store, then profiles a restore to a new file and a verify of the
store twice:

  callgrind  user-space instructions per byte, by category (valgrind
             --tool=callgrind; deterministic, but blind to the kernel, and
             valgrind hides SHA-NI and AVX-512 from the CPU feature checks,
             so OpenSSL's SHA-256 runs its AVX2 code there);
  perf       share of CPU time, kernel included, natively (perf record
             -e cpu-clock -g; works in VMs without hardware counters), and
             perf stat's task-clock, page faults and context switches.

Categories: read (pread: kernel copy + filesystem), CRC32C, zstd decompress,
SHA-256, write (pwrite: kernel copy + filesystem), fsync, zero-fill of fresh
buffers (memset), page faults (first touch of fresh buffers), allocation
(malloc/free, mmap/munmap), memcpy, open/stat/close, other.

Usage:
  bench/per_byte_budget.py [--cairn build/release/src/cairn]
                           [--gendata build/release/bench/cairn-gendata]
                           [--size 64M] [--dir /var/tmp/cairn-budget]
                           [--no-callgrind] [--no-perf]
Prints Markdown tables; needs valgrind and/or linux-perf.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

CATEGORIES = ["read", "CRC32C", "zstd decompress", "SHA-256", "write", "fsync",
              "zero-fill (memset)", "page faults", "allocation", "memcpy",
              "open/stat/close", "other"]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def leaf_category(sym, obj):
    """Category of a sample or cost from its leaf function alone."""
    s = sym or ""
    o = obj or ""
    if "libcrypto" in o or re.search(r"sha256", s, re.I):
        return "SHA-256"
    if "libzstd" in o or re.match(r"(ZSTD|HUF|FSE|BIT_)", s):
        return "zstd decompress"
    if re.search(r"Crc32c|ExtendHardware", s):
        return "CRC32C"
    if re.search(r"memset", s):
        return "zero-fill (memset)"
    if re.search(r"memmove|memcpy", s):
        return "memcpy"
    if re.search(r"malloc|free|_int_|sysmalloc|alloc_new_heap|operator new|operator delete|"
                 r"arena|tcache|cfree", s):
        return "allocation"
    return None


def chain_category(frames):
    """Category of a perf sample from its call chain (leaf first)."""
    syms = [f[0] for f in frames]
    joined = " ".join(syms)
    leaf = leaf_category(*frames[0]) if frames else None
    if leaf in ("SHA-256", "zstd decompress", "CRC32C"):
        return leaf
    if re.search(r"\bexc_page_fault\b|\basm_exc_page_fault\b", joined):
        return "page faults"
    if re.search(r"munmap|mmap64|\bmmap\b|__x64_sys_brk|\bbrk\b|madvise", joined):
        return "allocation"
    if re.search(r"pread64|ksys_pread|vfs_read|filemap_read|ext4_file_read", joined):
        return "read"
    if re.search(r"pwrite64|ksys_pwrite|vfs_write|ext4_buffered_write|generic_perform_write", joined):
        return "write"
    if re.search(r"fsync|fdatasync|syncfs|file_write_and_wait|writepages", joined):
        return "fsync"
    if re.search(r"openat|do_sys_open|statx|newfstat|__close|close_fd|getdents|rename", joined):
        return "open/stat/close"
    if leaf:
        return leaf
    return "other"


def perf_profile(cmd, out_prefix, before):
    before()
    data = out_prefix + ".perf"
    run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4999", "-g", "-o", data, "--"] + cmd,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    script = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,ip,sym,dso"],
                            check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True).stdout
    counts = collections.Counter()
    for block in script.split("\n\n"):
        lines = [l for l in block.splitlines() if l.strip()]
        if not lines:
            continue
        frames = []
        for l in lines[1:]:
            m = re.match(r"\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", l)
            if m:
                frames.append((re.sub(r"\+0x[0-9a-f]+$", "", m.group(1)), m.group(2)))
        counts[chain_category(frames)] += 1
    before()
    stat = subprocess.run(["perf", "stat", "-x", ",", "-e", "task-clock,page-faults,context-switches",
                           "--"] + cmd, check=True, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True).stderr
    stats = {}
    for l in stat.splitlines():
        parts = l.split(",")
        if len(parts) > 3 and parts[0].replace(".", "").isdigit():
            stats[parts[2]] = float(parts[0])
    return counts, stats


def callgrind_profile(cmd, out_prefix):
    out = out_prefix + ".callgrind"
    run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + cmd,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ann = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", out],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    counts = collections.Counter()
    total = 0
    in_functions = False
    for l in ann.splitlines():
        if re.search(r"\sfile:function\s*$", l):
            in_functions = True
            continue
        if in_functions and (not l.strip() or l.startswith("--")):
            if counts:
                break  # end of the function list; source annotation follows
            continue
        m = re.match(r"\s*([0-9,]+)\s+(?:\([^)]*\)\s+)?(\S.*?):(\S.*?)(?:\s+\[(.*)\])?\s*$", l)
        if not m:
            mt = re.match(r"\s*([0-9,]+)\s+(?:\([^)]*\)\s+)?PROGRAM TOTALS", l)
            if mt:
                total = int(mt.group(1).replace(",", ""))
            continue
        if not in_functions:
            continue
        ir = int(m.group(1).replace(",", ""))
        sym, obj = m.group(3), m.group(4) or m.group(2)
        counts[leaf_category(sym, obj) or "other"] += ir
    return counts, total


def table(title, nbytes, cg, cg_total, perf, perf_stats):
    mib = nbytes / (1 << 20)
    lines = [f"**{title}** ({mib:.0f} MiB image)", "",
             "| category | callgrind instr./byte | callgrind share | perf CPU share | perf ns/byte |",
             "|---|---:|---:|---:|---:|"]
    cpu_ns = perf_stats.get("task-clock", 0) * 1e6 if perf_stats else 0
    ptotal = sum(perf.values()) if perf else 0
    for c in CATEGORIES:
        a = cg.get(c, 0) if cg else 0
        p = perf.get(c, 0) if perf else 0
        if not a and not p:
            continue
        cgi = f"{a / nbytes:.2f}" if cg else "–"
        cgs = f"{100 * a / cg_total:.1f}%" if cg and cg_total else "–"
        ps = f"{100 * p / ptotal:.1f}%" if ptotal else "–"
        pns = f"{cpu_ns * p / ptotal / nbytes:.2f}" if ptotal and cpu_ns else "–"
        lines.append(f"| {c} | {cgi} | {cgs} | {ps} | {pns} |")
    tot_cg = f"{cg_total / nbytes:.1f}" if cg else "–"
    tot_ns = f"{cpu_ns / nbytes:.2f}" if cpu_ns else "–"
    lines.append(f"| **total** | **{tot_cg}** | {'100%' if cg else '–'} | {'100%' if ptotal else '–'} "
                 f"| **{tot_ns}** |")
    if perf_stats:
        lines += ["", f"perf stat: task-clock {perf_stats.get('task-clock', 0):.0f} ms, "
                  f"{perf_stats.get('page-faults', 0):.0f} page faults "
                  f"({perf_stats.get('page-faults', 0) * 4096 / nbytes:.2f} per 4 KiB of image), "
                  f"{perf_stats.get('context-switches', 0):.0f} context switches; "
                  f"{ptotal} samples"]
    return "\n".join(lines)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cairn", default=os.path.join(root, "build/release/src/cairn"))
    ap.add_argument("--gendata", default=os.path.join(root, "build/release/bench/cairn-gendata"))
    ap.add_argument("--size", default="64M")
    ap.add_argument("--dir", default="/var/tmp/cairn-budget")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--no-perf", action="store_true")
    a = ap.parse_args()
    use_cg = not a.no_callgrind and shutil.which("valgrind")
    use_perf = not a.no_perf and shutil.which("perf")
    if use_perf and subprocess.run(["perf", "stat", "-e", "cpu-clock", "true"],
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL).returncode != 0:
        print("perf does not work here; skipping it", file=sys.stderr)
        use_perf = False
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    image = os.path.join(a.dir, "disk.img")
    store = os.path.join(a.dir, "store")
    target = os.path.join(a.dir, "restored.img")
    run([a.gendata, "image", image, "--size", a.size, "--seed", "1", "-q"])
    nbytes = os.path.getsize(image)
    run([a.cairn, "init", store], stdout=subprocess.DEVNULL)
    run([a.cairn, "backup", "-r", store, "--id", "vm/100", "disk0.img=" + image],
        stdout=subprocess.DEVNULL)

    restore = [a.cairn, "restore", "-r", store, "vm/100/latest", "disk0.img", target]
    verify = [a.cairn, "verify", "-r", store]

    def fresh_restore():
        if os.path.exists(target):
            os.remove(target)

    out = []
    for name, cmd, before in (("cairn restore (to a new file)", restore, fresh_restore),
                              ("cairn verify (whole store)", verify, lambda: None)):
        cg, cg_total, perf, pstats = None, 0, None, None
        if use_cg:
            before()
            cg, cg_total = callgrind_profile(cmd, os.path.join(a.dir, name.split()[1]))
        if use_perf:
            perf, pstats = perf_profile(cmd, os.path.join(a.dir, name.split()[1]), before)
        if cmd is restore:
            before()
            run(cmd, stdout=subprocess.DEVNULL)
            run(["cmp", image, target])
        out.append(table(name, nbytes, cg, cg_total, perf, pstats))
    print("\n\n".join(out))


if __name__ == "__main__":
    main()
