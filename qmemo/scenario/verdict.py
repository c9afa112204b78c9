"""invariants.json: the one schema, used by the runner that writes it and by every reader.

A verdict is the scenario's name, one result per invariant (name, passed, its figures,
a one-line detail) and a few facts about the run. `read()` accepts only this schema's
exact shape: a reader that tolerated variants would hide drift between writer and reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from qmemo.errors import ConfigError

SCHEMA = "qmemo-scenario-invariants/1"
FILE = "invariants.json"


@dataclass(frozen=True, slots=True)
class InvariantResult:
    name: str
    passed: bool
    detail: str
    figures: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail, "figures": self.figures}


@dataclass(frozen=True, slots=True)
class Verdict:
    scenario: str
    results: tuple[InvariantResult, ...]
    run: dict[str, Any] = field(default_factory=dict)   # run id, times, overrides, cleanup problems

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(result.passed for result in self.results)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "scenario": self.scenario, "passed": self.passed,
                "results": [result.to_json() for result in self.results], "run": self.run}


def write(directory: Path, verdict: Verdict) -> Path:
    path = Path(directory) / FILE
    path.write_bytes(orjson.dumps(verdict.to_json(), option=orjson.OPT_INDENT_2))
    return path


def read(path: Path) -> Verdict:
    """Read an invariants.json (or the run folder holding one), checking its schema."""
    path = Path(path)
    if path.is_dir():
        path = path / FILE
    try:
        document = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise ConfigError(f"{path}: not a {SCHEMA} file")
    try:
        results = tuple(InvariantResult(r["name"], bool(r["passed"]), r["detail"], r["figures"])
                        for r in document["results"])
        verdict = Verdict(document["scenario"], results, document["run"])
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: malformed {SCHEMA} file ({exc!r})") from None
    if verdict.passed != document["passed"]:
        raise ConfigError(f"{path}: 'passed' disagrees with its results")
    return verdict
