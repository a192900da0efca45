"""The MCP server: the verdict, the calculator and the rulebook as tools a coding agent calls.

Built on the official `mcp` SDK (`MCPServer`). The tools live in `mcp_tools`, `mcp_lookups`
and `mcp_kv_transfer` as plain typed functions; this module registers them (read-only, with
their output schemas advertised), adds the resources (rendered skill, rulebook, catalogs) and
the workload-collecting prompt, turns bad input into tool errors an agent can act on, and runs
a transport. `decide mcp` is the entry point; importing this module is what pulls in the SDK,
so the CLI does it lazily.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
import logging
import weakref
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any, Literal

from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import ValidationError

from disagg_decider import __version__, catalog, mcp_kv_transfer, mcp_lookups, mcp_tools
from disagg_decider.errors import UserError, clip
from disagg_decider.mcp_guards import (
    argument_bounds_problem,
    unknown_arguments_problem,
    unknown_resource_text,
)
from disagg_decider.mcp_logging import one_line_logging
from disagg_decider.mcp_prompt import EXAMPLE_WORKLOAD as EXAMPLE_WORKLOAD  # re-exported
from disagg_decider.mcp_prompt import collect_workload
from disagg_decider.mcp_workers import (
    DEFAULT_CALL_TIMEOUT_S,
    DEFAULT_WORKERS,
    HEAVY_TOOLS,
    WorkerCrash,
    WorkerPool,
)
from disagg_decider.render.skill_layout import SKILL_NAME, reference_files
from disagg_decider.rules.loader import rulebook_dir, shipped
from disagg_decider.userfiles import FilePolicy, confined_policy, file_policy, read_text
from disagg_decider.workload import format_validation_error

LOG = logging.getLogger("disagg_decider.mcp")

SERVER_NAME = "disagg-decider"
SKILL_URI = "skill://disaggregation-decider/SKILL.md"
SKILL_DOC_URI = "disagg://skill/skill-disaggregation-decider.md"
SKILL_RESOURCES = (  # (uri, name, path under outputs/), as `decide render` writes them
    (SKILL_URI, "disaggregation-decider-skill", "disaggregation-decider/SKILL.md"),
    (SKILL_DOC_URI, "skill-disaggregation-decider", "skill-disaggregation-decider.md"),
    *(  # the files SKILL.md links to, at the URIs its relative links resolve to
        (f"skill://{path}", f"{SKILL_NAME}-{stem}", path)
        for stem, path in reference_files().items()
    ),
)
REPO_ROOT = Path(__file__).resolve().parents[2]  # a checkout: skill/disagg_decider/ -> root

INSTRUCTIONS = """\
Decides whether an LLM serving workload should split prefill and decode onto separate GPU pools
(disaggregated serving on NVIDIA Dynamo or llm-d) or stay colocated, and sizes the pools.
Start with decide_disaggregation (the prompt collect_workload lists what to ask the user);
drill in with find_crossover (prompt length where the split starts to pay), frontier
(throughput per GPU against tokens/s per user: where the split wins),
estimate_kv_transfer (KV bytes and transfer time on a link), explain_rule (why a rule fired)
and list_catalog (valid model, GPU and link ids). All tools are read-only and deterministic.
"""

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

TOOLS: tuple[tuple[Callable[..., Any], str], ...] = (
    (mcp_tools.decide_disaggregation, "Decide prefill/decode disaggregation for a workload"),
    (mcp_kv_transfer.estimate_kv_transfer, "Estimate KV-cache transfer bytes and time"),
    (mcp_tools.find_crossover, "Find the prompt length where disaggregation starts to win"),
    (mcp_tools.frontier, "Throughput per GPU against tokens/s per user, per layout"),
    (mcp_lookups.list_catalog, "List known GPUs, models and network links"),
    (mcp_lookups.explain_rule, "Explain one rule of the rulebook"),
)


class DeciderServer(MCPServer):
    """An MCPServer whose tool errors name the field and what would be valid, and whose
    failures are cheap: one log line each, no traceback, the event loop never blocked.

    The SDK reports argument validation failures as pydantic's raw text, hides the message
    of any other exception (it cannot know it is safe to show) and drops argument names a tool
    does not take. Here unknown names are refused with the valid ones listed; our `UserError`s
    are written for users, and `format_validation_error` lists each bad field on one line
    (values cut to 80 characters), so both reach the agent verbatim; anything else is answered
    as an internal error and logged once, as one line at WARNING.

    Each call runs under the server's file policy: no local file at all unless the server was
    started with `--allow-dir`, and then only regular files under those directories. The
    tools whose cost grows with the workload run in `pool`'s worker processes, under a
    deadline (`mcp_workers`).
    """

    policy: FilePolicy = FilePolicy(())
    pool: WorkerPool = WorkerPool(FilePolicy(()))

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        problem = argument_bounds_problem(arguments) or self._unknown_arguments(name, arguments)
        if problem:
            return _tool_error(name, f"{name} arguments: {problem}")  # fields named in it
        token = _CALLER.set(_client_key(context))
        try:
            with file_policy(self.policy):
                return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, UserError):
                return _tool_error(name, f"{name}: {cause}")
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                tool = self._tool_manager.get_tool(name)
                root = tool.fn_metadata.arg_model if tool is not None else None
                return _tool_error(name, _validation_message(name, cause, root))
            if not isinstance(exc, UnexpectedToolError):
                return _tool_error(name, clip(str(exc), 2000))
            return _internal_error(name, cause or exc)
        except Exception as exc:
            return _internal_error(name, exc)
        finally:
            _CALLER.reset(token)

    def _unknown_arguments(self, name: str, arguments: dict[str, Any]) -> str | None:
        tool = self._tool_manager.get_tool(name)
        if tool is None or not isinstance(arguments, dict):
            return None
        fields = tool.fn_metadata.arg_model.model_fields
        return unknown_arguments_problem(arguments, [f.alias or n for n, f in fields.items()])

    async def _handle_read_resource(self, ctx: Any, params: Any) -> Any:
        """The SDK's, except that an unknown URI is refused with the URI cut (it would echo
        and log it whole, however long)."""
        uri = str(params.uri)
        known = [str(r.uri) for r in self._resource_manager.list_resources()]
        if uri not in known:
            LOG.warning("resource refused: %s", clip(uri, 120))
            raise MCPError(code=INVALID_PARAMS, message=unknown_resource_text(uri, known))
        try:
            return await super()._handle_read_resource(ctx, params)
        except ResourceNotFoundError:  # pragma: no cover - every known URI has a reader
            raise MCPError(code=INVALID_PARAMS, message=unknown_resource_text(uri, known)) from None


_CALLER: contextvars.ContextVar[Hashable] = contextvars.ContextVar("mcp_caller", default=None)


def _client_key(context: Any) -> Hashable:
    """Who is calling, for the worker pool's turn-taking: the HTTP peer's address, else one
    key for the only peer (stdio, in memory)."""
    try:
        request = context.request_context.request
    except (AttributeError, ValueError):  # no context, or not inside a request
        return None
    client = getattr(request, "client", None)
    return getattr(client, "host", None)


def _in_worker(server: DeciderServer, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as an async tool whose body runs in one of `server.pool`'s worker processes; the
    signature (and so the advertised schemas) is `fn`'s."""

    @functools.wraps(fn)
    async def call(**kwargs: Any) -> Any:
        return await server.pool.run(fn.__name__, kwargs, _CALLER.get())

    return call


def _tool_error(name: str, message: str) -> CallToolResult:
    LOG.warning("tool %s refused: %s", name, clip(message.replace("\n", " | "), 300))
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _internal_error(name: str, exc: BaseException) -> CallToolResult:
    kind = exc.kind if isinstance(exc, WorkerCrash) else type(exc).__name__
    LOG.warning("tool %s: internal error %s: %s", name, kind, clip(str(exc), 200))
    text = (
        f"{name}: internal error ({kind}); the input may be outside what the "
        "calculator handles. Check the arguments against the tool's schema and try again."
    )
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _validation_message(tool_name: str, exc: ValidationError, root: Any) -> str:
    text = format_validation_error(exc, f"{tool_name} arguments", root)
    return text + "\nFix the fields named above and call the tool again."


def build_server(
    allow_dirs: Sequence[Path] = (),
    *,
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
    workers: int = DEFAULT_WORKERS,
) -> DeciderServer:
    """The server; `allow_dirs` are the only directories its tools may read files from, and
    a decision that takes longer than `call_timeout_s` is cancelled (`mcp_workers`)."""
    server = DeciderServer(SERVER_NAME, instructions=INSTRUCTIONS, version=__version__)
    server.policy = confined_policy(allow_dirs) if allow_dirs else FilePolicy(())
    server.pool = WorkerPool(server.policy, size=workers, call_timeout_s=call_timeout_s)
    weakref.finalize(server, server.pool.close)  # a dropped server takes its workers along
    for fn, title in TOOLS:
        body = _in_worker(server, fn) if fn.__name__ in HEAVY_TOOLS else fn
        server.add_tool(body, title=title, description=_description(fn), annotations=READ_ONLY)
    _add_resources(server)
    server.prompt(name="collect_workload", title="Collect a workload and decide")(collect_workload)
    warm_caches()
    return server


def warm_caches() -> None:
    """Parse the shipped catalogs and rulebook now, once per process, so no call pays for it.

    Both are package data, cached for the life of the process (`functools.cache`). Nothing read
    from a path a caller gives is cached here: a `{hf_config: path}` is read (and checked
    against the file policy) on every call, and a calibration file's parse is keyed on its
    resolved path and modification time (`calibrate.apply`).
    """
    catalog.gpus()
    catalog.models()
    catalog.links()
    shipped()


TAKES_CATALOG_IDS = (
    mcp_tools.decide_disaggregation,
    mcp_kv_transfer.estimate_kv_transfer,
    mcp_tools.find_crossover,
    mcp_tools.frontier,
)


def _description(fn: Callable[..., Any]) -> str:
    """The docstring, plus the catalog ids for tools that take them (saves a list_catalog)."""
    text = inspect.cleandoc(fn.__doc__ or "")
    if fn not in TAKES_CATALOG_IDS:
        return text
    tables = {"Models": catalog.models, "GPUs": catalog.gpus, "Links": catalog.links}
    known = [
        f"{label}: {', '.join(sorted({r.id for r in table().values()}))}."
        for label, table in tables.items()
    ]
    return text + "\n\nKnown ids (list_catalog gives their figures). " + " ".join(known)


# --- resources ---------------------------------------------------------------------------------


def rendered_text(relative: str) -> str:
    """A file `decide render` writes under outputs/, or how to produce it; we only serve it."""
    candidates = output_dirs()
    for folder in candidates:
        if (folder / relative).is_file():
            try:  # regular file, size-capped: outputs/ under the working directory is not ours
                return read_text(folder / relative, what="a rendered skill file")
            except UserError:
                continue
    looked = ", ".join(str(folder / relative) for folder in candidates)
    return (
        f"# Skill not rendered yet\n\n{relative} was not found (looked in {looked}). Run "
        "`decide render` in the disagg-decider checkout to produce it, then read this resource "
        "again. Meanwhile the tools work: call decide_disaggregation with a workload.\n"
    )


def output_dirs() -> list[Path]:
    """The checkout's outputs/, the installed package's data, then the working directory's."""
    dirs = [Path(__file__).resolve().parent / "outputs", Path.cwd() / "outputs"]
    if (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "skill").is_dir():
        dirs.insert(0, REPO_ROOT / "outputs")
    return list(dict.fromkeys(dirs))


def catalog_json(kind: mcp_lookups.CatalogKind) -> str:
    listing = mcp_lookups.list_catalog(kind)
    return json.dumps(listing.model_dump(mode="json", exclude_none=True), indent=2)


def _add_resources(server: MCPServer) -> None:
    for uri, name, relative in SKILL_RESOURCES:
        server.resource(
            uri,
            name=name,
            title=f"Rendered skill: {relative}",
            description="The decision skill: when to disaggregate, the rules, the numbers.",
            mime_type="text/markdown",
        )(_rendered_reader(relative))
    for path in sorted(rulebook_dir().glob("*.yaml")):
        server.resource(
            f"disagg://rules/{path.name}",
            name=f"rules-{path.stem}",
            title=f"Rulebook: {path.stem}",
            description="Rule file: parameters with sources, rules with rationale and examples.",
            mime_type="application/yaml",
        )(_file_reader(path))
    for kind in ("gpus", "models", "links"):
        server.resource(
            f"disagg://catalog/{kind}.json",
            name=f"catalog-{kind}",
            title=f"Catalog: {kind}",
            description=f"The {kind} the calculator knows, with figures and sources (JSON).",
            mime_type="application/json",
        )(_catalog_reader(kind))  # type: ignore[arg-type]


def _rendered_reader(relative: str) -> Callable[[], str]:
    def read() -> str:
        return rendered_text(relative)

    return read


def _file_reader(path: Path) -> Callable[[], str]:
    def read() -> str:
        return path.read_text(encoding="utf-8")

    return read


def _catalog_reader(kind: mcp_lookups.CatalogKind) -> Callable[[], str]:
    def read() -> str:
        return catalog_json(kind)

    return read


# --- transports --------------------------------------------------------------------------------

Transport = Literal["stdio", "http"]


def serve(
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    allow_dirs: Sequence[Path] = (),
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    on_listening: Callable[[str], None] | None = None,
    call_timeout_s: float | None = None,
    workers: int | None = None,
) -> None:
    """Block serving MCP: stdio for agents that spawn the server, streamable HTTP at /mcp.

    One worker process is started before serving, so the first decision is as fast as the
    next; the workers are killed when the server stops (`mcp_workers`)."""
    server = build_server(
        allow_dirs,
        call_timeout_s=call_timeout_s or DEFAULT_CALL_TIMEOUT_S,
        workers=workers or DEFAULT_WORKERS,
    )
    one_line_logging()
    server.pool.prewarm()
    try:
        _run(server, transport, host, port, allowed_hosts, allowed_origins, on_listening)
    finally:
        server.pool.close()


def _run(
    server: DeciderServer,
    transport: Transport,
    host: str,
    port: int,
    allowed_hosts: Sequence[str],
    allowed_origins: Sequence[str],
    on_listening: Callable[[str], None] | None,
) -> None:
    if transport == "stdio":
        server.run()
        return
    from disagg_decider.mcp_http import http_server, serve_http

    http, sock = http_server(
        server, host, port, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins
    )
    serve_http(http, sock, host, on_listening)
