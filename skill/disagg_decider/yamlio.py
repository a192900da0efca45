"""Safe YAML loading with messages that name the file and line.

Only the safe loader is ever used (libyaml's C build of it where installed, which is several
times faster and builds the same plain Python data): tags such as `!!python/object` are
rejected, and nothing read from a workload or rule file is evaluated as code.
"""

from pathlib import Path
from typing import Any

import yaml

from disagg_decider.errors import UserError

_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_text(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_SafeLoader)
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        where = f"{source}:{mark.line + 1}" if mark else source
        error = UserError(
            f"{where}: unsupported YAML tag ({exc.problem}); only plain YAML is accepted "
            "(no !!python or other custom tags)"
        )
        error.line = mark.line + 1 if mark else None  # lets callers name what is on that line
        raise error from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        error = UserError(f"{where}: malformed YAML: {problem}")
        error.line = mark.line + 1 if mark else None
        raise error from None


def load_yaml_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a YAML file") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None
    return load_yaml_text(text, str(path))
