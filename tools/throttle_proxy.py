"""A TCP proxy that slows what a server streams back: the injected regression of a GPU proof run.

    python tools/throttle_proxy.py LISTEN_PORT UPSTREAM_PORT DELAY_FILE

The server's stream is forwarded one server-sent event (up to each blank line) at a time, at most
one event per DELAY milliseconds, DELAY read from DELAY_FILE at each event (so a run can be slowed
without restarting anything; 0 or no file: pass-through). Pacing, not a delay per read: a fixed
wait per read is absorbed as soon as events queue up (the next read takes them all at once), which
slowed nothing in a first try on the H200. It listens on 127.0.0.1 only. Lab tool, not the product.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


def delay_s(path: Path) -> float:
    try:
        return max(0.0, float(path.read_text().strip() or 0)) / 1000
    except (OSError, ValueError):
        return 0.0


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slow: Path | None) -> None:
    loop = asyncio.get_running_loop()
    pending = b""
    next_at = 0.0
    try:
        while chunk := await reader.read(65536):
            if slow is None:
                writer.write(chunk)
                await writer.drain()
                continue
            pending += chunk
            *events, pending = pending.split(b"\n\n")
            for event in events:
                if (gap := delay_s(slow)) and (wait := next_at - loop.time()) > 0:
                    await asyncio.sleep(wait)
                next_at = loop.time() + gap
                writer.write(event + b"\n\n")
                await writer.drain()
        if pending:
            writer.write(pending)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main(listen: int, upstream: int, slow: Path) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(pipe(client_r, up_w, None), pipe(up_r, client_w, slow))

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])))
