"""Floor 1 of ``latency.py --floors``: the cheapest Python proxy there is. Each line from stdin goes to the raw
upstream's stdin, each line from its stdout comes back, untouched (asyncio pipes, no parsing, no SDK).

    python benchmarks/floor_relay.py [ARGS FOR raw_upstream.py]
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

RAW = str(Path(__file__).with_name("raw_upstream.py"))


async def main() -> None:
    loop = asyncio.get_running_loop()
    upstream = await asyncio.create_subprocess_exec(
        sys.executable, RAW, *sys.argv[1:], stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert upstream.stdin is not None and upstream.stdout is not None
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", buffering=0))
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(), os.fdopen(1, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)

    async def back() -> None:
        assert upstream.stdout is not None
        while line := await upstream.stdout.readline():
            writer.write(line)
            await writer.drain()

    answers = asyncio.create_task(back())
    while line := await reader.readline():
        upstream.stdin.write(line)
        await upstream.stdin.drain()
    upstream.stdin.close()
    await upstream.wait()
    await answers


if __name__ == "__main__":
    asyncio.run(main())
