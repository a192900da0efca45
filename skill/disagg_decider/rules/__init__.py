"""The rulebook: declarative YAML rules, their schema, loader and evaluation engine."""
