#!/usr/bin/env python3
"""Counters read while traffic runs must add up: none goes backwards between two
reads, and what was sent is what was counted.

  counters.py recv ADDR PORT K SECONDS
      count UDP datagrams on ADDR:PORT until K arrived, SECONDS passed, or 2 s
      went by without one; print the count
  counters.py send-watch SOCK ADDR PORT K RATE
      send K datagrams of 200 bytes to ADDR:PORT at RATE per second, reading
      linerate's counters from the UAPI socket SOCK every 50 ms; print
      "sent N reads R ahead A" (A: the most wg-encrypt.packets ever ran ahead
      of the datagrams sent so far); exit 1, listing what it saw, if any
      counter went backwards or vanished, or wg-encrypt.packets ran more than
      ALLOWANCE ahead of the datagrams sent

Every counter linerate lists is a running count (calls, packets, clocks,
drops), so each must be non-decreasing between two reads: a read that shows
one smaller than before saw a half-written value. The sender is this one
thread, so at each read the number sent so far is exact.
"""
import socket
import sys
import time

READ_EVERY = 0.05
# A keepalive or a handshake message may be counted beside the datagrams: a
# little slack, but never a datagram not yet sent.
ALLOWANCE = 3
ENCRYPT = "wg-encrypt.packets"


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
    # A reply cut short would look like counters gone missing: say so instead.
    if not reply.endswith(b"errno=0\n\n"):
        sys.exit(f"counters request: incomplete or failed reply {reply[-40:]!r}")
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


def check(last: dict[str, int], cur: dict[str, int], base: int, sent: int, bad: list[str]) -> int:
    """Appends to bad what is wrong between two reads; returns how far
    wg-encrypt.packets is ahead of the datagrams sent so far."""
    for k, v in last.items():
        if k not in cur:
            bad.append(f"{k}: {v} then missing")
        elif cur[k] < v:
            bad.append(f"{k}: {v} then {cur[k]}")
    if ENCRYPT not in cur:
        return 0
    ahead = cur[ENCRYPT] - base - sent
    if ahead > ALLOWANCE:
        bad.append(f"{ENCRYPT}: {cur[ENCRYPT] - base} counted after {sent} sent")
    return ahead


def send_watch(sock: str, addr: str, port: int, count: int, rate: float) -> None:
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    payload = bytes(200)
    last = counters(sock)
    if ENCRYPT not in last:
        sys.exit(f"no {ENCRYPT} counter in the first read")
    base = last[ENCRYPT]
    bad: list[str] = []
    reads, most_ahead = 1, 0
    start = time.monotonic()
    next_read = start + READ_EVERY
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        # Bounded by COUNT sends; each read is bounded by the socket timeout.
        for i in range(count):
            due = start + i / rate
            while True:
                now = time.monotonic()
                if now >= next_read:
                    cur = counters(sock)
                    reads += 1
                    most_ahead = max(most_ahead, check(last, cur, base, i, bad))
                    last = cur
                    next_read = now + READ_EVERY
                if now >= due:
                    break
                time.sleep(min(due, next_read) - now)
            s.sendto(payload, (addr, port))
    print(f"sent {count} reads {reads} ahead {most_ahead}")
    if bad:
        print(f"{len(bad)} bad reads: " + "; ".join(bad[:10]), file=sys.stderr)
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
