#!/usr/bin/env python3
"""What a service manager sees of a daemon, for tests/net/gateway.sh service.

  service_manager.py listen SOCKET OUT SECONDS
      binds a datagram socket at SOCKET (systemd's NOTIFY_SOCKET) and writes each
      message that arrives to OUT as one line: seconds since the start, then the
      message's KEY=VALUE lines joined by ';'. Stops after SECONDS.

  service_manager.py stall PID THREAD SECONDS
      stops the thread of process PID named THREAD (its comm) for SECONDS, alone:
      the other threads run on (ptrace's seize and interrupt, then detach).
"""
import ctypes
import os
import socket
import sys
import time

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000


def listen(path, out, seconds):
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    start = time.monotonic()
    end = start + seconds
    with open(out, "w", buffering=1) as f:
        while time.monotonic() < end:
            s.settimeout(max(0.01, end - time.monotonic()))
            try:
                msg = s.recv(4096)
            except socket.timeout:
                break
            text = msg.decode(errors="replace").strip().replace("\n", ";")
            f.write(f"{time.monotonic() - start:.3f} {text}\n")


def stall(pid, name, seconds):
    tid = None
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/comm") as c:
            if c.read().strip() == name:
                tid = int(t)
    if tid is None:
        sys.exit(f"process {pid} has no thread named {name}")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    if libc.ptrace(PTRACE_SEIZE, tid, None, None) != 0:
        sys.exit(f"ptrace seize {tid}: {os.strerror(ctypes.get_errno())}")
    libc.ptrace(PTRACE_INTERRUPT, tid, None, None)
    os.waitpid(tid, WALL)
    print(f"thread {name} ({tid}) stopped", flush=True)
    time.sleep(seconds)
    libc.ptrace(PTRACE_DETACH, tid, None, None)
    print(f"thread {name} ({tid}) running again", flush=True)


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "listen":
        listen(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif len(sys.argv) == 5 and sys.argv[1] == "stall":
        stall(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
