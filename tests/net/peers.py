#!/usr/bin/env python3
"""Prints a wg(8) configuration for loading many peers: BASE (a file such as
`wg showconf`'s output) if given, then N peers with random keys and one /128
allowed IP each from 2001:2:0:8000::/64. No packet is ever sent to them.

  peers.py N [BASE]
"""
import base64
import os
import sys


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    n = int(sys.argv[1])
    if not 0 <= n <= 1 << 32:
        sys.exit("N goes from 0 to 2^32")
    out = sys.stdout
    if len(sys.argv) == 3:
        with open(sys.argv[2]) as f:
            out.write(f.read())
    for i in range(n):
        key = base64.b64encode(os.urandom(32)).decode()
        out.write(f"\n[Peer]\nPublicKey = {key}\n"
                  f"AllowedIPs = 2001:2:0:8000::{i >> 16:x}:{i & 0xffff:x}/128\n")


if __name__ == "__main__":
    main()
