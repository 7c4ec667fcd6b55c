#!/usr/bin/env python3
"""Frames a router would refuse, to check that an L2 cross-connect carries them
byte for byte.

    l2_frames.py send IFNAME          send the test frames out of IFNAME
    l2_frames.py recv IFNAME SECONDS  print (hex, one a line) every test frame
                                      that arrives on IFNAME within SECONDS
    l2_frames.py expected             print the test frames as recv would
    l2_frames.py send-sizes IFNAME MTU [STEP]
                                      send, for each size a link of MTU
                                      carries (every STEP-th payload length and
                                      the largest, with STEP; every one without),
                                      an untagged frame (EtherType 0x88b5), a
                                      VLAN 100 one and a QinQ one (802.1ad 300,
                                      then 802.1Q 100)
    l2_frames.py expected-sizes MTU [offloaded] [STEP]
                                      print those as recv would; with
                                      offloaded, the untagged ones as the
                                      sender's tc program tags them (VLAN 100)

The frames come from a locally administered address no host uses, so the
receiver tells them apart from everything else on the link: one VLAN-tagged
(VLAN 100) IPv4 packet, one of a local experimental EtherType (0x88b5), one
broadcast of another (0x88b6), and a VLAN-tagged (VLAN 200) frame of the
experimental EtherType. The kernel takes VLAN tags out of received frames;
recv puts them back from the packet socket's auxiliary data, so it prints the
frame as it was on the wire. Only 198.18.0.0/15 addresses appear.
"""
import socket
import struct
import sys
import time

SRC = bytes.fromhex("020000005e01")
DST = bytes.fromhex("020000005e02")
ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6


def frames():
    ipv4 = bytes.fromhex("4500001c000100004011") + b"\0\0" + bytes([198, 18, 5, 1, 198, 18, 5, 2])
    ipv4 += bytes.fromhex("3039003900080000")
    return [
        DST + SRC + bytes.fromhex("81000064") + b"\x08\x00" + ipv4 + bytes(18),
        DST + SRC + b"\x88\xb5" + b"linerate l2 test: experimental ethertype" + bytes(6),
        b"\xff" * 6 + SRC + b"\x88\xb6" + b"linerate l2 test: broadcast" + bytes(19),
        DST + SRC + bytes.fromhex("810000c8") + b"\x88\xb5" + bytes(range(60)),
    ]


def payload(n):
    return bytes((i * 7 + n) & 0xFF for i in range(n))


def sized(mtu, step=1):
    """Frames of every length (every `step`-th, and the largest) from the least
    (60 bytes without FCS) to what a link of `mtu` carries: untagged up to mtu +
    14, VLAN up to mtu + 18, QinQ up to mtu + 22; each payload made from its
    length, so no two are alike."""
    out = []
    lengths = list(range(46, mtu + 1, step))
    if lengths[-1] != mtu:
        lengths.append(mtu)
    for n in lengths:
        out.append(DST + SRC + b"\x88\xb5" + payload(n))
        out.append(DST + SRC + bytes.fromhex("81000064") + b"\x88\xb5" + payload(n))
        out.append(DST + SRC + bytes.fromhex("88a8012c81000064") + b"\x88\xb5" + payload(n))
    return out


def send_sizes(ifname, mtu, step):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    for i, f in enumerate(sized(mtu, step)):
        s.send(f)
        if i % 32 == 31:
            time.sleep(0.004)


def expected_sizes(mtu, offloaded, step):
    for f in sized(mtu, step):
        if offloaded and f[12:14] == b"\x88\xb5":
            f = f[:12] + bytes.fromhex("81000064") + f[12:]
        print(f.hex())


def send(ifname):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    for f in frames():
        s.send(f)
        time.sleep(0.01)


def recv(ifname, seconds):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((ifname, 0))
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    # Room for a whole burst of jumbo frames while each is printed (the default
    # holds about twenty). SO_RCVBUFFORCE: past rmem_max, as root.
    s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)
    s.settimeout(0.1)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            data, anc, _flags, addr = s.recvmsg(1 << 16, socket.CMSG_SPACE(20))
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING or data[6:12] != SRC:
            continue
        for level, kind, cdata in anc:
            if level == SOL_PACKET and kind == PACKET_AUXDATA and len(cdata) >= 20:
                status, _len, _snap, _mac, _net, tci, tpid = struct.unpack("=IIIHHHH", cdata[:20])
                if status & TP_STATUS_VLAN_VALID:
                    if not status & TP_STATUS_VLAN_TPID_VALID:
                        tpid = 0x8100
                    data = data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
        print(data.hex(), flush=True)


def main():
    if sys.argv[1:2] == ["send"]:
        send(sys.argv[2])
    elif sys.argv[1:2] == ["recv"]:
        recv(sys.argv[2], float(sys.argv[3]))
    elif sys.argv[1:2] == ["expected"]:
        for f in frames():
            print(f.hex())
    elif sys.argv[1:2] == ["send-sizes"]:
        send_sizes(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    elif sys.argv[1:2] == ["expected-sizes"]:
        rest = sys.argv[3:]
        offloaded = "offloaded" in rest
        steps = [int(a) for a in rest if a != "offloaded"]
        expected_sizes(int(sys.argv[2]), offloaded, steps[0] if steps else 1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
