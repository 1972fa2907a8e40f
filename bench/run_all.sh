#!/usr/bin/env bash
# The comparison suite in one command: cairn beside restic, borg and the raw
# limits of the machine, on data sets from the project's own generator, every
# benchmark script in bench/ in sequence, then the table of every performance
# target the issues set, marked met or not.
#
#   bash bench/run_all.sh [--quick] [--rounds N] [--dir DIR] [--update-docs]
#                         [--only LIST] [--build]
#
#   --quick        small data sets and one round: 128 MiB image, tree of 1000
#                  files / 64 MiB, short sweeps, gc on 1000 chunks (the aim:
#                  under 5 minutes on a 2-vCPU VM). Without it: 2 GiB image,
#                  20 000 files / 1 GiB, 2 rounds (3 for the raw limits, 1 for
#                  gc on 50 000 chunks and for verify's RSS on 10k, 100k and
#                  1M chunks) (the aim: under 45 minutes)
#   --rounds N     rounds of every script (default: 1 with --quick, else as above)
#   --dir DIR      work directory (default /var/tmp/cairn-suite), one
#                  subdirectory per script; needs ~8x the image size free
#   --update-docs  write the summary (machine, targets, headline tables) between
#                  the suite markers of docs/BENCHMARKS.md and the plot
#                  docs/img/suite_compare.png (gnuplot); without --quick, every
#                  script also rewrites its own section and plots there. A
#                  --quick run leaves the detailed sections alone (their full
#                  runs are worth more than a quick sample).
#   --only LIST    steps to run, comma-separated (default: all, in this order):
#                    limits   bench/limits_bench.sh   cat, cp, sha256, zstd -1 / -d,
#                                                     `cairn benchmark`
#                    image    bench/image_bench.sh    image backup (first, unchanged),
#                                                     restore, verify, store size, RSS
#                    restore  bench/restore_bench.sh  parallel restore vs restic, borg,
#                                                     cat; latency sweep; RSS vs size
#                    verify   bench/verify_bench.sh   verify vs restic check --read-data,
#                                                     borg check --verify-data; decode
#                                                     limit; latency; RSS per chunk
#                    tree     bench/tree_bench.sh     tree backup, restore, ls, cat
#                    changed  bench/changed_bench.sh  second backup with 1 % changed
#                                                     (image, tree), repository growth,
#                                                     tree verify
#                    crypt    bench/crypt_bench.sh    backup, restore, verify plain vs
#                                                     encrypted (issue 7's 10 % target)
#                    remote   bench/remote_bench.sh   restore from `cairn serve` over
#                                                     loopback TLS vs local (issue 6's
#                                                     0.6x target); latency 5, 20 ms
#                    s3       bench/s3_bench.sh       restore and verify from a Ceph
#                                                     RGW on loopback (issue 9): --jobs
#                                                     auto vs 1, 8, 32, vs restic from
#                                                     the same RGW (scripts/s3-server.sh)
#                    access   bench/access_bench.sh   cairn mount and cairn nbd (issue 25):
#                                                     first byte, nbdcopy / cat vs restore,
#                                                     random 4 KiB reads, tree find/cat/cp -a
#                    gc       bench/gc_bench.sh       gc, parallel vs one thread (the
#                                                     retention work's script; its table
#                                                     goes to DIR/gc/gc_bench.md)
#   --gc-chunks N  chunks of gc_bench.sh's store (the gc issue asks for
#                  ≥ 500 000; a single-thread gc that removes them all takes
#                  ~30 min on the 2-vCPU VM, so the default is smaller)
#   --build        rebuild the release preset first (default: build only when
#                  build/release/src/cairn is missing)
#
# On Debian 12 as root it installs what is missing (scripts/setup-deps.sh,
# restic, borgbackup, gnuplot-nox, zstd, time); otherwise it uses what is
# there. The binaries are copied to DIR/bin first, so a rebuild in the
# checkout during the run does not mix two builds. A step that fails is
# reported and the others still run; the exit status is 1 then.
# Results: DIR/<step>/ (each script's results.tsv, logs/, markdown),
# DIR/suite.json (steps, times), DIR/targets.md and .json (bench/targets.py),
# DIR/suite.md (the summary that --update-docs puts into docs/BENCHMARKS.md).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bench_name=run_all
source bench/lib.sh

command_line="bash bench/run_all.sh${*:+ $*}"
quick=0
rounds=
dir=${CAIRN_BENCH_DIR:-/var/tmp/cairn-suite}
update_docs=0
only=limits,image,restore,verify,tree,changed,crypt,remote,s3,access,gc
build=0
gc_chunks_arg=
usage() { sed -n '7,62p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --quick) quick=1; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --update-docs) update_docs=1; shift ;;
    --only) only=$2; shift 2 ;;
    --build) build=1; shift ;;
    --gc-chunks) gc_chunks_arg=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "run_all: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ -z $rounds || $rounds =~ ^[1-9][0-9]*$ ]] || { echo "run_all: --rounds must be a positive number" >&2; exit 2; }
all_steps=(limits image restore verify tree changed crypt remote s3 access gc)
declare -A want=()
IFS=, read -ra parts <<<"$only"
for s in "${parts[@]}"; do
  [[ " ${all_steps[*]} " == *" $s "* ]] || { echo "run_all: --only: unknown step '$s' (${all_steps[*]})" >&2; exit 2; }
  want[$s]=1
done
t_start=$(date +%s%N)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# --- dependencies -------------------------------------------------------------
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  [[ -f scripts/setup-deps.sh ]] && bash scripts/setup-deps.sh
  # gnuplot-nox: Debian's gnuplot without the X11/Qt front ends (PNG output only).
  command -v gnuplot >/dev/null || apt_install gnuplot-nox
  apt_install restic borgbackup zstd time python3 coreutils openssl
else
  say "not root: installing nothing; restic, borg or gnuplot that are missing are left out"
fi
for t in restic borg gnuplot zstd; do
  command -v "$t" >/dev/null || say "warning: $t is not installed: its rows will be missing"
done
no_tools=()
command -v restic >/dev/null || no_tools+=(--no-restic)
command -v borg >/dev/null || no_tools+=(--no-borg)

# --- build, then a private copy of the binaries ----------------------------------
rel=build/release
if ((build)) || [[ ! -x $rel/src/cairn || ! -x $rel/bench/cairn-gendata || ! -x $rel/bench/cairn-synth-store ]]; then
  say "building the release preset ($rel)"
  { [[ -f $rel/build.ninja ]] || cmake --preset release >/dev/null; } &&
    cmake --build "$rel" >/dev/null || die "the release build failed"
fi
mkdir -p "$dir" || die "cannot create $dir"
dir=$(cd "$dir" && pwd)
rm -rf "$dir/bin"
mkdir -p "$dir/bin/src" "$dir/bin/bench"
cp "$rel/src/cairn" "$dir/bin/src/"
for b in cairn-gendata cairn-synth-store cairn-micro-bench; do
  [[ -x $rel/bench/$b ]] && cp "$rel/bench/$b" "$dir/bin/bench/"
done
# Debian's python3 for every script: the benchmarks need only its standard
# library, and a version manager's shim in front of it (pyenv's costs ~1.3 s a
# start here) would land in every timed gap between commands.
if [[ -x /usr/bin/python3 ]]; then
  mkdir -p "$dir/bin/path"
  ln -sfn /usr/bin/python3 "$dir/bin/path/python3"
  export PATH=$dir/bin/path:$PATH
fi
export CAIRN_BENCH_COMMIT CAIRN_BENCH_RUN_ID
CAIRN_BENCH_COMMIT=$(commit_of "$root" || echo unknown)
# One id for every step of this run: each step's DIR/STEP/run.json records it
# (bench/lib.sh stamp_results), and bench/targets.py refuses a table whose
# results come from more than one run or commit.
CAIRN_BENCH_RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)-$$
export CAIRN_BIN=$dir/bin/src/cairn
export CAIRN_GENDATA=$dir/bin/bench/cairn-gendata
export CAIRN_SYNTH=$dir/bin/bench/cairn-synth-store
bench_bins

# --- sizes and sweeps -------------------------------------------------------------
if ((quick)); then
  size=128M files=1000 tree_size=64M
  r_default=1 r_limits=1 r_gc=1
  restore_opts=(--only compare,latency,rss --latencies 0,20 --jobs-list 1,16 --latency-ops restore --sparse-size 1G)
  verify_opts=(--only compare,limit,latency,rss --latencies 0,20 --jobs-list 1,16 --chunk-counts 1000,4000)
  gc_chunks=1000 mark_refs=100000
  mode=quick
else
  size=2G files=20000 tree_size=1G
  r_default=2 r_limits=3 r_gc=1
  restore_opts=(--only compare,latency,rss --latencies 0,20 --jobs-list 1,4,16 --latency-ops restore)
  # --cold: issue 4 asks for cold-cache rows in the same run where the page
  # cache can be dropped (verify_bench.sh leaves them out, and says so, elsewhere).
  verify_opts=(--only compare,limit,latency,rss --latencies 0,20 --jobs-list 1,4,16 --chunk-counts 10000,100000,1000000 --cold)
  gc_chunks=50000 mark_refs=10000000
  mode=full
fi
[[ -n $rounds ]] && r_default=$rounds r_limits=$rounds r_gc=$rounds
[[ -n $gc_chunks_arg ]] && gc_chunks=$gc_chunks_arg
doc_opts=(--no-doc)
tree_doc=()
if ((update_docs && !quick)); then doc_opts=(); tree_doc=(--update-docs); fi

# --- data sets (the generator's; each script finds them where it looks) -------
image=$dir/data/disk-$size.img
tree=$dir/tree/tree-$files-$tree_size
ensure_image "$image" "$size"
for s in image restore verify; do  # hard links: one copy on disk, one in the page cache
  mkdir -p "$dir/$s"
  if [[ ! $dir/$s/disk-$size.img -ef $image ]]; then
    rm -f "$dir/$s/disk-$size.img"
    ln "$image" "$dir/$s/disk-$size.img" 2>/dev/null || cp "$image" "$dir/$s/disk-$size.img"
  fi
  cp "$image.manifest.json" "$dir/$s/disk-$size.img.manifest.json"
done
((${want[tree]:-0} || ${want[changed]:-0} || ${want[access]:-0})) && ensure_tree "$tree" "$files" "$tree_size"

# --- the steps --------------------------------------------------------------
steps_tsv=$dir/suite-steps.tsv
printf 'step\tseconds\tstatus\tcommand\n' >"$steps_tsv"
failed=()
run_step() {  # run_step NAME CMD...
  local name=$1 t0 t1 status
  shift
  ((${want[$name]:-0})) || return 0
  say "[$name] $*"
  t0=$(date +%s%N)
  "$@"
  status=$?
  t1=$(date +%s%N)
  ((status == 0)) || { failed+=("$name"); say "[$name] FAILED (exit $status); going on with the next step"; }
  printf '%s\t%s\t%s\t%s\n' "$name" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')" \
    "$status" "$*" >>"$steps_tsv"
}
q=()
((quick)) && q=(--quick)
run_step limits bash bench/limits_bench.sh "${q[@]}" --rounds "$r_limits" --image "$image" --dir "$dir/limits"
run_step image bash bench/image_bench.sh "${q[@]}" --rounds "$r_default" --size "$size" --dir "$dir/image" \
  "${no_tools[@]}" "${doc_opts[@]}"
run_step restore bash bench/restore_bench.sh "${q[@]}" --rounds "$r_default" --size "$size" --dir "$dir/restore" \
  "${restore_opts[@]}" "${no_tools[@]}" "${doc_opts[@]}"
run_step verify bash bench/verify_bench.sh "${q[@]}" --rounds "$r_default" --size "$size" --dir "$dir/verify" \
  "${verify_opts[@]}" "${no_tools[@]}" "${doc_opts[@]}"
run_step tree bash bench/tree_bench.sh "${q[@]}" --rounds "$r_default" --files "$files" --size "$tree_size" \
  --dir "$dir/tree" "${no_tools[@]}" "${tree_doc[@]}"
run_step changed bash bench/changed_bench.sh "${q[@]}" --rounds "$r_default" --size "$size" --files "$files" \
  --tree-size "$tree_size" --image "$image" --tree "$tree" --dir "$dir/changed" "${no_tools[@]}"
crypt_runs=5
[[ $mode == quick ]] && crypt_runs=3
run_step crypt bash bench/crypt_bench.sh --runs "$crypt_runs" --size "$size" --image "$image" --dir "$dir/crypt"
# remote_bench.sh: its own run counts like crypt's (--quick: 3, else 5), or
# --rounds N; the suite's image (its --quick size is only the default).
remote_opts=("${q[@]}")
[[ -n $rounds ]] && remote_opts+=(--runs "$rounds")
if ((update_docs && !quick)); then remote_opts+=(--update-docs); else remote_opts+=(--no-doc); fi
run_step remote bash bench/remote_bench.sh "${remote_opts[@]}" --size "$size" --image "$image" --dir "$dir/remote"
# s3_bench.sh: 3 interleaved runs (or --rounds N) on the suite's image, from
# the Ceph RGW that scripts/s3-server.sh starts (and s3_bench.sh stops again).
s3_opts=(--image "$image" --dir "$dir/s3")
[[ -n $rounds ]] && s3_opts+=(--runs "$rounds")
command -v restic >/dev/null || s3_opts+=(--no-restic)
if ((update_docs && !quick)); then s3_opts+=(--update-docs); else s3_opts+=(--no-doc); fi
run_step s3 bash bench/s3_bench.sh "${s3_opts[@]}"
# access_bench.sh: `cairn mount` and `cairn nbd` on the suite's image and tree.
access_opts=("${q[@]}" --image "$image" --tree "$tree" --files "$files" --tree-size "$tree_size")
[[ -n $rounds ]] && access_opts+=(--rounds "$rounds")
((update_docs && !quick)) && access_opts+=(--update-docs)
run_step access bash bench/access_bench.sh "${access_opts[@]}" --dir "$dir/access"
# gc_bench.sh prints its table on stdout only: keep a copy beside its results.
gc_step() {
  mkdir -p "$dir/gc"
  { echo "### Garbage collection, parallel against one thread"; echo; } >"$dir/gc/gc_bench.md"
  bash bench/gc_bench.sh --chunks "$gc_chunks" --mark-refs "$mark_refs" --rounds "$r_gc" --dir "$dir/gc" --keep |
    tee -a "$dir/gc/gc_bench.md"
}
run_step gc gc_step

t_end=$(date +%s%N)
wall=$(awk -v a="$t_start" -v b="$t_end" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
python3 - "$dir/suite.json" "$steps_tsv" "$mode" "$wall" "$started" "$command_line" "${only}" \
  "$CAIRN_BENCH_RUN_ID" "$CAIRN_BENCH_COMMIT" <<'PY'
import json, sys
path, steps_tsv, mode, wall, started, cmd, only, run_id, commit = sys.argv[1:]
lines = open(steps_tsv).read().splitlines()
header = lines[0].split("\t")
steps = [dict(zip(header, l.split("\t"))) for l in lines[1:] if l]
for s in steps:
    s["seconds"] = float(s["seconds"]); s["status"] = int(s["status"])
json.dump({"mode": mode, "wall_seconds": float(wall), "started": started, "command": cmd,
           "run_id": run_id, "commit": commit,
           "steps_asked": only.split(","), "steps": steps}, open(path, "w"), indent=1)
PY

# --- the summary ----------------------------------------------------------------
python3 bench/targets.py "$dir" --json "$dir/targets.json" >"$dir/targets.md" ||
  { failed+=(targets); echo "(bench/targets.py failed)" >"$dir/targets.md"; }
python3 bench/targets.py "$dir" --headline --plot-data "$dir/suite_compare.dat" >"$dir/headline.md" ||
  { failed+=(headline); : >"$dir/headline.md"; }
plot_note=
if ((update_docs)) && command -v gnuplot >/dev/null && [[ -s $dir/suite_compare.dat ]]; then
  mkdir -p docs/img
  if gnuplot -e "datafile='$dir/suite_compare.dat'; outfile='docs/img/suite_compare.png'; subtitle='$mode run, $(nproc) CPUs, ${CAIRN_BENCH_COMMIT%% *}'" \
    - <<'GP'
set terminal pngcairo size 1000,520 font ",10"
set output outfile
set title "cairn (plain and --keyfile) vs restic (always encrypted) vs borg (MiB/s, higher is better)\n{/*0.8 ".subtitle."}"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top right
set ylabel "MiB/s"
set xtics rotate by 30 right noenhanced
set lmargin 16
set bmargin 9
set grid ytics
set yrange [0:*]
plot datafile using 2:xtic(1) title columnheader(2), '' using 3 title columnheader(3), '' using 4 title columnheader(4), '' using 5 title columnheader(5)
GP
  then plot_note="![suite_compare](img/suite_compare.png)"
  else say "gnuplot failed: no docs/img/suite_compare.png"
  fi
fi
wall_min=$(awk -v s="$wall" 'BEGIN { printf "%.1f", s / 60 }')
{
  echo "<!-- suite:begin (written by bench/run_all.sh --update-docs; edit outside the markers) -->"
  echo "## Comparison suite: summary and performance targets"
  echo
  echo "Latest run: \`$command_line\` ($mode mode, ${wall_min} min wall clock for the benchmarks;"
  echo "steps: $(awk -F'\t' 'NR > 1 { printf "%s%s %.0f s%s", sep, $1, $2, ($3 == 0 ? "" : " FAILED"); sep = ", " }' "$steps_tsv"))."
  ((quick)) && echo "A quick run: small data sets, one round; read its ratios as a smoke test, the detailed sections below hold the full runs."
  echo
  machine_details "$dir"
  echo "- versions: cairn $("$cairn" --version 2>/dev/null | awk 'NR == 1'); $(command -v restic >/dev/null && restic version | cut -d' ' -f1-2); $(command -v borg >/dev/null && borg --version); zstd $(zstd --version | grep -o 'v[0-9.]*' | head -n1)"
  echo "- data: image \`cairn-gendata image --size $size --seed 1\`; tree \`cairn-gendata tree --files $files --size $tree_size --seed 2\`; warm page cache"
  echo
  echo "### Performance targets"
  echo
  echo "Every numeric target the issues set, from this run's results (\`python3 bench/targets.py DIR\`)."
  echo
  cat "$dir/targets.md"
  echo
  echo "### Headline: cairn vs restic vs borg"
  echo
  cat "$dir/headline.md"
  [[ -n $plot_note ]] && { echo; echo "$plot_note"; }
  echo
  for f in changed/changed_bench.md limits/limits_bench.md gc/gc_bench.md; do
    [[ -s $dir/$f ]] && { sed 's/^### /#### /' "$dir/$f"; echo; }
  done
  echo "Details: [image backup/restore](#image-backuprestore-sequential-baseline),"
  echo "[parallel restore](#parallel-restore), [parallel verify](#parallel-verify),"
  echo "[tree archives](#tree-archives)$( ((quick)) && echo " (full runs; this quick run's tables are in \`$dir/*/\`)"). Raw results of this run: \`$dir\`."
  echo "<!-- suite:end -->"
} >"$dir/suite.md"
echo
cat "$dir/suite.md"
if ((update_docs)); then
  replace_doc_section docs/BENCHMARKS.md suite "$dir/suite.md"
  say "summary written to docs/BENCHMARKS.md (suite markers)"
fi
say "suite: $mode run in ${wall_min} min; results in $dir"
if ((${#failed[@]})); then
  say "failed steps: ${failed[*]}"
  exit 1
fi
