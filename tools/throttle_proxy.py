"""A TCP proxy that slows what a server streams back: the injected regression of a GPU proof run.

    python tools/throttle_proxy.py LISTEN_PORT UPSTREAM_PORT DELAY_FILE

Every chunk read from the upstream server waits the milliseconds DELAY_FILE holds (read at each
chunk, so a run can be slowed without restarting anything; 0 or no file: pass-through) before it
is forwarded. It listens on 127.0.0.1 only. Lab tool: not part of the product.
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
    try:
        while chunk := await reader.read(65536):
            if slow is not None and (wait := delay_s(slow)):
                await asyncio.sleep(wait)
            writer.write(chunk)
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
