"""A minimal asyncio HTTP/1.1 client over raw sockets, for the transport tests and the load
benches (bench/serve_burst.py): exact bytes out, responses read as they arrive (pipelined
responses in order, chunked bodies chunk by chunk), no client library in between."""
import json


def request_bytes(method, path, body=None, extra=""):
    """A request's bytes: `extra` is more header lines; a `body` goes out as JSON."""
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\n{extra}"
    if body is None:
        return (head + "\r\n").encode()
    data = json.dumps(body).encode()
    return (head + f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
            ).encode() + data


async def read_head(reader):
    """A response's status and header fields (names lower-cased)."""
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("closed before a response")
    status = int(status_line.split()[1])
    headers = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


async def read_chunks(reader):
    """The chunks of a chunked body as they arrive, up to the last chunk."""
    while True:
        size = int((await reader.readline()).strip(), 16)
        chunk = await reader.readexactly(size + 2)
        if size == 0:
            return
        yield chunk[:-2]


async def read_response(reader):
    """One HTTP/1.1 response: (status, headers, body) with chunked bodies decoded."""
    status, headers = await read_head(reader)
    if headers.get("transfer-encoding") == "chunked":
        body = b"".join([chunk async for chunk in read_chunks(reader)])
    else:
        body = await reader.readexactly(int(headers.get("content-length", 0)))
    return status, headers, body


def delta_text(choice):
    """What a chat stream's choice delta adds: reasoning and content, in that order."""
    delta = choice["delta"]
    return (delta.get("reasoning_content") or "") + (delta.get("content") or "")
