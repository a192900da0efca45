"""The MCP server: the verdict, the calculator and the rulebook as tools a coding agent calls.

Built on the official `mcp` SDK (`MCPServer`). The tools live in `mcp_tools` as plain typed
functions; this module registers them (read-only, with their output schemas advertised), adds
the resources (rendered skill, rulebook, catalogs) and the workload-collecting prompt, turns
bad input into tool errors an agent can act on, and runs a transport. `decide mcp` is the
entry point; importing this module is what pulls in the SDK, so the CLI does it lazily.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ValidationError

from disagg_decider import __version__, catalog, mcp_tools
from disagg_decider.errors import UserError, clip, excerpt
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
    (mcp_tools.estimate_kv_transfer, "Estimate KV-cache transfer bytes and time"),
    (mcp_tools.find_crossover, "Find the prompt length where disaggregation starts to win"),
    (mcp_tools.frontier, "Throughput per GPU against tokens/s per user, per layout"),
    (mcp_tools.list_catalog, "List known GPUs, models and network links"),
    (mcp_tools.explain_rule, "Explain one rule of the rulebook"),
)


class DeciderServer(MCPServer):
    """An MCPServer whose tool errors name the field and what would be valid, and whose
    failures are cheap: one log line each, no traceback, the event loop never blocked.

    The SDK reports argument validation failures as pydantic's raw text and hides the message
    of any other exception (it cannot know it is safe to show). Our `UserError`s are written for
    users, and `format_validation_error` lists each bad field on one line (values cut to 80
    characters), so both reach the agent verbatim; anything else is answered as an internal
    error and logged once, as one line at WARNING.

    Each call runs under the server's file policy: no local file at all unless the server was
    started with `--allow-dir`, and then only regular files under those directories.
    """

    policy: FilePolicy = FilePolicy(())

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        too_big = argument_bounds_problem(arguments)
        if too_big:
            return _tool_error(name, f"{name} arguments: {too_big}")  # fields named in it
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


def _tool_error(name: str, message: str) -> CallToolResult:
    LOG.warning("tool %s refused: %s", name, clip(message.replace("\n", " | "), 300))
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _internal_error(name: str, exc: BaseException) -> CallToolResult:
    LOG.warning("tool %s: internal error %s: %s", name, type(exc).__name__, clip(str(exc), 200))
    text = (
        f"{name}: internal error ({type(exc).__name__}); the input may be outside what the "
        "calculator handles. Check the arguments against the tool's schema and try again."
    )
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


MAX_ARGUMENT_VALUES = 20_000
MAX_ARGUMENT_CHARS = 1_000_000
MAX_ARGUMENT_DEPTH = 32


def argument_bounds_problem(arguments: Any) -> str | None:
    """What makes a call's arguments too large or too deep to validate, naming where, or None.

    Bounded work (it stops at the first limit), so a hostile call costs microseconds here
    instead of seconds in validation and in messages quoting it.
    """
    stack: list[tuple[Any, tuple[str, ...]]] = [(arguments, ())]
    values = chars = 0

    def where(path: tuple[str, ...]) -> str:  # spelled out only for a message
        return ".".join(path) or "arguments"

    while stack:
        node, path = stack.pop()
        values += 1
        if values > MAX_ARGUMENT_VALUES:
            return f"{where(path)}: more than {MAX_ARGUMENT_VALUES:,} values in one call"
        if len(path) > MAX_ARGUMENT_DEPTH:
            return f"{where(path)[:200]}: nested deeper than {MAX_ARGUMENT_DEPTH} levels"
        if isinstance(node, str):
            chars += len(node)
            if chars > MAX_ARGUMENT_CHARS:
                return (
                    f"{where(path)}: a string of {len(node):,} characters; at most "
                    f"{MAX_ARGUMENT_CHARS:,} characters of text per call"
                )
        elif isinstance(node, dict):
            for key, value in node.items():
                name = str(key)
                chars += len(name)
                if chars > MAX_ARGUMENT_CHARS or len(name) > 1000:
                    return f"{where(path)}: a key of {len(name):,} characters ({excerpt(name)})"
                stack.append((value, (*path, name)))
        elif isinstance(node, list | tuple):
            stack.extend((v, (*path, str(i))) for i, v in enumerate(node))
    return None


def _validation_message(tool_name: str, exc: ValidationError, root: Any) -> str:
    text = format_validation_error(exc, f"{tool_name} arguments", root)
    return text + "\nFix the fields named above and call the tool again."


def build_server(allow_dirs: Sequence[Path] = ()) -> DeciderServer:
    """The server; `allow_dirs` are the only directories its tools may read files from."""
    server = DeciderServer(SERVER_NAME, instructions=INSTRUCTIONS, version=__version__)
    server.policy = confined_policy(allow_dirs) if allow_dirs else FilePolicy(())
    for fn, title in TOOLS:
        server.add_tool(fn, title=title, description=_description(fn), annotations=READ_ONLY)
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
    mcp_tools.estimate_kv_transfer,
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


def catalog_json(kind: mcp_tools.CatalogKind) -> str:
    listing = mcp_tools.list_catalog(kind)
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


def _catalog_reader(kind: mcp_tools.CatalogKind) -> Callable[[], str]:
    def read() -> str:
        return catalog_json(kind)

    return read


# --- prompt ------------------------------------------------------------------------------------


def collect_workload(service: str = "") -> str:
    """Walk through collecting a workload from the user, then call decide_disaggregation."""
    about = f"The user describes the service as: {service}\n\n" if service else ""
    return f"""{about}Help the user decide whether to disaggregate prefill and decode for their \
LLM service. Collect the workload below, asking only for what is missing (offer the default \
when the user does not know), then call the `decide_disaggregation` tool.

1. Model: a catalog id (call `list_catalog` with kind "models"), or {{"hf_config": "path"}} to \
a local Hugging Face config.json. Weight dtype (bf16, fp8, fp4) and KV-cache dtype.
2. Engine: vllm, sglang or trtllm.
3. Prompt tokens at p50 and p99, and output tokens at p50 and p99 (from logs if possible).
   Share of prompt tokens already in the prefix cache (0 to 1; RAG and chat with system \
prompts often 0.1 to 0.5).
4. Request rate (requests per second at peak).
5. SLOs: p99 time to first token (ttft_ms) and p99 time per output token (tpot_ms).
6. GPUs: type (list_catalog "gpus"), how many for this service, GPUs per node.
7. Network between nodes: a link id (list_catalog "links", e.g. ib-ndr-400, roce-100, tcp-25) \
or {{"rdma": true|false, "gbps_per_gpu": N}}; and whether it runs on Kubernetes.
8. Team: ops maturity (low, medium, high) and orchestrator preference (any, \
kubernetes-native, managed-stack); whether they want an SLA planner or scale-to-zero.
9. Optional: GPU price per hour (cost.usd_per_gpu_hour).

Pass it as the `workload` argument, shaped like:
{json.dumps(EXAMPLE_WORKLOAD, indent=2)}

Then report `decision` and `summary`, each fired rule's title and the comparisons behind it, \
the pool sizing and any warnings. If the tool returns an error, it names the field and what \
is valid: fix that field and call again. To go further: `find_crossover` (at which prompt \
length the split starts to pay), `estimate_kv_transfer` (the KV cost on another link), \
`explain_rule` (a rule's thresholds and sources; override them with `overrides`)."""


EXAMPLE_WORKLOAD: dict[str, Any] = {
    "name": "rag-assistant",
    "model": "llama-3.3-70b",
    "weights_dtype": "fp8",
    "engine": "vllm",
    "traffic": {
        "prompt_tokens": {"p50": 8192, "p99": 16384},
        "output_tokens": {"p50": 300, "p99": 800},
        "requests_per_second": 3,
        "prefix_cache_hit_rate": 0.1,
    },
    "slo": {"ttft_ms": 3000, "tpot_ms": 10},
    "cluster": {"gpu": "h200", "gpus": 16, "gpus_per_node": 8, "network": "ib-ndr-400"},
    "ops": {"maturity": "high", "orchestrator_preference": "any"},
}


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
) -> None:
    """Block serving MCP: stdio for agents that spawn the server, streamable HTTP at /mcp."""
    server = build_server(allow_dirs)
    one_line_logging()
    if transport == "stdio":
        server.run()
        return
    from disagg_decider.mcp_http import serve_http

    serve_http(
        server,
        host,
        port,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        on_listening=on_listening,
    )


class OneLineFormatter(logging.Formatter):
    """Every record on one line: newlines folded, tracebacks reduced to the exception's name."""

    def format(self, record: logging.LogRecord) -> str:
        record = logging.makeLogRecord(record.__dict__)
        if record.exc_info:
            exc = record.exc_info[1]
            record.msg = f"{record.getMessage()} [{type(exc).__name__}: {clip(str(exc), 200)}]"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return super().format(record).replace("\r", " ").replace("\n", " | ")

    def formatException(self, ei: Any) -> str:
        return ""


def one_line_logging(level: int = logging.WARNING) -> None:
    """Replace the SDK's rich, multi-line INFO logging with one line per event on stderr."""
    import sys

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "mcp"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
        logging.getLogger(name).setLevel(level)
