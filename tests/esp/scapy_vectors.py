#!/usr/bin/python3
"""ESP known answers made by an independent implementation (scapy's ESP).

Writes one line per case: algorithm, esn (0/1), SPI, full 64-bit sequence number,
key material (key then salt; for CBC the cipher key then the HMAC key), the inner
IP packet, and the ESP packet scapy seals it into (SPI onward, no outer header),
all hex but the first. For the AEADs the explicit IV is the sequence number, as
linerate sends it, so the ESP bytes are what linerate must produce exactly, and
what it must open; for CBC the IV is random (as linerate's is), so linerate must
open scapy's packets, and scapy must open linerate's (`check`).

    scapy_vectors.py OUT [SEED]     make the cases (scapy 2.6.1 or later: 2.5 leaves
                                    the ESN out of the HMAC)
    scapy_vectors.py check FILE     open each line's ESP packet (linerate's) with
                                    scapy and compare it with the line's inner packet

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
    # linerate's name: (scapy's cipher, key bytes, scapy's MAC, MAC key bytes)
    "aes128gcm16": ("AES-GCM", 16, None, 0),
    "aes256gcm16": ("AES-GCM", 32, None, 0),
    "chacha20poly1305": ("CHACHA20-POLY1305", 32, None, 0),
    "aes128-sha1": ("AES-CBC", 16, "HMAC-SHA1-96", 20),
    "aes256-sha1": ("AES-CBC", 32, "HMAC-SHA1-96", 20),
    "aes128-sha256": ("AES-CBC", 16, "SHA2-256-128", 32),
    "aes256-sha256": ("AES-CBC", 32, "SHA2-256-128", 32),
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


def security_association(alg, keymat, spi, seq, esn, version):
    cipher, key_len, mac, _ = ALGS[alg]
    header = IP(src="198.18.2.1", dst="198.18.2.2") if version == 4 else IPv6(
        src="2001:2:0:2::1", dst="2001:2:0:2::2"
    )
    extra = {}
    if mac is not None:
        extra = {"auth_algo": mac, "auth_key": keymat[key_len:]}
        keymat = keymat[:key_len]
    return SecurityAssociation(
        ESP,
        spi=spi,
        crypt_algo=cipher,
        crypt_key=keymat,
        tunnel_header=header,
        esn_en=esn,
        esn=seq >> 32,
        **extra,
    )


def seal(alg, keymat, spi, seq, esn, packet, rng):
    sa = security_association(alg, keymat, spi, seq, esn, packet.version)
    # scapy treats a sequence number of 0 as "use the SA's": set the SA's instead.
    sa.seq_num = seq & 0xFFFFFFFF
    if ALGS[alg][2] is None:
        iv = seq.to_bytes(8, "big")
    else:
        iv = bytes(rng.getrandbits(8) for _ in range(16))
    out = sa.encrypt(packet, iv=iv)
    esp = bytes(out[ESP])
    # Round trip through scapy's own decryption, as a check on the case itself.
    back = sa.decrypt(out.__class__(bytes(out)))
    assert bytes(back) == bytes(packet), "scapy does not open its own packet"
    return esp


def cases(rng):
    for alg, (_, key_len, _, mac_len) in ALGS.items():
        for esn in (False, True):
            seqs = [1, rng.randrange(2, 1 << 31), (1 << 32) - 1]
            if esn:
                seqs += [1 << 32, (1 << 32) + 1, (5 << 32) + rng.randrange(0, 1 << 32)]
            for i, seq in enumerate(seqs):
                for family in (4, 6):
                    size = [0, 1, 2, 3, 13, 100, 1000][(i + family) % 7]
                    salt = 4 if mac_len == 0 else 0
                    keymat = bytes(rng.getrandbits(8) for _ in range(key_len + salt + mac_len))
                    spi = rng.randrange(256, 1 << 32)
                    yield alg, esn, spi, seq, keymat, inner(family, size, rng)


def check(path):
    """Opens each line's ESP packet with scapy; the inner packet must match."""
    n = 0
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        alg, esn, spi, seq, keymat, inner, esp = line.split()
        inner, esp = bytes.fromhex(inner), bytes.fromhex(esp)
        version = inner[0] >> 4
        sa = security_association(alg, bytes.fromhex(keymat), int(spi), int(seq), esn == "1", version)
        outer = (IP(src="198.18.2.1", dst="198.18.2.2", proto=50) if version == 4 else
                 IPv6(src="2001:2:0:2::1", dst="2001:2:0:2::2", nh=50)) / Raw(esp)
        outer = outer.__class__(bytes(outer))
        got = bytes(sa.decrypt(outer))
        if got != inner:
            sys.exit(f"scapy_vectors check: {alg} esn {esn} seq {seq}: opened to {got.hex()}, "
                     f"expected {inner.hex()}")
        n += 1
    if n == 0:
        sys.exit(f"scapy_vectors check: {path} holds no case")
    print(f"scapy_vectors check: scapy opened all {n} of linerate's packets")


def main():
    if sys.argv[1] == "check":
        check(sys.argv[2])
        return
    out = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else int.from_bytes(os.urandom(8), "big")
    rng = random.Random(seed)
    lines = [f"# scapy ESP known answers, seed {seed}"]
    for alg, esn, spi, seq, keymat, packet in cases(rng):
        esp = seal(alg, keymat, spi, seq, esn, packet, rng)
        lines.append(
            f"{alg} {int(esn)} {spi} {seq} {keymat.hex()} {bytes(packet).hex()} {esp.hex()}"
        )
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"scapy_vectors: {len(lines) - 1} cases, seed {seed} -> {out}")


if __name__ == "__main__":
    main()
