#!/usr/bin/python3
"""Known answers for the engines' AES-CBC with HMAC, made by an independent
implementation (the `cryptography` package, OpenSSL underneath).

Each case is what ESP (RFC 4303) computes for one packet with AES-CBC (RFC 3602)
and HMAC-SHA1-96 (RFC 2404) or HMAC-SHA-256-128 (RFC 4868): the plaintext (already
padded to whole blocks) encrypted with the IV, and the ICV, the HMAC truncated to
12 or 16 bytes, over the 8-byte ESP header, the IV, the ciphertext and, with
extended sequence numbers, the 4 high bytes of the sequence number after it.

Writes one line per case, fields separated by spaces, all hex but the first, "-"
for an absent ESN:

    algorithm key iv header esn plaintext ciphertext icv

where key is the cipher key followed by the MAC key, as the engines register it.

    cbc_hmac_vectors.py [OUT]

The seed is fixed: the output is the same every run, and the committed data file
(crates/crypto/tests/data/cbc_hmac.txt) is this script's output.
"""
import random
import sys

from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

SEED = 3602

ALGS = [
    # name, cipher key bytes, hash, MAC key bytes, ICV bytes
    ("aes-128-cbc-hmac-sha1", 16, hashes.SHA1, 20, 12),
    ("aes-256-cbc-hmac-sha1", 32, hashes.SHA1, 20, 12),
    ("aes-128-cbc-hmac-sha256", 16, hashes.SHA256, 32, 16),
    ("aes-256-cbc-hmac-sha256", 32, hashes.SHA256, 32, 16),
]

# (plaintext length, with ESN): one block to a full Ethernet-MTU packet.
CASES = [(n, False) for n in (16, 32, 64, 128, 576, 1024, 1504)] + [
    (n, True) for n in (16, 80, 1456)
]


def case(rng, alg, length, esn):
    name, cipher_len, hash_alg, mac_len, icv_len = alg

    def take(n):
        return bytes(rng.getrandbits(8) for _ in range(n))

    cipher_key, mac_key = take(cipher_len), take(mac_len)
    iv, header = take(16), take(8)
    high = take(4) if esn else b""
    plain = take(length)
    enc = Cipher(algorithms.AES(cipher_key), modes.CBC(iv)).encryptor()
    cipher = enc.update(plain) + enc.finalize()
    mac = hmac.HMAC(mac_key, hash_alg())
    mac.update(header + iv + cipher + high)
    icv = mac.finalize()[:icv_len]
    fields = [name, cipher_key + mac_key, iv, header, high, plain, cipher, icv]
    return " ".join(f if isinstance(f, str) else (f.hex() or "-") for f in fields)


def main():
    rng = random.Random(SEED)
    lines = [
        "# AES-CBC with HMAC as ESP computes it, made by tests/crypto/cbc_hmac_vectors.py",
        "# (Python's cryptography package) with seed %d." % SEED,
        "# algorithm key(cipher|mac) iv header esn-high plaintext ciphertext icv",
    ]
    for alg in ALGS:
        for length, esn in CASES:
            lines.append(case(rng, alg, length, esn))
    text = "\n".join(lines) + "\n"
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
