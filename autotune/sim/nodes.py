"""A simulated server that spans several nodes, as SGLang does with ``--nnodes N --node-rank R --dist-init-addr H:P``.

Node rank 0 is the server: it listens on the ``--dist-init-addr`` port, waits for every other rank to join (SGLang's
``torch.distributed`` rendezvous) before it loads its weights, serves HTTP, and stops when a rank's connection drops
(SGLang's NCCL watchdog ends the server when a node is gone). A rank above 0 serves no HTTP: it joins rank 0 and
stays until its connection ends or it is told to stop. A rank that cannot join in ``JOIN_TIMEOUT_S`` fails the way
SGLang's rendezvous does, with a timeout in its log. Only the rendezvous is simulated: the performance model prices a
tensor-parallel step as if its GPUs shared one node.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

JOIN_TIMEOUT_S = 300.0  # SGLang's default torch.distributed timeout is longer; a simulated join is quick or never


def parse_addr(addr: str | None) -> tuple[str, int]:
    """``host:port`` of ``--dist-init-addr``; ValueError naming the fix where it is missing or malformed."""
    host, _, port = (addr or "").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--dist-init-addr must be HOST:PORT when --nnodes > 1, got {addr!r}")
    return host.strip("[]"), int(port)


class Rendezvous:
    """Rank 0's side: a listener that counts the ranks that joined and notices one that leaves."""

    def __init__(self, nnodes: int, log: Callable[[str], None]) -> None:
        self.nnodes = nnodes
        self.log = log
        self.joined: dict[int, asyncio.StreamWriter] = {}
        self.all_joined = asyncio.Event()
        self.lost = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self._peer, host, port, reuse_address=True)

    async def _peer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        try:
            rank = int(line.decode().strip())
        except ValueError:
            writer.close()
            return
        if not 0 < rank < self.nnodes or rank in self.joined:
            writer.write(b"refused\n")
            writer.close()
            return
        self.joined[rank] = writer
        self.log(f"node rank {rank} joined ({len(self.joined) + 1}/{self.nnodes} nodes)")
        writer.write(b"ok\n")
        await writer.drain()
        if len(self.joined) == self.nnodes - 1:
            self.all_joined.set()
        await reader.read()  # until the rank's connection ends
        if not self.lost.is_set():
            self.log(f"RuntimeError: NCCL watchdog: node rank {rank} is gone (its connection to rank 0 closed)")
        self.lost.set()

    async def wait_all(self, timeout_s: float = JOIN_TIMEOUT_S) -> str | None:
        """None once every rank joined; else the failure to log."""
        try:
            await asyncio.wait_for(self.all_joined.wait(), timeout_s)
        except asyncio.TimeoutError:
            return (
                f"torch.distributed.DistStoreError: Timed out after {timeout_s:g} seconds waiting for clients. "
                f"{len(self.joined) + 1}/{self.nnodes} nodes joined."
            )
        return None

    async def close(self) -> None:
        for w in self.joined.values():
            w.close()
        if self.server is not None:
            self.server.close()


async def follow(rank: int, addr: str, log: Callable[[str], None], timeout_s: float = JOIN_TIMEOUT_S) -> int:
    """A rank above 0: join rank 0 at ``addr`` and stay until the connection ends or SIGTERM; returns the exit code."""
    host, port = parse_addr(addr)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log(f"Init torch distributed begin. node rank {rank}, dist-init-addr {host}:{port}")
    deadline = loop.time() + timeout_s
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            break
        except OSError:
            if loop.time() > deadline or stop.is_set():
                log(f"torch.distributed.DistNetworkError: could not reach {host}:{port} in {timeout_s:g} seconds")
                return 1
            await asyncio.sleep(0.2)
    writer.write(f"{rank}\n".encode())
    await writer.drain()
    answer = (await reader.readline()).decode().strip()
    if answer != "ok":
        log(f"RuntimeError: rank 0 at {host}:{port} refused node rank {rank} ({answer or 'closed'})")
        return 1
    log(f"Init torch distributed ends. node rank {rank} joined; serving is rank 0's (no HTTP server on this node)")
    gone = asyncio.ensure_future(reader.read())
    halted = asyncio.ensure_future(stop.wait())
    await asyncio.wait({gone, halted}, return_when=asyncio.FIRST_COMPLETED)
    writer.close()
    if halted.done():
        log("Received SIGTERM; shutting down.")
        return 0
    log("RuntimeError: NCCL watchdog: rank 0 is gone (its connection closed)")
    return 1
