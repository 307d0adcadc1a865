"""File tools for a benchmark agent, confined to one workspace folder.

Every path an agent gives is resolved (``..`` and symlinks included) and must stay inside the
workspace; an attempt to leave it is refused with an error the model can read, and recorded
in the :class:`ActionLog` — a write outside the workspace scores the round 0.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_READ_CHARS = 20_000
MAX_WRITE_BYTES = 1_000_000
MAX_LIST = 300


class WorkspaceEscape(Exception):
    """A path that leads outside the workspace."""


@dataclass
class ActionLog:
    """What the agent did in one round: every tool call, its result, and any escape attempt."""

    actions: list[dict[str, Any]] = field(default_factory=list)
    escapes: list[dict[str, str]] = field(default_factory=list)

    def add(self, tool: str, args: dict[str, Any], result: str) -> None:
        self.actions.append({"tool": tool, "args": args, "result": result[:2000]})

    @property
    def wrote_outside(self) -> list[str]:
        return [e["path"] for e in self.escapes if e["kind"] == "write"]


class Workspace:
    """The folder an agent may read and write, and the tools that do so."""

    def __init__(self, root: Path, log: ActionLog | None = None) -> None:
        self.root = root.resolve()
        self.log = log or ActionLog()

    def resolve(self, path: str, kind: str) -> Path:
        raw = (path or ".").strip()
        candidate = Path(raw)
        if candidate.is_absolute():
            # Models often write "/day01/x.json" meaning the workspace's day01; any other
            # absolute path outside the workspace is an escape.
            rel = candidate.relative_to(candidate.anchor)
            mapped = rel.parts and (self.root / rel.parts[0]).exists()
            inside = candidate.resolve().is_relative_to(self.root)
            target = self.root / rel if mapped and not inside else candidate
        else:
            target = self.root / candidate
        resolved = target.resolve()
        if not resolved.is_relative_to(self.root):
            self.log.escapes.append({"kind": kind, "path": raw})
            raise WorkspaceEscape(f"{raw!r} is outside the workspace; use paths like day01/x.json")
        return resolved

    def rel(self, p: Path) -> str:
        return p.relative_to(self.root).as_posix() or "."

    # -- the tools -----------------------------------------------------------------------
    def list_files(self, path: str = ".") -> str:
        return self._run("list_files", {"path": path}, lambda: self._list(path))

    def read_file(self, path: str) -> str:
        return self._run("read_file", {"path": path}, lambda: self._read(path))

    def write_file(self, path: str, content: str) -> str:
        args = {"path": path, "content": content}
        return self._run("write_file", args, lambda: self._write(path, content))

    def _run(self, tool: str, args: dict[str, Any], fn: Any) -> str:
        try:
            result = str(fn())
        except WorkspaceEscape as exc:
            result = f"error: {exc}"
        except (OSError, UnicodeError, ValueError) as exc:
            result = f"error: {type(exc).__name__}: {exc}"
        self.log.add(tool, args, result)
        return result

    def _list(self, path: str) -> str:
        base = self.resolve(path, "read")
        if not base.is_dir():
            return f"error: {path!r} is not a folder"
        names: list[str] = []
        for dirpath, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for f in sorted(files):
                names.append(self.rel(Path(dirpath) / f))
                if len(names) >= MAX_LIST:
                    return "\n".join([*names, f"… (more than {MAX_LIST} files)"])
        return "\n".join(names) or "(empty)"

    def _read(self, path: str) -> str:
        target = self.resolve(path, "read")
        if not target.is_file():
            return f"error: no file {path!r}"
        text = target.read_text(encoding="utf-8", errors="replace")
        if len(text) > MAX_READ_CHARS:
            return text[:MAX_READ_CHARS] + f"\n… (truncated at {MAX_READ_CHARS} characters)"
        return text

    def _write(self, path: str, content: str) -> str:
        target = self.resolve(path, "write")
        data = content if isinstance(content, str) else json.dumps(content, indent=2)
        if len(data.encode("utf-8")) > MAX_WRITE_BYTES:
            return f"error: content over {MAX_WRITE_BYTES} bytes"
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, target)
        return f"wrote {len(data)} characters to {self.rel(target)}"
