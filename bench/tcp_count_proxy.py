#!/usr/bin/env python3
"""A TCP relay that counts the bytes it carries: what a client and a server
say to each other on the wire above TCP (TLS records and handshakes, HTTP
headers and bodies, every connection), without the TCP/IP headers.

    python3 bench/tcp_count_proxy.py --to 127.0.0.1:PORT --port-file F --out OUT

Listens on 127.0.0.1 (a free port, written to F once listening) and relays
every connection to --to. On SIGUSR1 it writes OUT as JSON
{"connections": N, "to_server": BYTES, "to_client": BYTES} (the totals so
far: take the difference of two for one command); on SIGTERM (or SIGINT) it
writes OUT and exits. Either first waits (up to 5 s) for the connections
still open to drain.
bench/sync_bench.sh measures an incremental pull's wire bytes with it.
"""
import argparse
import json
import os
import signal
import socket
import sys
import threading
import time

lock = threading.Lock()
totals = {"connections": 0, "to_server": 0, "to_client": 0}
pumps = []


def pump(src, dst, key):
    try:
        while True:
            data = src.recv(1 << 16)
            if not data:
                break
            dst.sendall(data)
            with lock:
                totals[key] += len(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--to", required=True, help="HOST:PORT of the server")
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    host, port = args.to.rsplit(":", 1)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)

    def write_totals(signum=None, frame=None):
        # Between two commands no connection is open: let the pumps of the
        # last one count their final bytes first.
        deadline = time.monotonic() + 5
        for t in list(pumps):
            t.join(max(0.0, deadline - time.monotonic()))
        with lock:
            with open(args.out + ".tmp", "w") as f:
                json.dump(totals, f)
        os.replace(args.out + ".tmp", args.out)

    def finish(signum, frame):
        write_totals()
        sys.exit(0)

    signal.signal(signal.SIGUSR1, write_totals)
    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    with open(args.port_file, "w") as f:
        f.write(f"{listener.getsockname()[1]}\n")
    while True:
        client, _ = listener.accept()
        server = socket.create_connection((host, int(port)))
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with lock:
            totals["connections"] += 1
        for src, dst, key in ((client, server, "to_server"), (server, client, "to_client")):
            t = threading.Thread(target=pump, args=(src, dst, key), daemon=True)
            t.start()
            pumps.append(t)


if __name__ == "__main__":
    main()
