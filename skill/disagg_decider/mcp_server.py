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
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import ToolAnnotations
from pydantic import ValidationError

from disagg_decider import __version__, catalog, mcp_tools
from disagg_decider.errors import UserError
from disagg_decider.rules.loader import rulebook_dir
from disagg_decider.workload import format_validation_error

SERVER_NAME = "disagg-decider"
SKILL_URI = "skill://disaggregation-decider/SKILL.md"
SKILL_DOC_URI = "disagg://skill/skill-disaggregation-decider.md"
SKILL_RESOURCES = (  # (uri, name, path under outputs/), as `decide render` writes them
    (SKILL_URI, "disaggregation-decider-skill", "disaggregation-decider/SKILL.md"),
    (SKILL_DOC_URI, "skill-disaggregation-decider", "skill-disaggregation-decider.md"),
)
REPO_ROOT = Path(__file__).resolve().parents[2]  # a checkout: skill/disagg_decider/ -> root

INSTRUCTIONS = """\
Decides whether an LLM serving workload should split prefill and decode onto separate GPU pools
(disaggregated serving on NVIDIA Dynamo or llm-d) or stay colocated, and sizes the pools.
Start with decide_disaggregation (the prompt collect_workload lists what to ask the user);
drill in with find_crossover (prompt length where the split starts to pay),
estimate_kv_transfer (KV bytes and transfer time on a link), explain_rule (why a rule fired)
and list_catalog (valid model, GPU and link ids). All tools are read-only and deterministic.
"""

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

TOOLS: tuple[tuple[Callable[..., Any], str], ...] = (
    (mcp_tools.decide_disaggregation, "Decide prefill/decode disaggregation for a workload"),
    (mcp_tools.estimate_kv_transfer, "Estimate KV-cache transfer bytes and time"),
    (mcp_tools.find_crossover, "Find the prompt length where disaggregation starts to win"),
    (mcp_tools.list_catalog, "List known GPUs, models and network links"),
    (mcp_tools.explain_rule, "Explain one rule of the rulebook"),
)


class DeciderServer(MCPServer):
    """An MCPServer whose tool errors name the field and what would be valid.

    The SDK reports argument validation failures as pydantic's raw text and hides the message
    of any other exception (it cannot know it is safe to show). Our `UserError`s are written for
    users, and `format_validation_error` lists each bad field on one line, so both reach the
    agent verbatim; anything else stays a generic error, logged on the server.
    """

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, UserError):
                raise ToolError(f"{name}: {cause}") from cause
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                tool = self._tool_manager.get_tool(name)
                root = tool.fn_metadata.arg_model if tool is not None else None
                raise ToolError(_validation_message(name, cause, root)) from cause
            raise


def _validation_message(tool_name: str, exc: ValidationError, root: Any) -> str:
    text = format_validation_error(exc, f"{tool_name} arguments", root)
    return text + "\nFix the fields named above and call the tool again."


def build_server() -> DeciderServer:
    server = DeciderServer(SERVER_NAME, instructions=INSTRUCTIONS, version=__version__)
    for fn, title in TOOLS:
        server.add_tool(fn, title=title, description=_description(fn), annotations=READ_ONLY)
    _add_resources(server)
    server.prompt(name="collect_workload", title="Collect a workload and decide")(collect_workload)
    return server


TAKES_CATALOG_IDS = (
    mcp_tools.decide_disaggregation,
    mcp_tools.estimate_kv_transfer,
    mcp_tools.find_crossover,
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
            return (folder / relative).read_text(encoding="utf-8")
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


def serve(transport: Transport = "stdio", host: str = "127.0.0.1", port: int = 8000) -> None:
    """Block serving MCP: stdio for agents that spawn the server, streamable HTTP at /mcp."""
    server = build_server()
    if transport == "stdio":
        server.run()
    else:
        server.run(transport="streamable-http", host=host, port=port)
