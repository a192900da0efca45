"""The streamable HTTP transport, hardened: rebinding protection, size limits, timeouts.

The SDK turns on Host/Origin checks (DNS-rebinding protection) only when bound to 127.0.0.1,
localhost or ::1; here they are on for every bind address. By default only loopback names
(and the literal address bound, which no rebinding attack can use) are accepted in `Host`, and
only loopback origins in `Origin`; `--allowed-host` / `--allowed-origin` widen that.

Limits: request bodies over `MAX_BODY_BYTES` are refused (413) before being read; request
headers over `MAX_HEADER_BYTES` close the connection (h11's incomplete-event limit); a client
that does not finish its request headers within `HEADER_TIMEOUT_S`, or its body within
`BODY_TIMEOUT_S`, is dropped; idle keep-alive connections close after `KEEP_ALIVE_S`. One
client address holds at most `MAX_CONNECTIONS_PER_CLIENT` connections (half-open ones
included) of the server's `MAX_CONNECTIONS`, so a client parking connections locks out only
itself. On SIGTERM or Ctrl-C uvicorn stops accepting, open streams are cut after
`GRACEFUL_SHUTDOWN_S` and the calls still running are cancelled with their worker processes
(`mcp_workers`), so the process is gone within two seconds.

The socket is bound before anything is printed, so a taken port is an error naming it, not a
URL that nothing answers.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Callable, Sequence
from typing import Any

from disagg_decider.errors import UserError

MAX_BODY_BYTES = 1_000_000
MAX_HEADER_BYTES = 16_384
HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 5
GRACEFUL_SHUTDOWN_S = 1
MAX_CONNECTIONS = 512
MAX_CONNECTIONS_PER_CLIENT = 64
_REFUSAL = f"more than {MAX_CONNECTIONS_PER_CLIENT} open connections from this address\n"
TOO_MANY_CONNECTIONS = (
    "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nconnection: close\r\n"
    f"content-length: {len(_REFUSAL)}\r\n\r\n{_REFUSAL}"
).encode()
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or a UserError saying why not (port taken, bad host)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UserError(f"--host {host}: cannot be resolved ({exc.strerror})") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno in (98, 48, 10048):  # EADDRINUSE on Linux, macOS, Windows
            raise UserError(
                f"--port {port}: already in use on {host}; stop the other server or pick "
                "another port with --port"
            ) from None
        raise UserError(f"--host {host} --port {port}: cannot listen ({exc.strerror})") from None
    sock.set_inheritable(True)
    return sock


def security_settings(host: str, extra_hosts: Sequence[str], extra_origins: Sequence[str]):
    """Host/Origin allow-lists: loopback, the literal bind address, then what the user added."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = [f"{name}:*" for name in LOOPBACK_NAMES] + list(LOOPBACK_NAMES)
    origins = [f"http://{name}:*" for name in LOOPBACK_NAMES]
    literal = _literal_address(host)
    if literal is not None:
        hosts += [literal, f"{literal}:*"]
        origins += [f"http://{literal}:*"]
    for h in extra_hosts:
        hosts += [h] if re.search(r":(\d+|\*)$", h) else [h, f"{h}:*"]
    origins += list(extra_origins)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def _literal_address(host: str) -> str | None:
    """The bind address as it appears in a Host header, unless it is a wildcard (0.0.0.0, ::)."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    if ip.is_unspecified:
        return None
    return f"[{ip}]" if ip.version == 6 else str(ip)


class BodyGuard:
    """ASGI middleware: refuse over-long headers and bodies up front, time out a slow body.

    (h11's incomplete-event limit only bounds headers that arrive in pieces; headers that come
    in one read are counted here.)"""

    def __init__(
        self, app: Any, max_bytes: int = MAX_BODY_BYTES, timeout_s: float = BODY_TIMEOUT_S
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = scope.get("headers") or []
        if sum(len(k) + len(v) + 4 for k, v in raw) > MAX_HEADER_BYTES:
            await _reply(send, 431, f"request headers over {MAX_HEADER_BYTES:,} bytes")
            return
        headers = dict(raw)
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await _reply(send, 413, f"request body over {self.max_bytes:,} bytes")
            return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        body = bytearray()
        try:
            async with asyncio.timeout(self.timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    body += message.get("body", b"")
                    if len(body) > self.max_bytes:
                        await _reply(send, 413, f"request body over {self.max_bytes:,} bytes")
                        return
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await _reply(send, 408, f"request body not received within {self.timeout_s:g} s")
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _reply(send: Callable, status: int, text: str) -> None:
    data = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain"),
                (b"content-length", str(len(data)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def _protocol_class():
    """uvicorn's h11 protocol, plus a deadline for a request's headers (slowloris) and a cap on
    the connections one client address holds open (excess ones get 503 and are closed at
    once), so that no single client can fill the server's `MAX_CONNECTIONS`."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    open_by_client: dict[str, int] = {}

    class ClientLimited(H11Protocol):
        _deadline: Any = None
        _client: str | None = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            peer = transport.get_extra_info("peername")
            client = str(peer[0]) if peer else "unknown"
            if open_by_client.get(client, 0) >= MAX_CONNECTIONS_PER_CLIENT:
                transport.write(TOO_MANY_CONNECTIONS)
                transport.close()
                return
            open_by_client[client] = open_by_client.get(client, 0) + 1
            self._client = client
            self._arm()

        def _arm(self) -> None:
            self._deadline = self.loop.call_later(HEADER_TIMEOUT_S, self._expire, self.cycle)

        def _expire(self, cycle_then: Any) -> None:
            if self.cycle is cycle_then and not self.transport.is_closing():
                self.transport.close()  # no new request started within the deadline

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._deadline is not None:
                self._deadline.cancel()
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            if self._client is not None:
                left = open_by_client.pop(self._client, 1) - 1
                if left > 0:
                    open_by_client[self._client] = left
                self._client = None
            super().connection_lost(exc)

    return ClientLimited


def http_server(
    server: Any,
    host: str,
    port: int,
    *,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> tuple[Any, socket.socket]:
    """The uvicorn server for `server` and its bound socket (run it with `.run(sockets=...)`)."""
    import uvicorn

    sock = bind(host, port)
    app = server.streamable_http_app(
        max_request_body_size=MAX_BODY_BYTES,
        transport_security=security_settings(host, allowed_hosts, allowed_origins),
        host=host,
    )
    config = uvicorn.Config(
        BodyGuard(app),
        http=_protocol_class(),
        ws="none",
        lifespan="on",
        log_level="warning",
        log_config=None,
        timeout_keep_alive=KEEP_ALIVE_S,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        limit_concurrency=MAX_CONNECTIONS,
    )
    return uvicorn.Server(config), sock


def serve_http(
    http: Any, sock: socket.socket, host: str, on_listening: Callable[[str], None] | None = None
) -> None:
    """Serve `http` on `sock` (both from `http_server`) until SIGTERM or Ctrl-C; the URL, with
    the `host` it was asked for, is announced only once the port is ours."""
    shown = f"[{host}]" if ":" in host else host
    if on_listening is not None:
        on_listening(f"http://{shown}:{sock.getsockname()[1]}/mcp")
    http.run(sockets=[sock])
