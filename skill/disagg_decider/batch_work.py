"""One chunk of `decide batch`, as a worker process runs it: entries in, finished rows out.

A chunk is decided with one `decide_many` call (workloads sharing a model, GPU and engine are
searched together) and each verdict is turned into its output row here, in the worker, so the
parent only writes strings in order. A workload that cannot be read or decided becomes a row
that carries its error; the rest of the chunk is unaffected.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from disagg_decider.batch_inputs import Entry
from disagg_decider.errors import UserError, clip
from disagg_decider.gcpause import paused_collector

CSV_COLUMNS = (
    "file",
    "workload",
    "decision",
    "feasible",
    "layout",
    "gain",
    "colocated",
    "split",
    "crossover_prompt_tokens",
    "goodput_per_gpu_colocated",
    "goodput_per_gpu_disaggregated",
    "kv_transfer_ms",
    "error",
)


@dataclass(frozen=True)
class Options:
    """What every workload of the batch shares (the command's flags), sent with each chunk."""

    fmt: str  # table | jsonl | json | csv
    rule_files: tuple[str, ...] = ()
    overrides: tuple[tuple[str, str], ...] = ()
    calibration: str | None = None


@dataclass
class Done:
    """A decided chunk: one row per entry (a string, or table cells), and the errors."""

    rows: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    infeasible: int = 0


def decide_chunk(job: tuple[list[Entry], Options]) -> Done:
    """Decide a chunk of entries and format their rows (the function the workers run).

    Each slice's verdicts become rows (strings) as soon as it is decided, so a worker holds
    one slice's verdicts at a time, whatever the chunk's length. The cycle collector stays
    paused for the whole chunk, not only inside `decide_many`: reading the workloads and
    dumping the verdicts build no cycles either, and with it on, every slice's verdicts
    (hundreds of objects each) were walked again by the collections their rows set off."""
    with paused_collector():
        return _decided_chunk(*job)


def _decided_chunk(entries: list[Entry], options: Options) -> Done:
    fmt = options.fmt
    rows: list[Any] = [None] * len(entries)
    done = Done()
    loaded: list[tuple[int, Any]] = []
    for i, entry in enumerate(entries):
        try:
            loaded.append((i, _load(entry)))
        except Exception as exc:  # one bad workload is its own row
            rows[i] = _error(done, entry.label, _message(exc), fmt)
    for members, verdicts in _decide(
        [w for _, w in loaded], [Path(entries[i].base_dir) for i, _ in loaded], options
    ):
        for k, outcome in zip(members, verdicts, strict=True):
            i = loaded[k][0]
            if isinstance(outcome, str):
                rows[i] = _error(done, entries[i].label, outcome, fmt)
            else:
                verdict, doc = outcome
                done.infeasible += not verdict.feasible
                rows[i] = verdict_row(entries[i].label, verdict, fmt, doc)
    done.rows = rows
    return done


def _error(done: Done, label: str, message: str, fmt: str) -> Any:
    done.errors.append(message)
    return error_row(label, message, fmt)


def _load(entry: Entry):
    from disagg_decider.workload import load_workload, parse_workload

    if entry.error is not None:
        raise UserError(entry.error)
    if entry.path is not None:
        return load_workload(Path(entry.path))
    try:
        data = json.loads(entry.text or "")
    except json.JSONDecodeError as exc:
        raise UserError(f"{entry.label}: not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise UserError(f"{entry.label}: JSON nested too deeply") from None
    return parse_workload(data, entry.label)


# Workloads per `decide_many` call. A call searches the workloads that share an engine
# together (the larger the group, the less numpy's fixed cost per call weighs), but its
# intermediate arrays grow with the group: 256 alike took ~440 MB, 64 about 130 MB.
GROUP_WORKLOADS = 64


def _decide(workloads: list, dirs: list[Path], options: Options) -> Iterator[tuple[list, list]]:
    """(indices, verdicts or error messages) for the chunk's loaded workloads, a slice at a time.

    The chunk is cut by engine (model, GPU, engine, weights) into slices of at most
    `GROUP_WORKLOADS`: a chunk of a mixed fleet keeps its groups whole, a chunk of one kind
    keeps its memory bounded. A slice that fails as a whole is decided one workload at a
    time, so that only the workload at fault gets an error."""
    for members in _slices(workloads):
        try:
            verdicts = _decide_many(
                [workloads[i] for i in members], [dirs[i] for i in members], options
            )
        except Exception:  # find the workload at fault
            verdicts = [_decide_alone(workloads[i], dirs[i], options) for i in members]
        yield members, verdicts


def _slices(workloads: list) -> list[list[int]]:
    """Indices grouped by engine, in first-seen order, each group cut into slices."""
    groups: dict[tuple, list[int]] = {}
    for i, w in enumerate(workloads):
        model = w.model if isinstance(w.model, str) else repr(w.model)
        groups.setdefault((model, w.cluster.gpu, w.engine, w.weights_dtype), []).append(i)
    return [
        members[start : start + GROUP_WORKLOADS]
        for members in groups.values()
        for start in range(0, len(members), GROUP_WORKLOADS)
    ]


def _decide_alone(workload, base_dir: Path, options: Options) -> Any:
    try:
        return _decide_many([workload], [base_dir], options)[0]
    except Exception as exc:  # that workload's row carries it
        return _message(exc)


def _decide_many(workloads: list, dirs: list[Path], options: Options) -> list[tuple[Any, Any]]:
    """(verdict, its JSON) per workload for the JSON formats, (verdict, None) for the others:
    their rows show no provenance, so their verdicts are not labelled (`decide_many`)."""
    from disagg_decider.decide import decide_many, decide_many_json

    shared: dict[str, Any] = {
        "base_dir": dirs,
        "rulebook": _rulebook(options.rule_files),
        "overrides": dict(options.overrides),
        "calibration": Path(options.calibration) if options.calibration else None,
    }
    if options.fmt in JSON_FORMATS:
        return decide_many_json(workloads, **shared)
    return [(v, None) for v in decide_many(workloads, provenance=False, **shared)]


@lru_cache(maxsize=4)
def _rulebook(rule_files: tuple[str, ...]):
    """The shipped rulebook plus the --rules files, loaded once per process."""
    from disagg_decider.rules.loader import with_extra

    return with_extra([Path(p) for p in rule_files])


def _message(exc: BaseException) -> str:
    """What a row's "error" says: the user's mistake as `decide` would print it, else a bug."""
    if isinstance(exc, UserError):
        return str(exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}"
    return f"internal error ({type(exc).__name__}: {clip(str(exc), 200)}); please report it"


# --- rows -----------------------------------------------------------------------------------


JSON_FORMATS = ("jsonl", "json")


def verdict_row(label: str, verdict, fmt: str, doc: dict[str, Any] | None = None) -> Any:
    """The verdict's row; `doc`, where given, is its JSON (`decide.decide_many_json`)."""
    if fmt in JSON_FORMATS:
        if doc is None:
            doc = verdict.model_dump(mode="json")
        return _json_row({"file": label, **doc}, fmt)
    if fmt == "csv":
        return csv_line(_csv_cells(label, verdict))
    return table_cells(label, verdict)


def error_row(label: str, message: str, fmt: str) -> Any:
    if fmt in JSON_FORMATS:
        return _json_row({"file": label, "error": message}, fmt)
    if fmt == "csv":
        return csv_line([label, *[""] * (len(CSV_COLUMNS) - 2), message])
    return [Path(label).stem, "error", "-", "-", "-", "-"]


def _json_row(item: dict, fmt: str) -> str:
    from disagg_decider.batch_json import indented_row, line_row

    return line_row(item) if fmt == "jsonl" else indented_row(item)


def csv_line(cells: list[Any]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(cells)
    return buffer.getvalue().rstrip("\n")


def _csv_cells(label: str, v) -> list[Any]:
    c, d, m = v.colocated, v.disaggregated, v.metrics
    return [
        label,
        v.workload,
        v.decision,
        v.feasible,
        v.layout,
        "" if m.gain is None else m.gain,
        f"{c.replicas}x{c.layout}" if c.feasible else "",
        split_text(d) if d.feasible else "",
        m.crossover_prompt_tokens or "",
        c.goodput_per_gpu if c.feasible else "",
        d.goodput_per_gpu if d.feasible else "",
        m.kv_transfer_ms,
        "",
    ]


def split_text(d) -> str:
    return f"{d.prefill_replicas}x{d.prefill_layout} + {d.decode_replicas}x{d.decode_layout}"


def table_cells(label: str, v) -> list[str]:
    from disagg_decider.verdict_text import gain_text

    c, d = v.colocated, v.disaggregated
    crossover = v.metrics.crossover_prompt_tokens
    return [
        Path(label).stem,
        v.decision if v.feasible else f"{v.decision}*",
        gain_text(v.metrics.gain),
        f"{c.replicas}x{c.layout}" if c.feasible else "-",
        split_text(d) if d.feasible else "-",
        f"{crossover:,}" if crossover else "-",
    ]
