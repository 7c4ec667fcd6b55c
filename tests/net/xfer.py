#!/usr/bin/env python3
"""One TCP transfer for the network tests.

  xfer.py recv ADDR PORT          accept one connection, read to EOF, print "SHA256 BYTES"
  xfer.py send ADDR PORT FILE [MBPS]
                                  send FILE, paced to MBPS megabytes/s if given

Both ends take ADDR literally (an inner tunnel address); nothing else is contacted.
"""
import hashlib
import socket
import sys
import time

CHUNK = 1 << 20


def recv(addr: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((addr, port))
        srv.listen(1)
        conn, _ = srv.accept()
        digest, total = hashlib.sha256(), 0
        with conn:
            while True:
                data = conn.recv(CHUNK)
                if not data:
                    break
                digest.update(data)
                total += len(data)
    print(digest.hexdigest(), total, flush=True)


def send(addr: str, port: int, path: str, mbps: float) -> None:
    with open(path, "rb") as f, socket.create_connection((addr, port), timeout=30) as conn:
        conn.settimeout(60)
        start, sent = time.monotonic(), 0
        while True:
            data = f.read(CHUNK)
            if not data:
                break
            conn.sendall(data)
            sent += len(data)
            if mbps > 0:
                ahead = sent / (mbps * 1e6) - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)  # wait for the receiver to close: everything arrived


def main() -> None:
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "recv":
        recv(args[1], int(args[2]))
    elif len(args) in (4, 5) and args[0] == "send":
        send(args[1], int(args[2]), args[3], float(args[4]) if len(args) == 5 else 0.0)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
