"""Turn a Verdict into files a team can deploy: Dynamo, llm-d, plain vLLM or SGLang.

Data flows one way: `plan.make_plan` reads the Verdict (and the workload for names, SLOs and
lengths) into a `DeployPlan`; `plan_checks.check` refuses layouts that would not run; each target
module (`dynamo`, `llmd`, `engines`) turns the plan into file texts; `readme` explains them;
`writer` puts them on disk without overwriting anything unless asked. No module here
re-derives a replica count, a TP degree or a threshold: they all come from the Verdict.
"""

TARGETS = ("dynamo", "llm-d", "vllm", "sglang")
