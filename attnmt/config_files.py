"""Config files read and checked: YAML in, `--set` overrides applied, and every problem one line
naming the file and the dotted path (for an unknown key, the valid keys and the nearest one).

The wording is the same for every model a file is validated against (`config.Config`, whose
sections and defaults live in `config`), so a user reads one kind of error from every file.

Leaf module: imports nothing from attnmt but `utils`, and no torch.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from attnmt.utils import UserError


class ConfigError(UserError):
    """One or more problems in a config; the message has one line per problem."""


def apply_override(raw: dict[str, Any], assignment: str) -> None:
    """Apply one `section.key=value` override in place; the value is parsed as YAML."""
    dotted, sep, value_text = assignment.partition("=")
    if not sep or not dotted.strip():
        raise ConfigError(f"{assignment!r}: expected section.key=value", field="overrides")
    keys = dotted.strip().split(".")
    node = raw
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{assignment!r}: {key!r} is not a section", field="overrides")
        node = child
    try:
        node[keys[-1]] = yaml.safe_load(value_text) if value_text.strip() else None
    except yaml.YAMLError:
        node[keys[-1]] = value_text


def read_yaml(path: str | Path, expected: str = "a mapping with sections data, model, train, decode") -> dict[str, Any]:
    """The mapping a YAML file holds ({} for an empty one); a ConfigError naming the file (and the
    line of a YAML mistake) otherwise, `expected` saying what the file should hold."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror}); expected a YAML config file") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}:{where}: invalid YAML: {problem}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected {expected}")
    return raw


def config_error(exc: ValidationError, root: type[BaseModel], source: str) -> ConfigError:
    """Every problem of a failed validation against `root`, one line each, prefixed with `source`
    (the file, and `with --set` when overrides were applied)."""
    return ConfigError("\n".join(f"{source}: {_describe(root, error)}" for error in exc.errors()))


def _model_at(root: type[BaseModel], path: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class under `root` that owns the keys at a dotted `path` (None if not a section)."""
    model = root
    for key in path:
        field = model.model_fields.get(str(key))
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _describe(root: type[BaseModel], error: ErrorDetails) -> str:
    location = ".".join(str(part) for part in error["loc"]) or "(top level)"
    if error["type"] == "extra_forbidden":
        owner = _model_at(root, error["loc"][:-1])
        valid = sorted(owner.model_fields) if owner else []
        close = difflib.get_close_matches(str(error["loc"][-1]), valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"{location}: unknown key{hint}; valid keys: {', '.join(valid)}"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] not in ("missing", "value_error") and "input" in error:
        message += f" (got {error['input']!r})"
    return f"{location}: {message}"
