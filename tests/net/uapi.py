#!/usr/bin/env python3
"""Raw UAPI (cross-platform userspace API) clients for the network tests.

  uapi.py ask SOCK                 send stdin as one request, print the reply
                                   (exit 0: complete reply, 3: closed first, 4: timed out)
  uapi.py idle SOCK SECONDS        connect, say "connected", send nothing, hold SECONDS
  uapi.py timed-get SOCK           one get=1; print "SECONDS ERRNO"
  uapi.py hold-udp PORT SECONDS    keep UDP PORT bound (IPv4 and IPv6), say "bound"
  uapi.py errno-compare REF TEST PORT REF_NAME TEST_NAME
                                   the same malformed requests to both sockets (PORT is
                                   a UDP port this process keeps busy); print a table,
                                   exit 1 if TEST answers any errno differently

Every read is bounded by a timeout: a server that never answers is reported, not
waited for. Nothing but the named Unix sockets and a local UDP bind is touched.
"""
import socket
import sys
import time

TIMEOUT = 3.0

# Any valid 32-byte key in hex: the peer it names need not exist anywhere.
KEY = "58" * 32


def ask(path: str, request: bytes, timeout: float = TIMEOUT) -> tuple[str, bytes]:
    """Sends one request; returns (outcome, reply bytes). The outcome is "reply"
    (ended by a blank line), "closed" (EOF first) or "timeout"."""
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(request)
        reply = b""
        while True:
            if reply.endswith(b"\n\n") or reply == b"\n":
                return "reply", reply
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout", reply
            s.settimeout(left)
            try:
                data = s.recv(65536)
            except socket.timeout:
                return "timeout", reply
            except ConnectionResetError:
                return "closed", reply
            if not data:
                return "closed", reply
            reply += data


def errno_of(outcome: str, reply: bytes) -> str:
    """The errno line's value, or what happened instead: "closed", "timeout"."""
    for line in reply.split(b"\n"):
        if line.startswith(b"errno="):
            return line.decode("ascii", "replace")
    return outcome if outcome != "reply" else "no errno line"


def bind_busy(port: int) -> socket.socket:
    """One dual-stack socket holds the port for IPv4 and IPv6 binds alike."""
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", port))
    return s


def errno_compare(ref: str, test: str, busy: int, names: tuple[str, str]) -> int:
    requests = [
        (b"set=1\nprivate_key=zz\n\n", "private key not hex"),
        (b"set=1\nlisten_port=99999\n\n", "listen port out of range"),
        (b"set=1\nlisten_port=%d\n\n" % busy, "listen port in use"),
        (b"set=1\nendpoint=198.18.0.9:5\n\n", "endpoint before any public_key"),
        (b"set=1\nbogus=1\n\n", "unknown key"),
        (b"set=1\nnoequals\n\n", "line without '='"),
        (b"set=1\npublic_key=abcd\n\n", "public key too short"),
        (b"set=1\npublic_key=%s\nallowed_ip=300.1.1.1/32\n\n" % KEY.encode(), "allowed_ip not an address"),
        (b"set=1\npublic_key=%s\nallowed_ip=198.18.0.0/33\n\n" % KEY.encode(), "allowed_ip prefix too long"),
        (b"set=1\npublic_key=%s\npersistent_keepalive_interval=70000\n\n" % KEY.encode(), "keepalive out of range"),
        (b"set=1\npublic_key=%s\nprotocol_version=2\n\n" % KEY.encode(), "unknown protocol version"),
        (b"set=1\nprivate_key=\xff\xfe\n\n", "non-UTF-8 bytes"),
        (b"get=1\nextra=1\n\n", "get=1 with an extra line"),
        (b"frob=1\n\n", "unknown operation"),
        # Well-formed ones: both must say errno=0.
        (b"set=1\nprivate_key=%s\n\n" % KEY.encode(), "valid private key"),
        (b"get=1\n\n", "valid get"),
    ]
    rows, bad = [], 0
    for req, what in requests:
        r_out, r_rep = ask(ref, req)
        t_out, t_rep = ask(test, req)
        r, t = errno_of(r_out, r_rep), errno_of(t_out, t_rep)
        if r.startswith("errno="):
            ok = t == r
        else:
            # The reference closes without a reply: only require no hang.
            ok = t != "timeout"
        bad += not ok
        rows.append((what, r, t, "ok" if ok else "MISMATCH"))
    w = max(len(r[0]) for r in rows)
    print(f"    {'request':<{w}}  {names[0]:<14}  {names[1]:<14}")
    for what, r, t, verdict in rows:
        print(f"    {what:<{w}}  {r:<14}  {t:<14}  {verdict}")
    return 1 if bad else 0


def main() -> None:
    a = sys.argv[1:]
    if len(a) == 2 and a[0] == "ask":
        outcome, reply = ask(a[1], sys.stdin.buffer.read())
        sys.stdout.buffer.write(reply)
        sys.exit({"reply": 0, "closed": 3, "timeout": 4}[outcome])
    elif len(a) == 3 and a[0] == "idle":
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(a[1])
            print("connected", flush=True)
            time.sleep(float(a[2]))
    elif len(a) == 2 and a[0] == "timed-get":
        t0 = time.monotonic()
        outcome, reply = ask(a[1], b"get=1\n\n")
        print(f"{time.monotonic() - t0:.3f} {errno_of(outcome, reply)}")
    elif len(a) == 3 and a[0] == "hold-udp":
        with bind_busy(int(a[1])):
            print("bound", flush=True)
            time.sleep(float(a[2]))
    elif len(a) == 6 and a[0] == "errno-compare":
        with bind_busy(int(a[3])):
            sys.exit(errno_compare(a[1], a[2], int(a[3]), (a[4], a[5])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
