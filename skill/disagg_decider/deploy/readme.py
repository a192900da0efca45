"""The README.md written next to the generated files: what, from which verdict, how to check.

A deployment is only as good as its measurement, so the README ends with the benchmark that
replays the workload's rate and lengths against the deployed endpoint and names the p99
targets to compare with.
"""

from __future__ import annotations

import math
import shlex

from disagg_decider.deploy.plan import DeployPlan
from disagg_decider.deploy.routing import dynamo_needs_always_split, ratio_note
from disagg_decider.render.text import code, inline

FILE_NOTES = {
    "dynamo-graph.yaml": "DynamoGraphDeployment: Frontend (KV router), workers, SLA planner",
    "modelservice-values.yaml": "llm-d-modelservice Helm values: roles, replicas, TP, sidecar",
    "epp-config.yaml": "EndpointPickerConfig for llm-d's scheduler (EPP)",
    "router-values.yaml": "llm-d router/EPP Helm values embedding epp-config.yaml",
    "autoscaling.yaml": "KEDA ScaledObjects, one per role",
    "launch.sh": "bare-metal launch commands for each pool and the router",
    "k8s/prefill.yaml": "Deployment + Service for the prefill pool",
    "k8s/decode.yaml": "Deployment + Service for the decode pool",
    "k8s/colocated.yaml": "Deployment + Service for the colocated pool",
    "k8s/router.yaml": "the router in front of the pools",
}
BENCH_SECONDS = 600  # ten minutes of traffic at the workload's rate

# Where each target's flag and key names were checked (repository and path, newest stored
# version; no GPU run). Upstream renames these often: recheck when you change an image.
VERIFIED_AGAINST: dict[str, list[str]] = {
    "dynamo": [
        "Frontend `--router-mode kv`, `--router-kv-events`, `--no-router-kv-events`, "
        "`--router-conditional-disagg`, `--router-conditional-disagg-config` (JSON keys "
        "`policy`, `eff_isl_threshold`, `eff_isl_ratio_threshold`): ai-dynamo/dynamo "
        "docs conditional-disaggregation.md, components/src/dynamo/frontend/frontend_args.py, "
        "examples/backends/vllm/launch/conditional_prefill_v1_smoke_test.sh",
        "vLLM workers `--disaggregation-mode`, `--kv-transfer-config` "
        '`{"kv_connector":"NixlConnector","kv_role":"kv_both"}`, `--kv-events-config` '
        "on prefill and decode: the same smoke test",
        "TensorRT-LLM workers `--model`, `--tensor-parallel-size`, `--max-batch-size`, "
        "`--max-num-tokens`, `--publish-kv-events`, `--disaggregation-mode`, "
        "`--expert-parallel-size`, `--enable-attention-dp`: "
        "components/src/dynamo/trtllm/backend_args.py",
        "SGLang `--tp N --dp N --enable-dp-attention --ep-size N --moe-a2a-backend deepep "
        "--deepep-mode low_latency|normal|auto`: sgl-project/sglang "
        "python/sglang/srt/server_args.py and its DeepEP tests; vLLM `--data-parallel-size`, "
        "`--enable-expert-parallel`: vllm/engine/arg_utils.py",
        "Multinode components `multinode.nodeCount` with the GPU limit per node; the operator "
        "injects SGLang `--dist-init-addr/--nnodes/--node-rank`, vLLM `--data-parallel-address/"
        "--data-parallel-size-local/--data-parallel-rpc-port/--data-parallel-start-rank`, and "
        "wraps TensorRT-LLM in mpirun: docs kubernetes/deployment/multinode-deployment.md and "
        "the DGD CRD in shared/schemas",
        "Planner `--config` keys (`ttft_ms`, `itl_ms`, `mode`, `optimization_target`, "
        "`pre_deployment_sweeping_mode`, `enable_*_scaling`, `*_engine_num_gpu`): "
        "components/src/dynamo/planner/config/planner_config.py (Dynamo 1.4; it ignores "
        "unknown keys, so an older planner image silently falls back to its defaults)",
    ],
    "llm-d": [
        "`prefix-based-pd-decider` `nonCachedTokens`, `disagg-profile-handler` `deciders`: "
        "llm-d/llm-d-inference-scheduler docs/disaggregation.md, deploy/config/pd-epp-config.yaml",
        "vLLM `--kv-transfer-config` NixlConnector/kv_both, `VLLM_NIXL_SIDE_CHANNEL_HOST`: "
        "llm-d/llm-d guides/pd-disaggregation",
        "`multinode: true` (LeaderWorkerSet per role), `parallelism.workers`/`dataLocal`, "
        "`acceleratorTypes.labelKey/labelValues` (required node affinity): llm-d-modelservice "
        "templates/_helpers.tpl and decode-lws.yaml; LWS env `LWS_LEADER_ADDRESS`, "
        "`LWS_WORKER_INDEX` and vLLM `--data-parallel-hybrid-lb`, `--data-parallel-size-local`, "
        "`--data-parallel-address`, `--data-parallel-rpc-port`, `--data-parallel-start-rank`: "
        "llm-d/llm-d guides/wide-ep-lws, vLLM data-parallel deployment docs",
        "KEDA metrics `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc`: llm-d/llm-d "
        "guides/workload-autoscaling/keda-epp-token-aware; `sglang:num_queue_reqs`, "
        "`sglang:token_usage`: SGLang's Prometheus names as scraped by public dashboards",
    ],
    "vllm": [
        "`--kv-transfer-config` NixlConnector/kv_both, `VLLM_NIXL_SIDE_CHANNEL_PORT/HOST`: "
        "vllm-project/vllm docs/features/nixl_connector_usage.md",
        "`vllm-router --vllm-pd-disaggregation --kv-connector nixl --prefill URL --decode URL`, "
        "`--worker-urls`: vllm-project/router src/main.rs",
    ],
    "sglang": [
        "`--disaggregation-mode`, `--disaggregation-transfer-backend nixl`, "
        "`--disaggregation-bootstrap-port`: sgl-project/sglang "
        "docs/advanced_features/pd_disaggregation.md, python/sglang/srt/server_args.py",
        "`sglang_router.launch_router --pd-disaggregation --prefill URL [PORT] --decode URL`, "
        "`--service-discovery`, `--prefill-selector`/`--decode-selector`, "
        "`--service-discovery-port` (default 80), `--service-discovery-namespace`, "
        "annotation `sglang.ai/bootstrap-port`: sgl-project/sglang router docs, "
        "sglang_router/launch_router.py",
    ],
}


def readme(
    plan: DeployPlan, files: list[str], warnings: list[str], dynamo_api: str = "v1beta1"
) -> str:
    v = plan.verdict
    # Workload-supplied text is escaped: no raw HTML, links or code-span breakouts.
    name = code(v.workload)
    out = [
        f"# {plan.target} deployment for {name}",
        "",
        f"Generated by disagg-decider from the verdict for {name} ({inline(v.model)} on "
        f"{inline(v.gpu)}). Regenerate with `decide deploy` rather than editing numbers by hand.",
        "",
        "## Verdict",
        "",
        f"**Decision: {v.decision}.** {inline(v.summary)}",
        "",
        f"Layout emitted: **{'disaggregated' if plan.disaggregated else 'colocated'}** "
        f"({plan.engine}).",
        "",
        "| pool | replicas | TP | GPUs | max seqs | max batched tokens |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for p in plan.pools:
        seqs = "engine default" if p.max_num_seqs is None else str(p.max_num_seqs)
        out.append(
            f"| {p.role} | {p.replicas} | {p.tp} | {p.gpus} | {seqs} | {p.max_num_batched_tokens} |"
        )
    out += [
        f"| **total** | | | **{plan.total_gpus}** of {plan.cluster_gpus} | | |",
        "",
        f"- SLO (p99): TTFT {plan.ttft_ms:g} ms, TPOT {plan.tpot_ms:g} ms.",
        _threshold_line(plan),
        f"- Goodput per GPU: disaggregated {v.metrics.goodput_per_gpu_disaggregated:.3f}, "
        f"colocated {v.metrics.goodput_per_gpu_colocated:.3f} req/s.",
        "- Prefill pool token budget: a p99 prompt in one step (no decode shares its steps).",
        "",
        "## Files",
        "",
    ]
    out += [f"- `{f}`: {FILE_NOTES.get(f, 'this file')}" for f in files]
    out += ["", "## Deploy", "", *_deploy_steps(plan, dynamo_api), ""]
    out += ["## Checks", "", *_checks(plan)]
    if warnings:
        out += ["", "## Warnings", ""] + [f"- {inline(w)}" for w in warnings]
    out += ["", "## Verify after deploying", "", *_benchmark(plan)]
    out += ["", "## Flags verified against", ""]
    out += [f"- {line}" for line in VERIFIED_AGAINST.get(plan.target, [])]
    return "\n".join(out) + "\n"


def _threshold_line(plan: DeployPlan) -> str:
    v = plan.verdict
    if not plan.disaggregated:
        return "- No prefill pool: every prompt is prefilled on the replica that decodes it."
    if plan.threshold_tokens == 0 and plan.target == "dynamo" and dynamo_needs_always_split(v):
        return (
            "- Routing: every prompt goes to the prefill pool. The verdict's best layout is "
            "conditional, but it keeps cache-cold prompts local, which Dynamo's router cannot "
            "(see Warnings); these are the always-disaggregated pools."
        )
    if plan.threshold_tokens == 0:
        return "- Routing: every prompt goes to the prefill pool (always-disaggregated layout)."
    k = v.conditional
    share = f", {k.share_to_prefill:.0%} of requests" if k is not None else ""
    return (
        f"- Routing threshold: prompts above {plan.threshold_tokens} uncached tokens go to the "
        f"prefill pool{share}; shorter ones are prefilled on the decode worker. Chosen for "
        "goodput per GPU: the largest threshold within 1% of the best."
    )


def _deploy_steps(plan: DeployPlan, dynamo_api: str) -> list[str]:
    secret = "kubectl create secret generic hf-token-secret --from-literal=HF_TOKEN=$HF_TOKEN"
    if plan.target == "dynamo":
        steps = [
            "Needs the Dynamo platform (operator) installed. Images are pinned defaults; "
            "replace them with `--image`.",
            "",
            "```bash",
            secret,
            "kubectl apply -f dynamo-graph.yaml",
            "```",
        ]
        if plan.engine == "trtllm" and plan.disaggregated:
            steps.append(
                "\nTensorRT-LLM picks its KV transfer backend in its engine config: add "
                "`cache_transceiver_config: {backend: NIXL}` via `--extra-engine-args`."
            )
        if dynamo_api == "v1alpha1":
            steps.append(
                "\n`nvidia.com/v1alpha1` is deprecated; `--dynamo-api v1beta1` is current."
            )
        if plan.disaggregated and plan.engine == "sglang":
            steps.append(
                "\nDynamo's conditional disaggregation does not support SGLang yet, so it is "
                "omitted: every prompt is prefilled remotely."
            )
        elif plan.disaggregated and plan.threshold_tokens > 0:
            steps.append(ratio_note(plan.verdict))
        if plan.disaggregated:
            steps.append(
                "\nThe SLA planner adjusts replicas at run time from the TTFT/ITL targets with "
                "load-based scaling (it learns step times online); the replicas above are the "
                "starting point sized for the declared rate. Throughput-based scaling also needs "
                "a pre-deployment sweep: set `pre_deployment_sweeping_mode` to `rapid` or "
                "`thorough` and `enable_throughput_scaling` to true in the planner's `--config`."
            )
        else:
            steps.append(
                "\nNo planner is emitted for the colocated layout; the replicas above are sized "
                "for the declared rate."
            )
        return steps
    lws_note = (
        [
            "Replicas wider than a node run as LeaderWorkerSets: install the LWS controller "
            "(kubernetes-sigs/lws) first.",
            "",
        ]
        if plan.multinode and plan.target != "dynamo"
        else []
    )
    if plan.target == "llm-d":
        return [
            *lws_note,
            "Needs llm-d's gateway and router charts, KEDA and Prometheus.",
            "",
            "```bash",
            secret,
            "helm install model llm-d-modelservice/llm-d-modelservice -f modelservice-values.yaml",
            "helm install router <llm-d router chart> -f router-values.yaml",
            "kubectl apply -f autoscaling.yaml   # after setting <role>.autoscaling.enabled: true",
            "```",
        ]
    return [
        *lws_note,
        "Kubernetes:",
        "",
        "```bash",
        secret,
        "kubectl apply -f k8s/",
        "```",
        "",
        "Bare metal: `./launch.sh` with no argument prints its usage; `./launch.sh local` starts "
        "everything on one node when it fits.",
    ]


def _checks(plan: DeployPlan) -> list[str]:
    lines = [
        f"- Each replica fits one node: max TP {max(p.tp for p in plan.pools)} <= "
        f"{plan.gpus_per_node} GPUs per node."
        if not plan.multinode
        else "- Replicas wider than a node fill whole nodes: "
        + ", ".join(
            f"{p.role} {p.layout} = {p.nodes} pods x {p.gpus_per_pod} GPUs"
            for p in plan.pools
            if p.nodes > 1
        )
        + "; the expert all-to-all crosses nodes over RDMA (DeepEP needs every NIC able to "
        "reach every NIC of the other nodes).",
        f"- The pools fit the cluster: {plan.total_gpus} <= {plan.cluster_gpus} GPUs.",
    ]
    lines += [
        f"- {p.role} pods are pinned to `{p.node_selector[0]}={p.node_selector[1]}` nodes; check "
        f"the value with `kubectl get nodes -L {p.node_selector[0]}` (--gpu-product replaces it)."
        for p in plan.pools
        if p.node_selector
    ]
    if plan.disaggregated and plan.engine == "vllm":
        lines.append("- vLLM NIXL: decode TP >= prefill TP.")
    if plan.disaggregated and plan.engine == "sglang":
        lines.append("- SGLang P/D: equal TP on both sides.")
    if plan.disaggregated:
        lines.append(
            "- KV moves over NIXL: give the pods RDMA (e.g. `rdma/ib` resources and "
            "`IPC_LOCK`) per your cluster's device plugin, or NIXL falls back to TCP."
        )
    return lines


def _benchmark(plan: DeployPlan) -> list[str]:
    v = plan.verdict
    w_prompt, w_out, rate = plan.prompt_tokens_p50, plan.output_tokens_p50, plan.requests_per_second
    requests = min(10000, max(100, math.ceil(rate * BENCH_SECONDS)))
    served = shlex.quote(plan.served_model_name)  # a shell word, whatever the name holds
    uncached = round(v.metrics.effective_prompt_tokens)
    prefix = max(0, w_prompt - uncached)
    return [
        f"Replay the workload ({rate:g} req/s, {w_prompt}-token prompts, {w_out}-token outputs, "
        f"{requests} requests) against the endpoint and compare p99 TTFT with "
        f"{plan.ttft_ms:g} ms and p99 TPOT with {plan.tpot_ms:g} ms:",
        "",
        "```bash",
        "vllm bench serve --backend openai --base-url http://$ENDPOINT:8000 "
        f"--endpoint /v1/completions --model {served} --dataset-name random "
        f"--random-prefix-len {prefix} --random-input-len {w_prompt - prefix} "
        f"--random-output-len {w_out} --ignore-eos --request-rate {rate:g} "
        f"--num-prompts {requests} --percentile-metrics ttft,tpot,itl --metric-percentiles 50,99",
        "```",
        "",
        "or with AIPerf:",
        "",
        "```bash",
        f"aiperf profile --model {served} --url http://$ENDPOINT:8000 "
        "--endpoint-type chat --streaming "
        f"--synthetic-input-tokens-mean {w_prompt} --output-tokens-mean {w_out} "
        f"--request-rate {rate:g} --request-count {requests}",
        "```",
        "",
        "`--random-prefix-len` shares a prefix across requests to mimic the workload's prefix-"
        "cache hit rate. Fixed lengths at the p50 test the typical request; the p99 targets "
        "also depend on the tail of your real traffic.",
    ]
