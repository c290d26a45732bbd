"""A sweep file: a base config, overrides, and named experiments, each a grid or an Optuna search.

    name: my-study                         # the Optuna study's name (default: the file's stem)
    output_dir: runs/sweeps/my-study       # study.db, trials/, report/ (default runs/sweeps/NAME)
    base: ../configs/demo.yaml             # relative to this file, or an inline config mapping
    overrides: {train.max_steps: 1500}     # dotted config keys, applied to every trial
    metric: valid_bleu                     # the objective, and what pruning watches (or valid_loss)
    experiments:
      attention:                           # a grid: the product of its axes, times its seeds
        grid: {model.attention: [none, additive, dot]}
        seeds: [1, 2, 3]                   # = an axis over train.seed
      teacher_forcing:
        grid: {train.teacher_forcing: [0.0, 0.5, 1.0]}
        points:                            # extra points that set several keys together
          - {label: linear 1 to 0, train.teacher_forcing_schedule: linear, train.teacher_forcing_min: 0.0}
      lr_search:                           # an Optuna search (TPE or random, median pruning)
        search:
          n_trials: 20
          params: {train.lr: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}}

`load_plan` resolves and validates every grid trial's config (and each search parameter at its
bounds) before anything runs, so a mistyped axis or a bad value is one error naming the
experiment, the axis and the value. Identical resolved configs are one trial (keyed by a hash of
the config), so a base point shared by several experiments is trained once.

Light module: imports config and utils only, no torch and no optuna.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from attnmt.config import Config, validate
from attnmt.config_files import ConfigError, read_yaml

# Set by the sweep itself: the trial's folder, and the worker's share of the CPU (--threads).
SET_BY_SWEEP = ("train.run_dir", "train.threads")
# Settings added to the config after sweeps were first keyed, with the value that means "as before".
# At that value a setting stays out of a trial's key, so a sweep begun by an earlier version keeps
# its trials' identities and is resumed, not trained again. The value is frozen here rather than
# read from the config's defaults: a default that changes later must change the keys it affects.
ADDED_SETTINGS: dict[str, Any] = {"data.fixed_batches": False}
Scalar = str | int | float | bool | None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchParam(_Strict):
    type: Literal["float", "int", "categorical"]
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: list[Scalar] | None = None

    @model_validator(mode="after")
    def _complete(self) -> SearchParam:
        if self.type == "categorical":
            if not self.choices:
                raise ValueError("a categorical parameter needs a non-empty choices list")
        elif self.low is None or self.high is None or self.low > self.high:
            raise ValueError(f"a {self.type} parameter needs low <= high")
        elif self.log and self.low <= 0:
            raise ValueError("a log-scaled parameter needs low > 0")
        return self

    def bounds(self) -> list[Scalar]:
        """The values a trial's config is validated with before the search starts."""
        if self.type == "categorical":
            return list(self.choices or [])
        assert self.low is not None and self.high is not None  # _complete requires both of int and float parameters
        cast = int if self.type == "int" else float
        return [cast(self.low), cast(self.high)]


class Search(_Strict):
    n_trials: int = Field(ge=1)
    sampler: Literal["tpe", "random"] = "tpe"
    seed: int = Field(0, description="the sampler's seed")
    params: dict[str, SearchParam] = Field(min_length=1)
    prune: bool = Field(True, description="median pruning on the metric at each validation")
    startup_trials: int = Field(3, ge=0, description="trials finished before pruning starts")
    warmup_steps: int = Field(0, ge=0, description="training steps before a trial may be pruned")


class Experiment(_Strict):
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    points: list[dict[str, Any]] = Field(default_factory=list)
    seeds: list[int] | None = Field(None, min_length=1)
    overrides: dict[str, Any] = Field(default_factory=dict)
    search: Search | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Experiment:
        if self.search is not None and (self.grid or self.points or self.seeds):
            raise ValueError("an experiment is a grid (grid/points/seeds) or a search, not both")
        if any(not values for values in self.grid.values()):
            raise ValueError("every grid axis needs at least one value")
        return self


class SweepSpec(_Strict):
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    output_dir: str | None = None
    base: str | dict[str, Any] = Field(default_factory=dict)
    overrides: dict[str, Any] = Field(default_factory=dict)
    metric: Literal["valid_bleu", "valid_loss"] = "valid_bleu"
    test_beam_size: int | None = Field(None, ge=1, description="beam for test BLEU (default: decode.beam_size)")
    length_buckets: list[int] | None = Field(None, min_length=1, description="source-length bucket edges")
    pace_probe: bool = Field(
        True, description="time the reference model (attnmt.pace) before each trial, so its minutes name their pace"
    )
    experiments: dict[str, Experiment] = Field(min_length=1)


@dataclass
class GridTrial:
    """One unique trial config and the experiment points it stands for."""

    key: str  # hash of the resolved config (see `config_key`)
    name: str  # folder name under trials/
    config: Config
    members: list[tuple[str, int]] = field(default_factory=list)  # (experiment, point index)


@dataclass
class Plan:
    spec: SweepSpec
    path: Path
    name: str
    sweep_dir: Path
    base: Config  # the base config with the sweep's overrides
    grid: list[GridTrial]
    layout: dict[str, Any]  # JSON: what the report needs to know (stored with the study)

    @property
    def searches(self) -> dict[str, Search]:
        return {name: e.search for name, e in self.spec.experiments.items() if e.search is not None}

    def study_name(self, experiment: str | None = None) -> str:
        """The grid's study is NAME; each search has its own (a sampler learns from one space)."""
        return self.name if experiment is None else f"{self.name}:{experiment}"

    def trial_config(self, experiment: str, values: dict[str, Any], label: str) -> Config:
        """The base, the experiment's overrides, then `values` ({dotted key: value}); validated,
        a ConfigError naming the experiment and `label` (the point) otherwise."""
        raw = self.base.model_dump(mode="json")
        for key, value in {**self.spec.experiments[experiment].overrides, **values}.items():
            section, name = key.split(".")
            raw[section][name] = value
        return validate(raw, f"{self.path}: experiments.{experiment} ({label})")


def check_key(dotted: Any) -> str | None:
    """Why `dotted` is not a settable config key (None when it is one)."""
    if not isinstance(dotted, str) or dotted.count(".") != 1:
        return f"{dotted!r}: expected a config key written section.key (e.g. train.lr)"
    section, name = dotted.split(".")
    sections = Config.model_fields
    if section not in sections:
        close = difflib.get_close_matches(section, sections, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"{dotted}: unknown section {section!r}{hint}; valid sections: {', '.join(sections)}"
    model = sections[section].annotation
    assert isinstance(model, type) and issubclass(model, BaseModel)  # every field of Config is a section
    fields = model.model_fields
    if name not in fields:
        close = difflib.get_close_matches(name, fields, n=1)
        hint = f" (did you mean '{section}.{close[0]}'?)" if close else ""
        return f"{dotted}: unknown config key{hint}; valid keys of {section}: {', '.join(fields)}"
    if dotted in SET_BY_SWEEP:
        return f"{dotted}: set by the sweep for each trial (see --threads); it cannot be swept or overridden"
    return None


def config_key(config: Config) -> str:
    """The identity of a trial: a hash of its resolved config without where it runs (and without
    a setting of `ADDED_SETTINGS` at its earlier behaviour)."""
    flat = flatten(config)
    for key in SET_BY_SWEEP:
        flat.pop(key)
    for key, earlier in ADDED_SETTINGS.items():
        if flat[key] == earlier:
            del flat[key]
    return hashlib.sha1(json.dumps(flat, sort_keys=True).encode()).hexdigest()[:12]


def flatten(config: Config) -> dict[str, Any]:
    """{"section.key": value} of a resolved config, JSON values."""
    return {f"{s}.{k}": v for s, section in config.model_dump(mode="json").items() for k, v in section.items()}


def describe(values: dict[str, Any]) -> str:
    """`leaf=value, ...` for a set of dotted keys."""
    return ", ".join(f"{key.split('.')[1]}={value}" for key, value in values.items())


def _trial_name(config: Config, base: Config, key: str) -> str:
    """A readable folder name: the keys that differ from the base, then the hash."""
    base_flat, flat = flatten(base), flatten(config)
    changed = {k: v for k, v in flat.items() if k not in SET_BY_SWEEP and v != base_flat[k]}
    slug = re.sub(r"[^A-Za-z0-9._=+,-]+", "-", describe(changed).replace(", ", ","))[:48] or "base"
    return f"{slug}-{key[:6]}"


def _load_spec(path: Path) -> SweepSpec:
    raw = read_yaml(path, expected="a sweep: a mapping with base, overrides and experiments")
    try:
        return SweepSpec.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"]) or "(top level)"
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown key"
            lines.append(f"{path}: {where}: {message}")
        raise ConfigError("\n".join(lines)) from None


def _base(spec: SweepSpec, path: Path) -> tuple[dict[str, Any], str]:
    if isinstance(spec.base, dict):
        return copy.deepcopy(spec.base), f"{path}: base"
    base_path = path.parent / spec.base
    return read_yaml(base_path), str(base_path)


def _key_problems(spec: SweepSpec, path: Path) -> list[str]:
    """Every key of overrides, axes, points and search params that is not a config key."""
    places: list[tuple[str, Any]] = [("overrides", key) for key in spec.overrides]
    for name, experiment in spec.experiments.items():
        places += [(f"experiments.{name}.overrides", key) for key in experiment.overrides]
        places += [(f"experiments.{name}.grid", key) for key in experiment.grid]
        for index, point in enumerate(experiment.points):
            places += [(f"experiments.{name}.points[{index}]", key) for key in point if key != "label"]
        if experiment.search:
            places += [(f"experiments.{name}.search.params", key) for key in experiment.search.params]
    return [f"{path}: {where}: {problem}" for where, key in places if (problem := check_key(key))]


def _points(name: str, experiment: Experiment) -> list[dict[str, Any]]:
    """The experiment's points in order: the grid's product, then the extra points."""
    axes = list(experiment.grid)
    points = []
    for combo in itertools.product(*experiment.grid.values()) if axes else []:
        values = dict(zip(axes, combo, strict=True))
        label = str(combo[0]) if len(axes) == 1 else describe(values)
        points.append({"label": label, "values": values, "kind": "grid"})
    for point in experiment.points:
        values = {k: v for k, v in point.items() if k != "label"}
        label = str(point.get("label") or describe(values) or "base")
        points.append({"label": label, "values": values, "kind": "point"})
    return points or [{"label": "base", "values": {}, "kind": "point"}]


def _expand(plan: Plan, problems: list[str]) -> None:
    """Fill plan.grid (unique configs) and plan.layout's experiments; collect config problems."""
    by_key: dict[str, GridTrial] = {}
    for name, experiment in plan.spec.experiments.items():
        if experiment.search is not None:
            for key, param in experiment.search.params.items():
                for value in param.bounds():
                    _check(plan, name, {key: value}, f"{key}={value}", problems)
            kind = {"kind": "search", "study": plan.study_name(name), "axes": list(experiment.search.params)}
            plan.layout["experiments"][name] = kind
            continue
        points = _points(name, experiment)
        for index, point in enumerate(points):
            for seed in experiment.seeds or (None,):
                values = point["values"] if seed is None else {**point["values"], "train.seed": seed}
                config = _check(plan, name, values, point["label"], problems)
                if config is None:
                    continue
                key = config_key(config)
                trial = by_key.setdefault(key, GridTrial(key, _trial_name(config, plan.base, key), config))
                trial.members.append((name, index))
        plan.layout["experiments"][name] = {
            "kind": "grid",
            "axes": list(experiment.grid),
            "point_keys": sorted({k for p in experiment.points for k in p if k != "label"}),
            "points": points,
            "seeds": experiment.seeds,
        }
    plan.grid = list(by_key.values())
    plan.layout["members"] = {trial.key: trial.members for trial in plan.grid}


def _check(plan: Plan, experiment: str, values: dict[str, Any], label: str, problems: list[str]) -> Config | None:
    try:
        return plan.trial_config(experiment, values, label)
    except ConfigError as error:
        # A bad value shows up in every point that combines it; name it once, at its first point.
        for line in str(error).splitlines():
            problem = line.partition(f"({label}): ")[2]
            if not any(
                seen.startswith(f"{plan.path}: experiments.{experiment} (") and seen.endswith(f"): {problem}")
                for seen in problems
            ):
                problems.append(line)
        return None


def load_plan(path: str | Path) -> Plan:
    """Read, resolve and validate a sweep file; every problem at once as a ConfigError."""
    path = Path(path)
    spec = _load_spec(path)
    problems = _key_problems(spec, path)
    if problems:
        raise ConfigError("\n".join(problems))
    raw, source = _base(spec, path)
    for key, value in spec.overrides.items():
        section, name = key.split(".")
        if not isinstance(raw.setdefault(section, {}), dict):
            raise ConfigError(f"{source}: {section}: expected a mapping of keys")
        raw[section][name] = value
    base = validate(raw, source if not spec.overrides else f"{source} with the sweep's overrides")
    name = spec.name or re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem)
    sweep_dir = Path(spec.output_dir) if spec.output_dir else Path("runs/sweeps") / name
    layout = {"name": name, "metric": spec.metric, "experiments": {}}
    plan = Plan(spec, path, name, sweep_dir, base, [], layout)
    _expand(plan, problems)
    if problems:
        raise ConfigError("\n".join(problems))
    return plan


def trial_axes(layout: dict[str, Any]) -> list[str]:
    """Every swept key of a sweep, in the order the experiments name them (seed last)."""
    keys: dict[str, None] = {}
    for experiment in layout["experiments"].values():
        keys.update(dict.fromkeys(experiment["axes"]))
        keys.update(dict.fromkeys(experiment.get("point_keys", [])))
    if any(e.get("seeds") for e in layout["experiments"].values()):
        keys["train.seed"] = None
    return list(keys)
