"""disagg-decider: should prefill and decode run on separate GPU pools?

Data flows one way: workload file -> `Workload` -> calculator metrics -> rulebook -> `Verdict`
-> renderers, MCP server and deploy emitters.
"""

__version__ = "0.1.0"
