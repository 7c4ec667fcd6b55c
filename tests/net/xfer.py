#!/usr/bin/env python3
"""One TCP transfer, or one large UDP datagram, for the network tests.

  xfer.py recv ADDR PORT          accept one connection, read to EOF, print "SHA256 BYTES"
  xfer.py send ADDR PORT FILE [MBPS]
                                  send FILE, paced to MBPS megabytes/s if given
  xfer.py dgram-recv ADDR PORT SECONDS
                                  print "SHA256 BYTES" of the first datagram to arrive
                                  within SECONDS (exit 1 if none does)
  xfer.py dgram-send ADDR PORT BYTES
                                  send one datagram of BYTES random bytes three times,
                                  0.3 s apart, and print its "SHA256 BYTES"

Both ends take ADDR literally (an inner tunnel address); nothing else is contacted.
"""
import hashlib
import os
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


def dgram_recv(addr: str, port: int, seconds: float) -> None:
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.bind((addr, port))
        s.settimeout(seconds)
        try:
            data = s.recv(1 << 16)
        except socket.timeout:
            sys.exit(f"no datagram within {seconds} s")
    print(hashlib.sha256(data).hexdigest(), len(data), flush=True)


def dgram_send(addr: str, port: int, size: int) -> None:
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    data = os.urandom(size)
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        # Copies of the same bytes: one lost to a cold path (a neighbour lookup)
        # does not fail the test, while a path that cannot carry it loses all three.
        for _ in range(3):
            s.sendto(data, (addr, port))
            time.sleep(0.3)
    print(hashlib.sha256(data).hexdigest(), len(data), flush=True)


def main() -> None:
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "recv":
        recv(args[1], int(args[2]))
    elif len(args) in (4, 5) and args[0] == "send":
        send(args[1], int(args[2]), args[3], float(args[4]) if len(args) == 5 else 0.0)
    elif len(args) == 4 and args[0] == "dgram-recv":
        dgram_recv(args[1], int(args[2]), float(args[3]))
    elif len(args) == 4 and args[0] == "dgram-send":
        dgram_send(args[1], int(args[2]), int(args[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
