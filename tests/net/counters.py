#!/usr/bin/env python3
"""Counters read while traffic runs must add up: none goes backwards between two
reads, and what was sent is what was counted.

  counters.py recv ADDR PORT K SECONDS
      count UDP datagrams on ADDR:PORT until K arrived, SECONDS passed, or 2 s
      went by without one; print the count
  counters.py send-watch SOCK ADDR PORT K RATE
      send K datagrams of 200 bytes to ADDR:PORT at RATE per second, reading
      linerate's counters from the UAPI socket SOCK every 50 ms; print
      "sent N reads R"; exit 1 (listing them) if any counter went backwards
"""
import socket
import sys
import time

READ_EVERY = 0.05


def counters(path: str) -> dict[str, int]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(3.0)
        s.connect(path)
        s.sendall(b"linerate-counters=1\n\n")
        reply = b""
        while not reply.endswith(b"\n\n"):
            data = s.recv(65536)
            if not data:
                break
            reply += data
    out = {}
    for line in reply.decode().splitlines():
        k, _, v = line.partition("=")
        if k != "errno" and v.isdigit():
            out[k] = int(v)
    return out


def recv(addr: str, port: int, want: int, seconds: float) -> None:
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.bind((addr, port))
        s.settimeout(2.0)
        end = time.monotonic() + seconds
        got = 0
        while got < want and time.monotonic() < end:
            try:
                s.recv(65536)
            except socket.timeout:
                if got:
                    break
                continue
            got += 1
    print(got)


def send_watch(sock: str, addr: str, port: int, count: int, rate: float) -> None:
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    payload = bytes(200)
    last = counters(sock)
    regressions = []
    reads = 1
    start = time.monotonic()
    next_read = start + READ_EVERY
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        for i in range(count):
            due = start + i / rate
            while True:
                now = time.monotonic()
                if now >= next_read:
                    cur = counters(sock)
                    reads += 1
                    for k, v in cur.items():
                        if v < last.get(k, 0):
                            regressions.append(f"{k}: {last[k]} then {v}")
                    last = cur
                    next_read = now + READ_EVERY
                if now >= due:
                    break
                time.sleep(min(due, next_read) - now)
            s.sendto(payload, (addr, port))
    print(f"sent {count} reads {reads}")
    if regressions:
        print("went backwards: " + "; ".join(regressions[:10]), file=sys.stderr)
        sys.exit(1)


def main() -> None:
    a = sys.argv[1:]
    if len(a) == 5 and a[0] == "recv":
        recv(a[1], int(a[2]), int(a[3]), float(a[4]))
    elif len(a) == 6 and a[0] == "send-watch":
        send_watch(a[1], a[2], int(a[3]), int(a[4]), float(a[5]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
