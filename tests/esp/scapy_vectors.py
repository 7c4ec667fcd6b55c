#!/usr/bin/python3
"""ESP known answers made by an independent implementation (scapy's ESP).

Writes one line per case: algorithm, esn (0/1), SPI, full 64-bit sequence number,
key material (key then salt), the inner IP packet, and the ESP packet scapy seals
it into (SPI onward, no outer header), all hex but the first. The explicit IV is
the sequence number, as linerate sends it, so the ESP bytes are what linerate must
produce exactly, and what it must open.

    scapy_vectors.py OUT [SEED]

Without SEED the cases are random (fresh keys each run); with one they repeat.
"""
import os
import random
import sys

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.ipsec import ESP, SecurityAssociation
from scapy.packet import Raw

ALGS = {
    # linerate's name: (scapy's name, key bytes)
    "aes128gcm16": ("AES-GCM", 16),
    "aes256gcm16": ("AES-GCM", 32),
    "chacha20poly1305": ("CHACHA20-POLY1305", 32),
}


def inner(family, size, rng):
    payload = bytes(rng.getrandbits(8) for _ in range(size))
    if family == 4:
        p = IP(src="198.19.1.10", dst="198.19.3.10", ttl=64, id=rng.getrandbits(16)) / UDP(
            sport=40000, dport=5201
        ) / Raw(payload)
    else:
        p = IPv6(src="2001:2:0:1::10", dst="2001:2:0:3::10", hlim=64) / UDP(
            sport=40000, dport=5201
        ) / Raw(payload)
    return p.__class__(bytes(p))


def seal(alg, keymat, spi, seq, esn, packet):
    name, _ = ALGS[alg]
    high, low = seq >> 32, seq & 0xFFFFFFFF
    header = IP(src="198.18.2.1", dst="198.18.2.2") if packet.version == 4 else IPv6(
        src="2001:2:0:2::1", dst="2001:2:0:2::2"
    )
    sa = SecurityAssociation(
        ESP,
        spi=spi,
        crypt_algo=name,
        crypt_key=keymat,
        tunnel_header=header,
        esn_en=esn,
        esn=high,
    )
    # scapy treats a sequence number of 0 as "use the SA's": set the SA's instead.
    sa.seq_num = low
    out = sa.encrypt(packet, iv=seq.to_bytes(8, "big"))
    esp = bytes(out[ESP])
    # Round trip through scapy's own decryption, as a check on the case itself.
    back = sa.decrypt(out.__class__(bytes(out)))
    assert bytes(back) == bytes(packet), "scapy does not open its own packet"
    return esp


def cases(rng):
    for alg, (_, key_len) in ALGS.items():
        for esn in (False, True):
            seqs = [1, rng.randrange(2, 1 << 31), (1 << 32) - 1]
            if esn:
                seqs += [1 << 32, (1 << 32) + 1, (5 << 32) + rng.randrange(0, 1 << 32)]
            for i, seq in enumerate(seqs):
                for family in (4, 6):
                    size = [0, 1, 2, 3, 13, 100, 1000][(i + family) % 7]
                    keymat = bytes(rng.getrandbits(8) for _ in range(key_len + 4))
                    spi = rng.randrange(256, 1 << 32)
                    yield alg, esn, spi, seq, keymat, inner(family, size, rng)


def main():
    out = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else int.from_bytes(os.urandom(8), "big")
    rng = random.Random(seed)
    lines = [f"# scapy ESP known answers, seed {seed}"]
    for alg, esn, spi, seq, keymat, packet in cases(rng):
        esp = seal(alg, keymat, spi, seq, esn, packet)
        lines.append(
            f"{alg} {int(esn)} {spi} {seq} {keymat.hex()} {bytes(packet).hex()} {esp.hex()}"
        )
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"scapy_vectors: {len(lines) - 1} cases, seed {seed} -> {out}")


if __name__ == "__main__":
    main()
