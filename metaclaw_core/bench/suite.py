"""A MetaClaw-Bench suite on disk: days of rounds, workspaces and check scripts.

Layout (the paper's ``metaclaw-bench-small``)::

    SUITE/all_tests.json            {"name", "test": [{"id": "day01", "eval": "day01", "desc"…}]}
    SUITE/eval/dayNN/questions.json {"rounds": [{"id", "type", "question", "feedback", "eval"}]}
    SUITE/eval/scripts/*.py         check scripts (copied to WORKSPACE/scripts)
    SUITE/workspaces/shared/        the workspace every day starts from (a fresh copy per day)

``load_suite`` validates everything up front and raises :class:`SuiteError` naming the file
and the problem, so a run never starts on a suite it would trip over on day 9.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from metaclaw_core.errors import MetaClawError

RoundType = Literal["multi_choice", "file_check"]
OPTION = re.compile(r"^[A-Z]$")


class SuiteError(MetaClawError):
    """The suite directory is malformed."""


@dataclass(frozen=True)
class Round:
    id: str
    type: RoundType
    question: str
    feedback: dict[str, Any]
    options: dict[str, str] = field(default_factory=dict)  # multi_choice
    answer: tuple[str, ...] = ()  # multi_choice
    command: str = ""  # file_check
    expect_exit: int = 0  # file_check


@dataclass(frozen=True)
class Day:
    id: str
    desc: str
    rounds: tuple[Round, ...]
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Suite:
    root: Path
    name: str
    days: tuple[Day, ...]
    workspace_src: Path
    scripts_src: Path | None

    @property
    def rounds(self) -> int:
        return sum(len(d.rounds) for d in self.days)

    def day(self, day_id: str) -> Day:
        for d in self.days:
            if d.id == day_id:
                return d
        raise SuiteError(f"{self.root}: no day {day_id!r}")

    def fresh_workspace(self, dest: Path) -> Path:
        """A fresh copy of the shared workspace (plus the check scripts) at ``dest``."""
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(self.workspace_src, dest, symlinks=False)
        if self.scripts_src is not None:
            shutil.copytree(self.scripts_src, dest / "scripts", dirs_exist_ok=True)
        return dest


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuiteError(f"{path}: missing") from None
    except json.JSONDecodeError as exc:
        raise SuiteError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read: {exc}") from None


def _round(path: Path, i: int, raw: Any) -> Round:
    where = f"{path}: round {i + 1}"
    if not isinstance(raw, dict):
        raise SuiteError(f"{where}: expected an object, got {type(raw).__name__}")
    rid = raw.get("id") or f"r{i + 1}"
    where = f"{path}: round {rid!r}"
    kind = raw.get("type")
    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        raise SuiteError(f"{where}: 'question' must be a non-empty string")
    feedback = raw.get("feedback") or {}
    if not isinstance(feedback, dict):
        raise SuiteError(f"{where}: 'feedback' must be an object")
    ev = raw.get("eval")
    if not isinstance(ev, dict):
        raise SuiteError(f"{where}: 'eval' must be an object")
    if kind == "multi_choice":
        options = ev.get("options")
        answer = ev.get("answer")
        if not isinstance(options, dict) or not options:
            raise SuiteError(f"{where}: eval.options must be a non-empty object")
        bad = [k for k in options if not OPTION.match(str(k))]
        if bad:
            raise SuiteError(f"{where}: option keys must be single capital letters, got {bad}")
        if not isinstance(answer, list) or not all(isinstance(a, str) for a in answer):
            raise SuiteError(f"{where}: eval.answer must be a list of option letters")
        unknown = [a for a in answer if a not in options]
        if unknown:
            raise SuiteError(f"{where}: eval.answer names options that do not exist: {unknown}")
        return Round(
            id=str(rid),
            type="multi_choice",
            question=question,
            feedback=feedback,
            options={str(k): str(v) for k, v in options.items()},
            answer=tuple(sorted(answer)),
        )
    if kind == "file_check":
        command = ev.get("command")
        if not isinstance(command, str) or not command.strip():
            raise SuiteError(f"{where}: eval.command must be a non-empty string")
        expect = ev.get("expect_exit", 0)
        if not isinstance(expect, int) or isinstance(expect, bool):
            raise SuiteError(f"{where}: eval.expect_exit must be an integer")
        return Round(
            id=str(rid),
            type="file_check",
            question=question,
            feedback=feedback,
            command=command,
            expect_exit=expect,
        )
    raise SuiteError(f"{where}: unknown type {kind!r} (expected multi_choice or file_check)")


def load_suite(root: Path | str) -> Suite:
    """Read and validate the suite at ``root``; :class:`SuiteError` on the first problem."""
    root = Path(root).expanduser().resolve()
    if not root.is_dir():
        raise SuiteError(f"{root}: not a directory")
    index_path = root / "all_tests.json"
    index = _read_json(index_path)
    if not isinstance(index, dict) or not isinstance(index.get("test"), list):
        raise SuiteError(f"{index_path}: expected an object with a 'test' list")
    workspace_src = root / "workspaces" / "shared"
    if not workspace_src.is_dir():
        raise SuiteError(f"{workspace_src}: missing (the workspace every day starts from)")
    scripts = root / "eval" / "scripts"
    days: list[Day] = []
    seen: set[str] = set()
    for i, entry in enumerate(index["test"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise SuiteError(f"{index_path}: test {i + 1}: expected an object with an 'id'")
        day_id = entry["id"]
        if day_id in seen:
            raise SuiteError(f"{index_path}: day {day_id!r} listed twice")
        seen.add(day_id)
        eval_name = entry.get("eval", day_id)
        if not isinstance(eval_name, str) or "/" in eval_name or eval_name.startswith("."):
            raise SuiteError(f"{index_path}: day {day_id!r}: bad 'eval' {eval_name!r}")
        qpath = root / "eval" / eval_name / "questions.json"
        data = _read_json(qpath)
        if not isinstance(data, dict) or not isinstance(data.get("rounds"), list):
            raise SuiteError(f"{qpath}: expected an object with a 'rounds' list")
        if not data["rounds"]:
            raise SuiteError(f"{qpath}: no rounds")
        rounds = tuple(_round(qpath, j, r) for j, r in enumerate(data["rounds"]))
        ids = [r.id for r in rounds]
        if len(set(ids)) != len(ids):
            raise SuiteError(f"{qpath}: round ids repeat: {ids}")
        tags = entry.get("preference_tags") or []
        days.append(
            Day(
                id=day_id,
                desc=str(entry.get("desc") or data.get("desc") or ""),
                rounds=rounds,
                tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
            )
        )
    if not days:
        raise SuiteError(f"{index_path}: no days in 'test'")
    return Suite(
        root=root,
        name=str(index.get("name") or root.name),
        days=tuple(days),
        workspace_src=workspace_src,
        scripts_src=scripts if scripts.is_dir() else None,
    )
