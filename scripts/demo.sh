#!/usr/bin/env bash
# The demo: installs dependencies, builds cairn, generates a VM-like disk
# image, backs it up twice into a local datastore (the second run stores only
# what changed), restores it, compares it byte for byte, verifies the store
# and prints the speeds.
#
#   bash scripts/demo.sh [--size 1G] [--dir /var/tmp/cairn-demo]
set -euo pipefail
cd "$(dirname "$0")/.."

size=1G
dir=/var/tmp/cairn-demo
while (($#)); do
  case "$1" in
    --size) size=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    *) echo "usage: $0 [--size 1G] [--dir DIR]" >&2; exit 2 ;;
  esac
done

bash scripts/setup-deps.sh
cmake --preset release >/dev/null
cmake --build build/release --target cairn cairn-gendata
cairn=build/release/src/cairn
gen=build/release/bench/cairn-gendata

rm -rf "$dir"
mkdir -p "$dir"
store="$dir/store"
image="$dir/vm100-disk0.raw"
echo "== generating a $size VM-like disk image (zeros, random, text, duplicates)"
"$gen" image "$image" --size "$size" --seed 1 >/dev/null
printf 'cores: 2\nmemory: 4096\nnet0: virtio,bridge=vmbr0\n' >"$dir/vm100.conf"

echo "== cairn init"
"$cairn" init "$store"
echo "== first backup"
"$cairn" backup -r "$store" --id vm/100 disk0.img="$image" vm.conf.blob="$dir/vm100.conf"
echo "== change 10 MiB of the image, back up again (only changed chunks are stored)"
dd if=/dev/urandom of="$image" bs=1M count=10 seek=100 conv=notrunc status=none
"$cairn" backup -r "$store" --id vm/100 disk0.img="$image" vm.conf.blob="$dir/vm100.conf"
echo "== snapshots"
"$cairn" snapshots -r "$store"
echo "== rehearse a restore: fetch and check everything, write nothing"
"$cairn" restore -r "$store" vm/100/latest disk0.img --rehearse
echo "== restore the whole latest snapshot at once (every archive, one pipeline)"
rm -rf "$dir/restored"
"$cairn" restore -r "$store" vm/100/latest --all "$dir/restored"
cmp "$image" "$dir/restored/disk0.img" && echo "restored image is byte-identical to the source"
cmp "$dir/vm100.conf" "$dir/restored/vm.conf" && echo "restored config is byte-identical to the source"
echo "== damage 2 MiB of the restored copy, then restore in place (only differing chunks move)"
dd if=/dev/urandom of="$dir/restored/disk0.img" bs=1M count=2 seek=300 conv=notrunc status=none
"$cairn" restore -r "$store" vm/100/latest disk0.img "$dir/restored/disk0.img" --in-place
cmp "$image" "$dir/restored/disk0.img" && echo "repaired image is byte-identical to the source"
echo "== verify the whole datastore"
"$cairn" verify -r "$store"
"$cairn" snapshots -r "$store"
echo "== done; files are in $dir (remove with: rm -rf $dir)"
