#!/bin/bash
# Compares cairn-gendata with the reference generator (../shared/data/gen_dataset.py)
# at the same sizes and seed: byte mix from the manifests, generation time,
# zstd -1 ratios and 4 MiB chunk statistics (bench/image_stats.py).
#
#   bench/compare_generators.sh [--gendata PATH] [--reference gen_dataset.py] [--dir DIR] [SIZE...]
#
# Defaults: build/release/bench/cairn-gendata, /work/shared/data/gen_dataset.py
# (or $CAIRN_REFERENCE_GENERATOR), /var/tmp/cairn-gencmp, sizes 256M 2G.
# Prints a Markdown table on stdout. Needs python3 and zstd.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
gendata=$root/build/release/bench/cairn-gendata
reference=${CAIRN_REFERENCE_GENERATOR:-/work/shared/data/gen_dataset.py}
dir=/var/tmp/cairn-gencmp
sizes=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --gendata) gendata=$2; shift 2 ;;
    --reference) reference=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) sizes+=("$1"); shift ;;
  esac
done
[[ ${#sizes[@]} -gt 0 ]] || sizes=(256M 2G)
[[ -x $gendata ]] || { echo "no $gendata: build first (cmake --preset release && cmake --build build/release)" >&2; exit 1; }
[[ -f $reference ]] || { echo "no reference generator at $reference" >&2; exit 1; }
mkdir -p "$dir"

echo "| generator | size | zero / random / text / dup (bytes) | gen. time | zstd -1 ratio, image | zstd -1 ratio, text chunks | all-zero 4 MiB chunks | duplicate 4 MiB chunks |"
echo "|---|---|---|---|---|---|---|---|"
for size in "${sizes[@]}"; do
  for gen in cairn-gendata gen_dataset.py; do
    img=$dir/$gen-$size.img
    if [[ $gen == cairn-gendata ]]; then
      "$gendata" image "$img" --size "$size" --seed 1 -q
    else
      python3 "$reference" image "$img" --size "$size" --seed 1 >/dev/null
    fi
    python3 - "$img" "$gen" "$size" "$here/image_stats.py" <<'PY'
import json, sys, importlib.util
img, gen, size, stats_py = sys.argv[1:]
spec = importlib.util.spec_from_file_location("image_stats", stats_py)
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
man = json.load(open(img + ".manifest.json"))
s = m.stats(img)
f = man["fractions"]
print(f"| {gen} | {size} | {f['zero']:.1%} / {f['random']:.1%} / {f['text']:.1%} / {f['dup']:.1%} "
      f"| {man['seconds']:.1f} s | {s['zstd1_ratio_image']:.2f} | {s['zstd1_ratio_text_chunks'] or 0:.2f} "
      f"| {s['zero_chunk_fraction']:.1%} | {s['dup_chunk_fraction']:.1%} |")
PY
    rm -f "$img" "$img.manifest.json"
  done
done
