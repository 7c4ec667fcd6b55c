#!/usr/bin/env python3
"""One TCP transfer, or one large UDP datagram, for the network tests.

  xfer.py recv ADDR PORT          accept one connection, read to EOF, print "SHA256 BYTES"
  xfer.py send ADDR PORT FILE [MBPS]
                                  send FILE, paced to MBPS megabytes/s if given
  xfer.py dgram-recv ADDR PORT SECONDS [IFACE]
                                  print "SHA256 BYTES" of the first datagram to arrive
                                  within SECONDS (exit 1 if none does); with IFACE,
                                  then " IPLEN FRAGMENTS": the length of the IP packet
                                  that carried it as IFACE saw it, and how many IP
                                  fragments of UDP IFACE saw meanwhile
  xfer.py dgram-send ADDR PORT BYTES [df]
                                  send one datagram of BYTES random bytes three times,
                                  0.3 s apart, and print its "SHA256 BYTES"; with df,
                                  the sender's stack may not fragment it (IPv4: DF set)

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


ETH_P_ALL = 0x0003


def udp_packet_info(pkt: bytes, port: int):
    """(IP length, is a fragment of UDP, is the whole datagram to `port`) of an IP
    packet as a layer-3 interface hands it over."""
    if len(pkt) >= 20 and pkt[0] >> 4 == 4:
        if pkt[9] != 17:
            return None
        frag = int.from_bytes(pkt[6:8], "big")
        total = int.from_bytes(pkt[2:4], "big")
        fragment = (frag & 0x2000) != 0 or (frag & 0x1FFF) != 0
        ihl = (pkt[0] & 15) * 4
        dport = int.from_bytes(pkt[ihl + 2:ihl + 4], "big") if len(pkt) >= ihl + 4 else -1
        return total, fragment, not fragment and dport == port
    if len(pkt) >= 48 and pkt[0] >> 4 == 6:
        total = 40 + int.from_bytes(pkt[4:6], "big")
        if pkt[6] == 44:  # a fragment header
            return total, pkt[40] == 17, False
        if pkt[6] != 17:
            return None
        return total, False, int.from_bytes(pkt[42:44], "big") == port
    return None


def dgram_recv(addr: str, port: int, seconds: float, iface: str = "") -> None:
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    watch = None
    if iface:
        # Bound before the datagram socket: nothing to the port passes unseen.
        watch = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
        watch.bind((iface, 0))
        watch.setblocking(False)
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.bind((addr, port))
        s.settimeout(seconds)
        try:
            data = s.recv(1 << 16)
        except socket.timeout:
            sys.exit(f"no datagram within {seconds} s")
    line = f"{hashlib.sha256(data).hexdigest()} {len(data)}"
    if watch is not None:
        iplen, fragments = 0, 0
        while True:
            try:
                pkt = watch.recv(1 << 16)
            except BlockingIOError:
                break
            info = udp_packet_info(pkt, port)
            if info is None:
                continue
            fragments += info[1]
            if info[2] and not iplen:
                iplen = info[0]
        watch.close()
        line += f" {iplen} {fragments}"
    print(line, flush=True)


def dgram_send(addr: str, port: int, size: int, df: bool = False) -> None:
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    data = os.urandom(size)
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        if df and family == socket.AF_INET:
            # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF set, never fragmented here.
            s.setsockopt(socket.IPPROTO_IP, 10, 2)
        elif df:
            # IPV6_MTU_DISCOVER = IPV6_PMTUDISC_DO.
            s.setsockopt(socket.IPPROTO_IPV6, 23, 2)
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
    elif len(args) in (4, 5) and args[0] == "dgram-recv":
        dgram_recv(args[1], int(args[2]), float(args[3]), args[4] if len(args) == 5 else "")
    elif len(args) == 4 and args[0] == "dgram-send":
        dgram_send(args[1], int(args[2]), int(args[3]))
    elif len(args) == 5 and args[0] == "dgram-send" and args[4] == "df":
        dgram_send(args[1], int(args[2]), int(args[3]), df=True)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
