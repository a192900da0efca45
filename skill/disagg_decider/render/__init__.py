"""Markdown front ends: the agent skill file and per-workload design-doc reports.

Everything here reads the rulebook, the catalog, the calculator and the `Verdict`; nothing
computes physics. `decide render` regenerates `outputs/` and `decide render --check` fails when
the committed files drift from what the current rules and code produce.

Kept import-light on purpose: jinja2 and numpy load only when something is rendered.
"""
