"""SIMULATOR multi-node mode: SGLang's `--nnodes`, `--node-rank`, `--dist-init-addr`.

SGLang splits a model over nodes: every node runs the same launch command with its own
rank; rank 0 serves HTTP, the others run their share of the model and follow it. What a
launcher must get right is the same here as there: every node boots, finds rank 0 at the
dist-init address, and when any node goes away the others stop too (NCCL aborts in
SGLang), so a node left behind is visible. The simulator keeps only that: rank 0 listens
on the dist-init address and waits (up to `--dist-timeout`) until every other rank has
connected; each follower connects, says its rank, and exits when rank 0's connection
closes. Rank 0 exits when a follower's connection closes.
"""

from __future__ import annotations

import os
import socket
import threading
import time

from specgate.sim.server import log

DEFAULT_DIST_TIMEOUT_S = 300.0  # SGLang leaves torch's default (30 min); a simulator need not wait that long
EXIT_PEER_LOST = 4


def split_addr(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"--dist-init-addr {addr!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def _exit(message: str) -> None:
    log(message)
    os._exit(EXIT_PEER_LOST)  # the HTTP server's threads would keep a plain exit waiting


def _watch(conn: socket.socket, message: str) -> None:
    """Block until the peer closes `conn` (or it breaks), then end this process."""
    try:
        while conn.recv(64):
            pass
    except OSError:
        pass
    _exit(message)


def gather_followers(addr: str, nnodes: int, timeout_s: float) -> None:
    """Rank 0: wait until ranks 1..nnodes-1 have connected; then watch each of them."""
    host, port = split_addr(addr)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))  # an unusable address fails the boot here, as torch's store would
    listener.listen(nnodes)
    log(f"SIMULATOR node 0 of {nnodes}: waiting for {nnodes - 1} node(s) at {host}:{port}")
    deadline = time.monotonic() + timeout_s
    joined: dict[int, socket.socket] = {}
    while len(joined) < nnodes - 1:
        listener.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            conn, peer = listener.accept()
        except TimeoutError:
            raise SystemExit(
                f"SIMULATOR node 0: only {len(joined)} of {nnodes - 1} node(s) joined within "
                f"--dist-timeout {timeout_s:g} s"
            ) from None
        conn.settimeout(10.0)
        try:
            rank = int(conn.recv(64).decode().strip() or -1)
        except (OSError, ValueError):
            conn.close()
            continue
        conn.settimeout(None)
        if not 0 < rank < nnodes or rank in joined:
            log(f"SIMULATOR node 0: refused a connection from {peer[0]} claiming rank {rank}")
            conn.close()
            continue
        joined[rank] = conn
        log(f"SIMULATOR node 0: node {rank} joined from {peer[0]}")
    listener.close()
    for rank, conn in joined.items():
        threading.Thread(
            target=_watch, args=(conn, f"SIMULATOR node 0: node {rank} went away; stopping"), daemon=True
        ).start()


def follow_leader(addr: str, rank: int, nnodes: int, timeout_s: float) -> None:
    """Rank > 0: connect to rank 0 (retrying until the timeout), then live as long as it does."""
    host, port = split_addr(addr)
    log(f"SIMULATOR node {rank} of {nnodes}: joining node 0 at {host}:{port}")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=5.0)
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"SIMULATOR node {rank}: node 0 at {host}:{port} not reachable within --dist-timeout {timeout_s:g} s ({exc})"
                ) from None
            time.sleep(0.2)
    conn.sendall(f"{rank}\n".encode())
    conn.settimeout(None)
    log(f"SIMULATOR node {rank}: joined; serving no HTTP (rank 0 does), following node 0")
    _watch(conn, f"SIMULATOR node {rank}: node 0 went away; stopping")
