"""`decide mcp`: serve the verdict to coding agents over the Model Context Protocol.

Kept apart from `mcp_server` so that `decide --workload ...` never imports the MCP SDK (it
pulls in starlette, uvicorn and httpx); the server module loads only when this command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from disagg_decider.cli_common import choices
from disagg_decider.cli_options import repeatable
from disagg_decider.errors import UserError

McpTransport = choices("McpTransport", "stdio", "http")


AllowDirs = repeatable(
    Path,
    "--allow-dir",
    "DIR",
    "Let tools read regular files under DIR (repeatable), e.g. a model's config.json given as "
    "{hf_config: path}; relative paths are read under the first DIR. Without it the server "
    "reads no local file.",
)
AllowedHosts = repeatable(
    str,
    "--allowed-host",
    "HOST[:PORT]",
    "With --transport http: also accept this Host header (repeatable). By default only "
    "loopback names and the bound address are accepted (DNS-rebinding protection).",
)
AllowedOrigins = repeatable(
    str,
    "--allowed-origin",
    "URL",
    "With --transport http: also accept this Origin, e.g. https://ide.example (repeatable). "
    "By default only loopback origins.",
)

mcp_app = typer.Typer(
    help=(
        "Serve the decider as an MCP server for coding agents (Claude Code, Cursor, VS Code). "
        "Tools: decide_disaggregation, estimate_kv_transfer, find_crossover, list_catalog, "
        "explain_rule. Register it with: claude mcp add disagg-decider -- decide mcp"
    )
)


@mcp_app.callback(invoke_without_command=True)
def mcp_command(
    transport: Annotated[
        McpTransport,
        typer.Option(
            "--transport",
            "-t",
            help=(
                "stdio (default): the agent spawns `decide mcp` and talks over stdin/stdout. "
                "http: streamable HTTP at http://HOST:PORT/mcp, e.g. --transport http --port 8765"
            ),
        ),
    ] = McpTransport.stdio,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to bind with --transport http. Loopback by default; 0.0.0.0 exposes "
            "the server to the network (it has no authentication).",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", "-p", help="TCP port for --transport http.")
    ] = 8000,
    allow_dir: AllowDirs = None,
    allowed_host: AllowedHosts = None,
    call_timeout_s: Annotated[
        float | None,
        typer.Option(
            "--call-timeout-s",
            metavar="SECONDS",
            help="Cancel a decide_disaggregation or find_crossover call (and stop the worker "
            "process computing it) after this many seconds, waiting included [default: 20].",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            metavar="N",
            help="Worker processes computing decisions (1-64); each client uses at most half "
            "[default: the CPU count, 2 to 4].",
        ),
    ] = None,
    allowed_origin: AllowedOrigins = None,
) -> None:
    if not 0 < port < 65536:
        raise UserError(f"--port {port}: expected a TCP port between 1 and 65535")
    if call_timeout_s is not None and not 0.1 <= call_timeout_s <= 3600:  # NaN fails both
        raise UserError(f"--call-timeout-s {call_timeout_s:g}: expected 0.1 to 3600 seconds")
    if workers is not None and not 1 <= workers <= 64:
        raise UserError(f"--workers {workers}: expected 1 to 64 worker processes")
    from disagg_decider.mcp_server import serve

    def announce(url: str) -> None:
        typer.echo(f"disagg-decider MCP server on {url}", err=True)

    serve(
        transport.value,
        host=host,
        port=port,
        allow_dirs=allow_dir or [],
        allowed_hosts=allowed_host or [],
        allowed_origins=allowed_origin or [],
        on_listening=announce,
        call_timeout_s=call_timeout_s,
        workers=workers,
    )
