#!/usr/bin/env python3
"""Sends malformed and unwelcome frames to a gateway port, from a LAN host.

    bad_frames.py IFNAME GATEWAY_MAC GATEWAY_IP4 HOST_IP4

Every frame goes to the gateway's MAC (or broadcast, for ARP) and uses only
the addresses given (198.18.0.0/15 in the tests). Counts are fixed, so the
test knows what to expect: a frame that ends after its Ethernet header (the
kernel pads shorter ones to a header), an unknown EtherType, an IPv4 header
with a bad checksum, one whose total length runs past the frame, one whose
header length is under 20 bytes, packets to forward with TTL 0 and 1, an ICMP
error about an ICMP error (TTL 1, so the gateway would answer it), and a
bounded storm of 2,000 ARP requests for an address that is not the gateway's,
sent in bursts of 50.
"""
import socket
import struct
import sys
import time


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4(src: bytes, dst: bytes, proto: int, payload: bytes, ttl=64, ihl=5,
         total=None, good_sum=True) -> bytes:
    total = 20 + len(payload) if total is None else total
    h = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, total, 1, 0, ttl, proto, 0, src, dst)
    s = checksum(h)
    if not good_sum:
        s ^= 0x5555
    return h[:10] + struct.pack("!H", s) + h[12:] + payload


def main() -> None:
    ifname, gw_mac, gw_ip, host_ip = sys.argv[1:5]
    gw_mac = bytes.fromhex(gw_mac.replace(":", ""))
    gw_ip, host_ip = socket.inet_aton(gw_ip), socket.inet_aton(host_ip)
    far = socket.inet_aton("198.19.3.10")
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    me = s.getsockname()[4]

    def eth(kind: int, payload: bytes, dst: bytes = gw_mac) -> bytes:
        return dst + me + struct.pack("!H", kind) + payload

    udp = struct.pack("!HHHH", 4000, 4001, 12, 0) + b"abcd"
    frames = [
        eth(0x0800, b""),  # IPv4 that ends with the Ethernet header
        eth(0x88B5, b"local experimental"),  # an EtherType nobody routes
        eth(0x0800, ipv4(host_ip, far, 17, udp, good_sum=False)),
        eth(0x0800, ipv4(host_ip, far, 17, udp, total=400)),
        eth(0x0800, ipv4(host_ip, far, 17, udp, ihl=4)),
        eth(0x0800, ipv4(host_ip, far, 17, udp, ttl=0)),
        eth(0x0800, ipv4(host_ip, far, 17, udp, ttl=1)),
    ]
    # Destination unreachable quoting a UDP packet, itself with TTL 1.
    quoted = ipv4(far, host_ip, 17, udp)[:28]
    unreach = struct.pack("!BBHI", 3, 1, 0, 0) + quoted
    unreach = unreach[:2] + struct.pack("!H", checksum(unreach)) + unreach[4:]
    frames.append(eth(0x0800, ipv4(host_ip, far, 1, unreach, ttl=1)))
    other = socket.inet_aton("198.19.1.200")
    for i in range(2000):
        arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, me, host_ip, b"\0" * 6, other)
        frames.append(eth(0x0806, arp, dst=b"\xff" * 6))
    # In bursts of 50 with a breath between: the storm is about what the gateway
    # does with ARP it should not answer, not about the veth ring's depth (frames
    # lost before the gateway sees them would not be counted anywhere of ours).
    for i, f in enumerate(frames):
        s.send(f)
        if i % 50 == 49:
            time.sleep(0.002)
    print(f"sent {len(frames)} frames")


if __name__ == "__main__":
    main()
