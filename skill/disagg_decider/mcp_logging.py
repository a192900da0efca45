"""One line per log event on stderr for the MCP server (stdout is the protocol on stdio)."""

from __future__ import annotations

import logging
import sys
from typing import Any

from disagg_decider.errors import clip


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
