"""The MCP server's tools, resources and prompt, through the SDK's in-memory client.

Every call goes through a real `mcp.Client` (argument validation, output-schema validation,
error mapping), and the answers are checked against the same calculator and rulebook the CLI
uses, so the agent and the command line cannot drift apart.
"""

import json
from pathlib import Path

import pytest
import yaml
from mcp import Client

from disagg_decider import catalog, mcp_server
from disagg_decider.calc.crossover import CROSSOVER_POINTS
from disagg_decider.decide import decide_file
from disagg_decider.rules.loader import shipped
from disagg_decider.verdict import Verdict
from tests.conftest import DELETE, EXAMPLES, LLAMA_8B_CONFIG, ROOT, edited_example
from tests.conftest import RAG_EXAMPLE as RAG

TCP = ROOT / "examples" / "tcp-25gbe-colocate.yaml"
TOOL_NAMES = {
    "decide_disaggregation",
    "estimate_kv_transfer",
    "find_crossover",
    "frontier",
    "list_catalog",
    "explain_rule",
}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
async def client():
    async with Client(mcp_server.build_server()) as c:
        yield c


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


async def call_ok(client: Client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    assert result.is_error is False, result.content[0].text
    return result.structured_content


async def call_error(client: Client, tool: str, args: dict) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error is True, result.structured_content
    return result.content[0].text


# --- listing ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_every_tool_is_read_only_with_an_output_schema_and_a_description(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOL_NAMES
    for tool in tools.values():
        assert tool.annotations.read_only_hint is True
        assert tool.annotations.destructive_hint is not True
        assert tool.annotations.open_world_hint is False
        assert tool.output_schema and tool.output_schema["type"] == "object"
        assert "Call it" in tool.description, tool.name  # says when to call it
    decide_schema = tools["decide_disaggregation"].output_schema
    assert {"decision", "fired_rules", "metrics", "sizing", "thresholds", "warnings"} <= set(
        decide_schema["properties"]
    )
    workload_schema = tools["decide_disaggregation"].input_schema["properties"]["workload"]
    assert "traffic" in json.dumps(workload_schema) and "$ref" in json.dumps(workload_schema)
    # The catalog ids an agent may pass are in the description it reads.
    assert "llama-3.3-70b" in tools["decide_disaggregation"].description
    assert "ib-ndr-400" in tools["estimate_kv_transfer"].description


# --- decide_disaggregation --------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
async def test_decide_tool_returns_the_same_verdict_as_the_pipeline(client, path):
    got = await call_ok(client, "decide_disaggregation", {"workload": load(path)})
    expected = decide_file(path).model_dump(mode="json")
    assert got == expected
    Verdict.model_validate(got)


@pytest.mark.anyio
async def test_decide_tool_applies_parameter_overrides(client):
    plain = await call_ok(client, "decide_disaggregation", {"workload": load(RAG)})
    assert plain["decision"] != "colocate"
    assert any(r["id"] == "DSG007" for r in plain["fired_rules"])
    gain = plain["metrics"]["gain"]
    raised = await call_ok(
        client,
        "decide_disaggregation",
        {"workload": load(RAG), "overrides": {"min_gain": round(gain + 0.5, 2)}},
    )
    assert raised["thresholds"]["min_gain"] == round(gain + 0.5, 2)
    assert not any(r["id"] == "DSG007" for r in raised["fired_rules"])
    assert any("min_gain" in note for note in raised["overrides_applied"])


@pytest.mark.anyio
async def test_hf_config_is_read_only_under_an_allowed_dir_relative_to_the_first(tmp_path):
    (tmp_path / "my-model").mkdir()
    (tmp_path / "my-model" / "config.json").write_text(json.dumps(LLAMA_8B_CONFIG))
    workload = load(ROOT / "examples" / "chat-short-colocate.yaml")
    async with Client(mcp_server.build_server(allow_dirs=[tmp_path])) as allowed:
        by_id = await call_ok(allowed, "decide_disaggregation", {"workload": workload})
        workload["model"] = {"hf_config": "my-model/config.json"}
        by_file = await call_ok(allowed, "decide_disaggregation", {"workload": workload})
    assert by_file["metrics"]["kv_bytes_per_token"] == by_id["metrics"]["kv_bytes_per_token"]
    assert by_file["decision"] == by_id["decision"]
    async with Client(mcp_server.build_server()) as default:
        message = await call_error(default, "decide_disaggregation", {"workload": workload})
    assert "reads no local files" in message and "--allow-dir" in message


# --- bad arguments ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("workload", "must_say"),
    [
        (
            edited_example(**{"traffic.prefix_cache_hit_rate": 1.5}),
            ["traffic.prefix_cache_hit_rate", "1.5"],
        ),
        (edited_example(slo=DELETE), ["workload.slo", "missing"]),
        (
            edited_example(**{"cluster.gpus": "many"}),
            ["workload.cluster.gpus", "integer", "'many'"],
        ),
        (edited_example(**{"cluster.gpuz": 8}), ["cluster.gpuz", "did you mean 'gpu'"]),
        (edited_example(engine="tgi"), ["workload.engine", "vllm", "'tgi'"]),
        (edited_example(model="llama-70b"), ["unknown model 'llama-70b'", "llama-3.3-70b"]),
        (edited_example(**{"cluster.gpu": "h300"}), ["unknown gpu 'h300'"]),
        (edited_example(**{"cluster.network": "ib-800"}), ["unknown network link 'ib-800'"]),
        (edited_example(**{"traffic.prompt_tokens": {"p50": 9000, "p99": 100}}), ["p99", "p50"]),
    ],
    ids=[
        "hit-rate-out-of-range",
        "missing-slo",
        "wrong-type",
        "unknown-key",
        "bad-enum",
        "unknown-model",
        "unknown-gpu",
        "unknown-link",
        "p99-below-p50",
    ],
)
async def test_bad_workloads_come_back_as_actionable_tool_errors(client, workload, must_say):
    message = await call_error(client, "decide_disaggregation", {"workload": workload})
    for phrase in must_say:
        assert phrase in message, message
    assert "Traceback" not in message


@pytest.mark.anyio
async def test_missing_workload_and_unknown_override_are_tool_errors(client):
    message = await call_error(client, "decide_disaggregation", {})
    assert "workload: required field is missing" in message
    message = await call_error(
        client, "decide_disaggregation", {"workload": load(RAG), "overrides": {"min_gian": 1.2}}
    )
    assert "unknown rule parameter 'min_gian'" in message and "min_gain" in message


@pytest.mark.anyio
async def test_the_server_keeps_serving_after_a_bad_call(client):
    await call_error(client, "decide_disaggregation", {"workload": {"name": "x"}})
    await call_error(client, "estimate_kv_transfer", {"model": "llama-3.3-70b"})
    good = await call_ok(client, "decide_disaggregation", {"workload": load(RAG)})
    assert good["decision"] == decide_file(RAG).decision


# --- estimate_kv_transfer ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_kv_transfer_matches_the_verdicts_metrics(client):
    """Same model, tokens, dtype, link and TPs as the verdict's sized pools: same figures."""
    verdict = decide_file(TCP)
    workload = load(TCP)
    assert verdict.metrics.kv_transfer_path == "network"
    assert verdict.metrics.effective_prompt_tokens == workload["traffic"]["prompt_tokens"]["p50"]
    got = await call_ok(
        client,
        "estimate_kv_transfer",
        {
            "model": workload["model"],
            "prompt_tokens": int(verdict.metrics.effective_prompt_tokens),
            "kv_dtype": "fp8",  # fp8 weights imply an fp8 KV cache
            "link": workload["cluster"]["network"],
            "gpu": workload["cluster"]["gpu"],
            "prefill_tp": verdict.sizing.prefill_tp,
            "decode_tp": verdict.sizing.decode_tp,
            "weights_dtype": workload["weights_dtype"],
            "engine": workload.get("engine", "vllm"),
        },
    )
    m = verdict.metrics
    assert got["kv_bytes"] == pytest.approx(m.kv_bytes_per_request, rel=1e-12)
    assert got["effective_gb_per_s"] == pytest.approx(m.kv_transfer_gb_per_s, rel=1e-12)
    assert got["serialized_ms"] == pytest.approx(m.kv_transfer_serialized_ms, rel=1e-9)
    assert got["layerwise_exposed_ms"] == pytest.approx(m.kv_transfer_layerwise_ms, rel=1e-9)
    assert got["prefill_ms"] == pytest.approx(m.prefill_ms, rel=1e-9)


@pytest.mark.anyio
async def test_kv_transfer_bandwidth_in_bits_and_bytes_agree(client):
    common = {"model": "llama-3.3-70b", "prompt_tokens": 8192, "kv_dtype": "bf16"}
    in_bits = await call_ok(client, "estimate_kv_transfer", {**common, "link_gbps": 400})
    in_bytes = await call_ok(client, "estimate_kv_transfer", {**common, "link_gb_per_s": 50})
    assert in_bits["serialized_ms"] == pytest.approx(in_bytes["serialized_ms"])
    # Llama-3.3-70B: 80 layers x 8 KV heads x 128 dims x K,V x 2 bytes = 320 KiB per token.
    assert in_bits["kv_bytes_per_token"] == 80 * 8 * 128 * 2 * 2
    # A raw bandwidth is taken as measured: 8192 x 327680 B over 50 GB/s = 53.7 ms.
    assert in_bits["serialized_ms"] == pytest.approx(8192 * 327680 / 50e9 * 1e3)
    assert in_bits["prefill_ms"] is None and in_bits["layerwise_exposed_ms"] is None
    assert any("no gpu" in n for n in in_bits["notes"])


@pytest.mark.anyio
async def test_kv_transfer_layerwise_hides_most_of_the_transfer_behind_prefill(client):
    got = await call_ok(
        client,
        "estimate_kv_transfer",
        {
            "model": "llama-3.3-70b",
            "prompt_tokens": 8192,
            "kv_dtype": "fp8",
            "link": "ib-ndr-400",
            "gpu": "h200",
            "prefill_tp": 4,
            "weights_dtype": "fp8",
        },
    )
    assert got["parallel_links"] == 4 and got["link_efficiency"] == 0.9
    assert got["effective_gb_per_s"] == pytest.approx(400 / 8 * 0.9 * 4)
    assert got["prefill_ms"] > got["serialized_ms"] > got["layerwise_exposed_ms"] > 0


@pytest.mark.anyio
async def test_kv_transfer_nvlink_takes_bandwidth_from_the_gpu(client):
    args = {"model": "llama-3.1-8b", "prompt_tokens": 4096, "link": "nvlink"}
    message = await call_error(client, "estimate_kv_transfer", args)
    assert "pass gpu" in message
    got = await call_ok(client, "estimate_kv_transfer", {**args, "gpu": "h100"})
    assert got["link_gbps_per_gpu"] == catalog.get_gpu("h100").scaleup_gb_per_s * 8


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "must_say"),
    [
        ({"link": "ib-ndr-400", "link_gbps": 400}, "exactly one of link"),
        ({}, "exactly one of link"),
        ({"link": "ib-ndr-400", "prompt_tokens": 0}, "prompt_tokens"),
        ({"link": "ib-ndr-400", "kv_dtype": "int4"}, "kv_dtype"),
        ({"link": "ib-ndr-400", "link_efficiency": 1.5}, "link_efficiency"),
        ({"link": "infiniband"}, "unknown network link 'infiniband'"),
        ({"link": "ib-ndr-400", "model": "gpt-5"}, "unknown model 'gpt-5'"),
    ],
)
async def test_kv_transfer_bad_arguments(client, args, must_say):
    base = {"model": "llama-3.3-70b", "prompt_tokens": 8192}
    message = await call_error(client, "estimate_kv_transfer", {**base, **args})
    assert must_say in message, message


# --- find_crossover ---------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("path", [RAG, TCP], ids=lambda p: p.stem)
async def test_crossover_on_the_calculators_grid_matches_the_verdict(client, path):
    verdict = decide_file(path)
    top = min(catalog.get_model(verdict.model).max_context_tokens, 131072)
    got = await call_ok(
        client,
        "find_crossover",
        {
            "workload": load(path),
            "min_prompt_tokens": 64,
            "max_prompt_tokens": top,
            "steps": CROSSOVER_POINTS,
        },
    )
    assert got["crossover_prompt_tokens"] == verdict.metrics.crossover_prompt_tokens
    own = load(path)["traffic"]["prompt_tokens"]["p50"]
    assert len(got["curve"]) in (CROSSOVER_POINTS, CROSSOVER_POINTS + 1)
    assert own in [p["prompt_tokens"] for p in got["curve"]]
    lengths = [p["prompt_tokens"] for p in got["curve"]]
    assert lengths == sorted(lengths) and lengths[0] == 64 and lengths[-1] == top
    for point in got["curve"]:
        wins = point["outcome"] == "disaggregated-only" or (point["gain"] or 0) > 1
        assert point["disaggregation_wins"] == wins
        assert (point["gain"] is None) == (point["outcome"] != "both-meet-slo")
    winners = [p["prompt_tokens"] for p in got["curve"] if p["disaggregation_wins"]]
    covered = [x for lo, hi in got["winning_ranges"] for x in lengths if lo <= x <= hi]
    assert covered == winners


@pytest.mark.anyio
async def test_crossover_rejects_an_empty_range(client):
    args = {"workload": load(RAG), "min_prompt_tokens": 4096, "max_prompt_tokens": 1024}
    message = await call_error(client, "find_crossover", args)
    assert "max_prompt_tokens (1024) must be greater than min_prompt_tokens (4096)" in message
    message = await call_error(client, "find_crossover", {"workload": load(RAG), "steps": 1})
    assert "steps" in message


# --- frontier ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_frontier_tool_returns_the_sweep_the_cli_prints(client):
    from disagg_decider.frontier_sweep import Sweep, frontier
    from disagg_decider.workload import load_workload

    args = {"workload": load(RAG), "points": 3, "basis": "static"}
    got = await call_ok(client, "frontier", args)
    want = frontier(load_workload(RAG), RAG.parent, Sweep(points=3, basis="static"))
    assert got == json.loads(want.model_dump_json())
    assert got["basis"] == "static" and got["band"]["target_inside"] is True
    assert [r["winner"] for r in got["rows"]] == [r.winner for r in want.rows]


@pytest.mark.anyio
async def test_frontier_tool_rejects_bounds_in_the_wrong_order(client):
    args = {
        "workload": load(RAG),
        "low_tokens_per_s_per_user": 100,
        "high_tokens_per_s_per_user": 50,
    }
    message = await call_error(client, "frontier", args)
    assert "low_tokens_per_s_per_user) 100 must be below" in message


# --- list_catalog and explain_rule ------------------------------------------------------------


@pytest.mark.anyio
async def test_list_catalog_returns_each_record_once_with_sources(client):
    got = await call_ok(client, "list_catalog", {"kind": "gpus"})
    assert got["models"] is None and got["links"] is None
    ids = [g["id"] for g in got["gpus"]]
    assert sorted(ids) == sorted({g.id for g in catalog.gpus().values()})
    h200 = next(g for g in got["gpus"] if g["id"] == "h200")
    assert h200["hbm_gb"] == catalog.get_gpu("h200").hbm_gb and h200["sources"]
    everything = await call_ok(client, "list_catalog", {})
    assert everything["gpus"] and everything["models"] and everything["links"]
    message = await call_error(client, "list_catalog", {"kind": "tpus"})
    assert "kind" in message and "gpus" in message


@pytest.mark.anyio
async def test_explain_rule_gives_parameters_rationale_and_references(client):
    loaded = shipped()
    for rule in loaded.book.rules:
        got = await call_ok(client, "explain_rule", {"rule_id": rule.id})
        assert got["id"] == rule.id and got["references"]
        assert got["rationale"] == rule.rationale.strip()
        for p in got["parameters"]:
            assert p["value"] == loaded.book.parameters[p["name"]].value
            assert p["name"] in json.dumps(got["when"])
    by_name = await call_ok(client, "explain_rule", {"rule_id": "gain-above-minimum"})
    assert by_name["id"] == "DSG007"
    assert [p["name"] for p in by_name["parameters"]] == ["min_gain"]
    message = await call_error(client, "explain_rule", {"rule_id": "DSG070"})
    assert "unknown rule 'DSG070'" in message


# --- resources and prompt ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_rulebook_and_catalog_resources(client):
    uris = {str(r.uri) for r in (await client.list_resources()).resources}
    assert {uri for uri, _, _ in mcp_server.SKILL_RESOURCES} <= uris
    rule_files = sorted((ROOT / "rules").glob("*.yaml"))
    for path in rule_files:
        res = await client.read_resource(f"disagg://rules/{path.name}")
        assert res.contents[0].text == path.read_text()
    res = await client.read_resource("disagg://catalog/links.json")
    links = json.loads(res.contents[0].text)["links"]
    assert {entry["id"] for entry in links} == {link.id for link in catalog.links().values()}


@pytest.mark.anyio
@pytest.mark.parametrize(("uri", "name", "relative"), mcp_server.SKILL_RESOURCES)
async def test_skill_resources_serve_the_rendered_file_or_say_how_to_render(
    client, tmp_path, monkeypatch, uri, name, relative
):
    monkeypatch.setattr(mcp_server, "output_dirs", lambda: [tmp_path / "outputs"])
    res = await client.read_resource(uri)
    assert "not rendered yet" in res.contents[0].text and "decide render" in res.contents[0].text
    assert relative in res.contents[0].text
    rendered = tmp_path / "outputs" / relative
    rendered.parent.mkdir(parents=True)
    rendered.write_text("---\nname: disaggregation-decider\n---\n# Rendered\n")
    res = await client.read_resource(uri)
    assert res.contents[0].text == rendered.read_text()
    assert res.contents[0].mime_type == "text/markdown"


@pytest.mark.anyio
async def test_skill_resource_reads_the_checkouts_outputs_when_rendered(client):
    res = await client.read_resource(mcp_server.SKILL_DOC_URI)
    rendered = ROOT / "outputs" / "skill-disaggregation-decider.md"
    if rendered.is_file():
        assert res.contents[0].text == rendered.read_text()
    else:
        assert res.contents[0].text.startswith("# Skill not rendered yet")


@pytest.mark.anyio
async def test_prompt_walks_through_the_workload_and_its_example_is_valid(client):
    prompt = await client.get_prompt("collect_workload", {"service": "70B RAG assistant"})
    text = prompt.messages[0].content.text
    assert "70B RAG assistant" in text
    for must in ("p50", "p99", "ttft_ms", "tpot_ms", "decide_disaggregation", "maturity"):
        assert must in text
    # The example the prompt shows is a workload the tool accepts.
    got = await call_ok(client, "decide_disaggregation", {"workload": mcp_server.EXAMPLE_WORKLOAD})
    assert got["workload"] == "rag-assistant"


def test_readme_registration_snippets_are_valid_json_that_runs_decide_mcp():
    """The JSON users paste into .mcp.json, Cursor and VS Code must parse and start the server."""
    readme = (ROOT / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in readme.split("```json\n")[1:]]
    entries = []
    for block in blocks:
        data = json.loads(block)
        for wrapper in ("mcpServers", "servers"):
            if "disagg-decider" in data.get(wrapper, {}):
                entries.append((wrapper, data[wrapper]["disagg-decider"]))
    assert {w for w, _ in entries} == {"mcpServers", "servers"} and len(entries) >= 3
    for wrapper, entry in entries:
        assert Path(entry["command"]).name == "decide" and entry["args"] == ["mcp"]
        if wrapper == "servers":  # VS Code requires the type
            assert entry["type"] == "stdio"
