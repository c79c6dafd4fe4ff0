"""An asyncio server with a stage per step of each request.

    PROF=1 PROF_TRACE=srv.json python3 examples/python/asyncio_server.py

Fifty clients send requests over 127.0.0.1; each request is parsed, waits
for a model (simulated with a sleep), and is answered. Many requests
interleave on the one event-loop thread, and prof times each of them as
the request sees it: the table's percentiles are per request, each
connection's zones are drawn on a track of its own in the trace
(docs/PYTHON.md, "Zones across awaits").
"""
import asyncio
import random

import prof

CLIENTS, REQUESTS = 50, 20


@prof.zone("infer")
async def infer(x):
    await asyncio.sleep(random.uniform(0.001, 0.010))   # the model, elsewhere
    return x * 2


async def handle(reader, writer):
    while line := await reader.readline():
        with prof.zone("request"):
            with prof.zone("parse"):
                x = int(line)
            y = await infer(x)
            with prof.zone("respond"):
                writer.write(b"%d\n" % y)
                await writer.drain()
    writer.close()


async def client(port, i):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for k in range(REQUESTS):
        writer.write(b"%d\n" % (i * REQUESTS + k))
        await writer.drain()
        await reader.readline()
    writer.close()
    await writer.wait_closed()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        await asyncio.gather(*(client(port, i) for i in range(CLIENTS)))


if __name__ == "__main__":
    asyncio.run(main())
    print(prof.summary(), end="")
