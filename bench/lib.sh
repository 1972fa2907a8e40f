# Shell helpers shared by the benchmark scripts that source it (all of
# bench/*.sh). The older scripts (image_bench.sh, tree_bench.sh, gc_bench.sh)
# still carry their own measuring loops, whose result columns differ.
#
#   source "$(dirname "$0")/lib.sh"      # after `cd` to the repository root
#   bench_name=changed_bench             # prefix of die messages
#
# Every function writes progress to stderr; nothing here changes directory.

bench_name=${bench_name:-bench}

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf '%s: FAILED: %s\n' "$bench_name" "$*" >&2; exit 1; }

# apt_install PACKAGE...: installs what dpkg does not list as installed; as
# root only (anyone else gets a note and carries on: the script fails later,
# clearly, if it really needs the package).
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    say "not installing ${missing[*]} (not root, or no apt-get): install them to measure them"
    return 0
  fi
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# in_order ROUND ITEMS...: the items, reversed in even rounds (who goes first
# alternates, so a tool does not always find the cache left by the same one).
in_order() {
  local r=$1
  shift
  if ((r % 2 == 0)); then
    local i
    for ((i = $#; i >= 1; i--)); do echo "${!i}"; done
  else
    printf '%s\n' "$@"
  fi
}

# psi: the CPU pressure (share of time some task waited for a CPU) over the
# last 5 minutes, "n/a" without /proc/pressure.
psi() { sed -n 's/^some .*avg300=\([0-9.]*\).*/\1 %/p' /proc/pressure/cpu 2>/dev/null || echo n/a; }

# json_fields LOG FIELD...: the FIELDs (dotted paths, like jobs.final) of the
# JSON object in LOG, tab-separated; "-" for what is not there (or no JSON).
json_fields() {
  python3 - "$@" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception:
    j = {}
def get(path):
    v = j
    for key in path.split("."):
        v = v.get(key) if isinstance(v, dict) else None
    return v
print("\t".join("-" if v is None else str(v) for v in map(get, sys.argv[2:])))
PY
}

to_bytes() { numfmt --from=iec "${1%B}" 2>/dev/null || die "cannot read size '$1'"; }

# bench_bins [--no-synth]: sets $cairn, $gendata, $synth from $CAIRN_BIN,
# $CAIRN_GENDATA, $CAIRN_SYNTH (the siblings of $CAIRN_BIN by default), else
# build/release's; builds the release preset only when one that is needed is
# missing (--no-synth: cairn-synth-store is not).
bench_bins() {
  local bench_dir need_synth=1
  [[ ${1:-} == --no-synth ]] && need_synth=0
  if [[ -n ${CAIRN_BIN:-} ]]; then
    bench_dir=$(dirname "$CAIRN_BIN")/../bench
    [[ -z ${CAIRN_GENDATA:-} && -x $bench_dir/cairn-gendata ]] && CAIRN_GENDATA=$bench_dir/cairn-gendata
    [[ -z ${CAIRN_SYNTH:-} && -x $bench_dir/cairn-synth-store ]] && CAIRN_SYNTH=$bench_dir/cairn-synth-store
  fi
  cairn=${CAIRN_BIN:-$PWD/build/release/src/cairn}
  gendata=${CAIRN_GENDATA:-$PWD/build/release/bench/cairn-gendata}
  synth=${CAIRN_SYNTH:-$PWD/build/release/bench/cairn-synth-store}
  if [[ ! -x $cairn || ! -x $gendata ]] || ((need_synth)) && [[ ! -x $synth ]]; then
    [[ -f scripts/setup-deps.sh && $(id -u) -eq 0 ]] && bash scripts/setup-deps.sh
    say "building the release preset (build/release)"
    [[ -f build/release/build.ninja ]] || cmake --preset release >/dev/null
    cmake --build build/release --target cairn cairn-gendata cairn-synth-store >/dev/null
  fi
  cairn=$(realpath "$cairn")
  gendata=$(realpath "$gendata")
  synth=$(realpath -m "$synth")
  [[ -x $cairn ]] || die "no cairn binary at $cairn"
  [[ -x $gendata ]] || die "no cairn-gendata binary at $gendata"
}

# ensure_image PATH SIZE: a cairn-gendata image (seed 1) at PATH, generated
# unless its manifest says it is already there (the same test as the other
# bench scripts, so they reuse it).
ensure_image() {
  local img=$1 size=$2
  if ! python3 - "$img" <<'PY'
import json, os, sys
img = sys.argv[1]
try:
    m = json.load(open(img + ".manifest.json"))
    ok = m.get("generator") == "cairn-gendata" and m.get("seed") == 1 and os.path.getsize(img) == m["size"]
except Exception:
    ok = False
sys.exit(0 if ok else 1)
PY
  then
    say "generating a $size image with cairn-gendata"
    mkdir -p "$(dirname "$img")"
    "$gendata" image "$img" --size "$size" --seed 1 -q
  fi
}

# ensure_tree PATH FILES SIZE: a cairn-gendata tree (seed 2) at PATH, as
# tree_bench.sh makes and recognises it.
ensure_tree() {
  local path=$1 files=$2 size=$3 seed=2
  if ! python3 - "$path" "$files" "$seed" <<'PY'
import json, os, sys
path, files, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    m = json.load(open(path + ".manifest.json"))
    ok = os.path.isdir(path) and m.get("generator") == "cairn-gendata" and \
        m.get("seed") == seed and m.get("files") == files and \
        not os.path.exists(path + ".partial")
except Exception:
    ok = False
sys.exit(0 if ok else 1)
PY
  then
    say "generating a tree of $files files, $size, with cairn-gendata"
    mkdir -p "$(dirname "$path")"
    rm -rf "$path" "$path.manifest.json"
    touch "$path.partial"
    "$gendata" tree "$path" --files "$files" --size "$size" --seed "$seed" -q
    rm -f "$path.partial"
  fi
}

# The results table every script sourcing this writes: one line per timed
# command. `repo_bytes` is du of the repository after the command ("-" where
# there is none), `note` free text (no tabs).
results_header() { printf 'round\tdata\ttool\top\tseconds\trss_kib\tbytes\trepo_bytes\tnote\n'; }

# measure ROUND DATA TOOL OP NBYTES CMD...: runs CMD under /usr/bin/time
# (wall clock, peak RSS), its output to $dir/logs/, and appends a line to
# $results. $repo (if set and a directory) is measured with du afterwards;
# $note goes into the last column. A failing command fails the run.
measure() {
  local round=$1 data=$2 tool=$3 op=$4 nbytes=$5
  shift 5
  local log="$dir/logs/r$round-$data-$tool-$op.log" t0 t1 rss secs rb=-
  t0=$(date +%s%N)
  if ! /usr/bin/time -f '%M' -o "$dir/logs/rss" "$@" </dev/null >"$log" 2>"$log.err"; then
    tail -n 30 "$log" "$log.err" >&2
    die "round $round: $data $tool $op failed (log: $log)"
  fi
  t1=$(date +%s%N)
  rss=$(tail -n1 "$dir/logs/rss")
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  [[ -n ${repo:-} && -d ${repo:-} ]] && rb=$(du -s -B1 "$repo" | cut -f1)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$data" "$tool" "$op" "$secs" "$rss" \
    "$nbytes" "$rb" "${note:--}" >>"$results"
  printf '   %-6s %-7s %-16s %8.2f s %9.1f MiB/s %7.1f MiB RSS\n' "$data" "$tool" "$op" "$secs" \
    "$(awk -v b="$nbytes" -v s="$secs" 'BEGIN { print (s > 0 ? b / 1048576 / s : 0) }')" \
    "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')" >&2
}

# commit_of DIR: the short commit of the checkout DIR is in, with a note when
# src/ has uncommitted changes. $CAIRN_BENCH_COMMIT wins over both.
commit_of() {
  local d=$1 c
  if [[ -n ${CAIRN_BENCH_COMMIT:-} ]]; then echo "$CAIRN_BENCH_COMMIT"; return 0; fi
  c=$(git -C "$d" rev-parse --short HEAD 2>/dev/null) || return 1
  [[ -n $(git -C "$d" status --porcelain --untracked-files=no -- \
    "$(git -C "$d" rev-parse --show-toplevel)/src" 2>/dev/null) ]] && c+=" (with uncommitted changes in src/)"
  echo "$c"
}

# stamp_results DIR: writes DIR/run.json, where DIR's results came from:
# the commit ($CAIRN_BENCH_COMMIT, else the checkout's) and a run id
# ($CAIRN_BENCH_RUN_ID, which bench/run_all.sh sets for all its steps, else a
# new one), with the script and its command line. Every script calls it when
# it starts a fresh results.tsv; bench/targets.py refuses to put results of
# different runs or commits in one table.
stamp_results() {
  local d=$1
  local run_id=${CAIRN_BENCH_RUN_ID:-$(date -u +%Y%m%dT%H%M%SZ)-$$}
  python3 - "$d/run.json" "$(commit_of "$PWD" || echo unknown)" "$run_id" "$bench_name" \
    "${command_line:-}" <<'PY'
import json, sys, time
path, commit, run_id, script, command = sys.argv[1:]
json.dump({"commit": commit, "run_id": run_id, "script": script, "command": command,
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, open(path, "w"), indent=1)
PY
}

# machine_details DIR: Markdown bullets describing this machine and DIR's
# file system.
machine_details() {
  local d=$1
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- commit: $(commit_of "$PWD" || echo unknown)"
  echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | awk 'NR == 1'), $(nproc) online CPUs (nproc)$(grep -q sha_ni /proc/cpuinfo && echo ', SHA-NI')"
  echo "- memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  echo "- filesystem of $d: $(findmnt -no FSTYPE,SOURCE -T "$d" | tr -s ' ')"
  echo "- kernel: $(uname -r); OS: $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "- load average (1/5/15 min) now: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# replace_doc_section FILE NAME SECTION_FILE [AFTER_HEADING]: puts the text of
# SECTION_FILE between `<!-- NAME:begin` and `<!-- NAME:end -->` in FILE,
# replacing what was there; when the markers are missing the section goes
# right after the first `# ` heading (and its first paragraph break).
replace_doc_section() {
  python3 - "$1" "$2" "$3" <<'PY'
import re, sys
path, name, section_file = sys.argv[1:]
section = open(section_file).read().strip("\n")
try:
    text = open(path).read()
except FileNotFoundError:
    text = "# Benchmarks\n"
pat = re.compile(r"<!-- " + re.escape(name) + r":begin.*?<!-- " + re.escape(name) + r":end -->", re.S)
if pat.search(text):
    text = pat.sub(lambda m: section, text, count=1)
else:
    m = re.search(r"^# .*\n", text, re.M)
    at = m.end() if m else 0
    text = text[:at] + "\n" + section + "\n" + text[at:]
open(path, "w").write(text)
PY
}

# Repositories of restic and borg without prompts, caches inside $dir.
bench_repo_env() {
  export RESTIC_PASSWORD=cairn-bench
  export RESTIC_CACHE_DIR=$dir/restic-cache
  export BORG_BASE_DIR=$dir/borg-home
  export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
  export BORG_RELOCATED_REPO_ACCESS_IS_OK=yes
}

# start_cairn_serve LOGDIR SERVE_ARGS...: `$cairn serve --listen 127.0.0.1:0
# SERVE_ARGS...` in the background (stdout LOGDIR/serve.out, stderr
# LOGDIR/serve.err); waits up to 30 s for its "listening on" line and sets
# server_pid, port and fingerprint from it. The caller stops the server.
start_cairn_serve() {
  local logs=$1 line= _
  shift
  : >"$logs/serve.out"
  "$cairn" serve --listen 127.0.0.1:0 "$@" </dev/null >"$logs/serve.out" 2>"$logs/serve.err" &
  server_pid=$!
  for _ in $(seq 300); do
    line=$(grep -m1 '^cairn serve: listening on ' "$logs/serve.out" || true)
    [[ -n $line ]] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$logs/serve.err" >&2; die "cairn serve exited before listening"; }
    sleep 0.1
  done
  [[ -n $line ]] || { cat "$logs/serve.err" >&2; die "cairn serve printed no 'listening on' line in 30 s"; }
  port=$(sed -n 's|.*https://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' <<<"$line")
  fingerprint=$(sed -n 's|.*certificate fingerprint \([0-9A-Fa-f:]*\).*|\1|p' <<<"$line")
  [[ -n $port && -n $fingerprint ]] || die "cannot read the port and fingerprint from: $line"
}
