#!/usr/bin/env python3
"""Chunk-level statistics of benchmark disk images (Python 3 stdlib + zstd CLI).

For each image: the fraction of 4 MiB chunks that are all zero, that duplicate
an earlier chunk (excluding zero chunks), the zstd -1 ratio of the whole image
and of its "pure text" chunks (every byte printable ASCII or newline).

Usage: image_stats.py IMAGE [IMAGE ...]    (prints one JSON object per line)
"""
import hashlib
import json
import subprocess
import sys

CHUNK = 4 << 20
TEXT = bytes(range(32, 127)) + b"\n"


def zstd_size(data):
    return len(subprocess.run(["zstd", "-1", "-q", "-c"], input=data, check=True,
                              stdout=subprocess.PIPE).stdout)


def stats(path):
    chunks = zero = dup = text = 0
    text_raw = text_z = 0
    seen = set()
    zero_chunk = bytes(CHUNK)
    with open(path, "rb") as f:
        while True:
            c = f.read(CHUNK)
            if not c:
                break
            chunks += 1
            if c == zero_chunk[: len(c)]:
                zero += 1
                continue
            h = hashlib.sha256(c).digest()
            if h in seen:
                dup += 1
                continue
            seen.add(h)
            if not c.translate(None, TEXT):
                text += 1
                text_raw += len(c)
                text_z += zstd_size(c)
    whole = int(subprocess.run(f"zstd -1 -q -c '{path}' | wc -c", shell=True, check=True,
                               stdout=subprocess.PIPE).stdout)
    import os
    size = os.path.getsize(path)
    return {
        "image": path, "size": size, "chunks": chunks,
        "zero_chunk_fraction": round(zero / chunks, 4),
        "dup_chunk_fraction": round(dup / chunks, 4),
        "text_chunks": text,
        "zstd1_ratio_image": round(size / whole, 3),
        "zstd1_ratio_text_chunks": round(text_raw / text_z, 3) if text_z else None,
    }


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(json.dumps(stats(p)))
