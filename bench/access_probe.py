#!/usr/bin/env python3
"""Measurements for bench/access_bench.sh (issue 25: `cairn mount`, `cairn nbd`).

  access_probe.py first-byte nbd SOCKET -- CMD...   time from starting CMD until
  access_probe.py first-byte file PATH -- CMD...    the first 4 KiB of the export
                                                    (or file) can be read; prints
                                                    seconds; CMD keeps running and
                                                    its pid is printed on line 2
  access_probe.py random nbd SOCKET SIZE [--threads T] [--seconds S] [--seed N]
  access_probe.py random file PATH SIZE [...]       4 KiB reads at random 4 KiB-
                                                    aligned offsets; prints JSON
                                                    {reads, seconds, iops, bytes}

The NBD client is a minimal fixed-newstyle one written here (NBD_OPT_GO,
simple replies), so no client program's start-up is timed.
"""
import json
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPMAGIC = 0x0003E889045565A9
OPT_GO = 7
REP_ACK = 1
REQ_MAGIC = 0x25609513
SIMPLE_MAGIC = 0x67446698


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


class NbdClient:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        magic, opt, _flags = struct.unpack(">QQH", recv_exact(self.s, 18))
        if magic != NBDMAGIC or opt != IHAVEOPT:
            raise ConnectionError("not an NBD server")
        self.s.sendall(struct.pack(">I", 3))  # fixed newstyle, no zeroes
        data = struct.pack(">I", 0) + struct.pack(">H", 0)  # the default export, no info
        self.s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, len(data)) + data)
        while True:
            magic, _opt, rtype, length = struct.unpack(">QIII", recv_exact(self.s, 20))
            payload = recv_exact(self.s, length)
            if rtype == REP_ACK:
                break
            if rtype & 0x80000000:
                raise ConnectionError("option refused: %d %r" % (rtype, payload))
        self.handle = 0

    def read(self, offset, length):
        self.handle += 1
        self.s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, 0, self.handle, offset, length))
        magic, error, handle = struct.unpack(">IIQ", recv_exact(self.s, 16))
        if magic != SIMPLE_MAGIC or handle != self.handle:
            raise ConnectionError("bad reply")
        if error:
            raise OSError(error, "NBD read failed")
        return recv_exact(self.s, length)

    def close(self):
        self.s.close()


def try_first_read(kind, target):
    try:
        if kind == "nbd":
            c = NbdClient(target)
            data = c.read(0, 4096)
            c.close()
        else:
            with open(target, "rb") as f:
                data = f.read(4096)
        return len(data) == 4096
    except (OSError, ConnectionError):
        return False


def first_byte(kind, target, cmd):
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    while not try_first_read(kind, target):
        if proc.poll() is not None:
            sys.exit("%s exited with %d before the first byte" % (cmd[0], proc.returncode))
        if time.monotonic() - t0 > 60:
            sys.exit("no first byte after 60 s")
        time.sleep(0.001)
    print("%.4f" % (time.monotonic() - t0))
    print(proc.pid)
    sys.stdout.flush()
    os._exit(0)  # leave CMD running: the caller stops it


def random_reads(kind, target, size, threads, seconds, seed):
    blocks = size // 4096
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def worker(i):
        rng = random.Random(seed + i)
        if kind == "nbd":
            c = NbdClient(target)
            read = lambda off: c.read(off, 4096)
        else:
            fd = os.open(target, os.O_RDONLY)
            read = lambda off: os.pread(fd, 4096, off)
        while time.monotonic() < stop:
            if len(read(rng.randrange(blocks) * 4096)) != 4096:
                raise RuntimeError("short read")
            counts[i] += 1

    t0 = time.monotonic()
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    secs = time.monotonic() - t0
    n = sum(counts)
    print(json.dumps({"reads": n, "seconds": secs, "iops": n / secs, "bytes": n * 4096,
                      "threads": threads}))


def main(argv):
    if len(argv) >= 4 and argv[1] == "first-byte" and "--" in argv:
        sep = argv.index("--")
        first_byte(argv[2], argv[3], argv[sep + 1:])
    elif len(argv) >= 5 and argv[1] == "random":
        opts = {"--threads": 4, "--seconds": 10, "--seed": 1}
        rest = argv[5:]
        for k, v in zip(rest[::2], rest[1::2]):
            opts[k] = int(v)
        random_reads(argv[2], argv[3], int(argv[4]), opts["--threads"], opts["--seconds"],
                     opts["--seed"])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
