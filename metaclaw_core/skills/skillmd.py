"""SKILL.md files: ``<name>/SKILL.md`` with YAML front matter (name, description, category).

The format of the paper's released skills. Parsing is strict and reports file and line;
importing a folder validates every file before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from metaclaw_core.errors import SkillFormatError
from metaclaw_core.models import Skill

MAX_FILE_BYTES = 64 * 1024
KNOWN_KEYS = {"name", "description", "category", "metadata", "license", "version", "tags"}


def parse_skill_md(text: str, *, path: Path | str = "<string>", source: str = "import") -> Skill:
    """Parse one SKILL.md text into a :class:`Skill`, or raise :class:`SkillFormatError`."""
    if len(text.encode("utf-8", errors="replace")) > MAX_FILE_BYTES:
        raise SkillFormatError(f"file is larger than {MAX_FILE_BYTES} bytes", path=path, line=1)
    if "\x00" in text:
        raise SkillFormatError("file contains a NUL byte", path=path, line=1)
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillFormatError(
            "missing front matter: the first line must be '---'", path=path, line=1
        )
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise SkillFormatError(
            "front matter is not closed: add a '---' line after it", path=path, line=len(lines)
        )
    front_text = "\n".join(lines[1:end])
    try:
        front: Any = yaml.safe_load(front_text) if front_text.strip() else {}
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = (mark.line + 2) if mark is not None else 2
        raise SkillFormatError(
            f"front matter is not valid YAML: {exc.problem}", path=path, line=line
        ) from None
    except yaml.YAMLError as exc:
        raise SkillFormatError(
            f"front matter is not valid YAML: {exc}", path=path, line=2
        ) from None
    if not isinstance(front, dict):
        raise SkillFormatError(
            "front matter must be a mapping of keys to values", path=path, line=2
        )

    def key_line(key: str) -> int:
        for i in range(1, end):
            if lines[i].split(":", 1)[0].strip() == key:
                return i + 1
        return 2

    for key in ("name", "description"):
        if key not in front:
            raise SkillFormatError(f"front matter has no '{key}'", path=path, line=2)
    for key in ("name", "description", "category"):
        if (
            key in front
            and front[key] is not None
            and not isinstance(front[key], str | int | float)
        ):
            raise SkillFormatError(f"'{key}' must be a string", path=path, line=key_line(key))
    body = "\n".join(lines[end + 1 :]).strip()
    category = front.get("category")
    try:
        return Skill(
            name=str(front["name"]).strip(),
            description=str(front["description"]).strip(),
            body=body,
            category=str(category).strip() if category is not None else None,
            source=source,
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "name"
        line = end + 2 if field == "body" else key_line(field)
        msg = err["msg"].removeprefix("Value error, ")
        raise SkillFormatError(msg, path=path, line=line) from None


def dump_skill_md(skill: Skill) -> str:
    """Render a skill as SKILL.md text (round-trips through :func:`parse_skill_md`)."""
    # json.dumps gives a valid YAML double-quoted scalar: no front-matter injection possible.
    front = [f"name: {skill.name}", f"description: {json.dumps(skill.description)}"]
    if skill.category:
        front.append(f"category: {json.dumps(skill.category)}")
    return "---\n" + "\n".join(front) + "\n---\n\n" + skill.body.strip() + "\n"


def read_skill_dir(root: Path) -> list[Skill]:
    """Parse every ``*/SKILL.md`` under ``root`` (or ``root`` itself if it is one file).

    Raises on the first malformed file or duplicated name; returns nothing partial.
    """
    skills: list[Skill] = []
    for _, result in read_skill_files(root):
        if isinstance(result, SkillFormatError):
            raise result
        skills.append(result)
    return skills


def read_skill_files(root: Path) -> list[tuple[Path, Skill | SkillFormatError]]:
    """Parse every ``*/SKILL.md`` under ``root`` on its own: each file with its skill or the
    error that refused it (a name used twice refuses the later files)."""
    root = Path(root)
    if not root.exists():
        raise SkillFormatError("no such file or folder", path=root)
    files = [root] if root.is_file() else sorted(root.glob("*/SKILL.md"))
    if root.is_dir() and (root / "SKILL.md").is_file():
        files.insert(0, root / "SKILL.md")
    if not files:
        raise SkillFormatError("no <name>/SKILL.md files found", path=root)
    out: list[tuple[Path, Skill | SkillFormatError]] = []
    seen: dict[str, Path] = {}
    for f in files:
        try:
            try:
                text = f.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise SkillFormatError(f"not UTF-8 text ({exc.reason})", path=f, line=1) from None
            skill = parse_skill_md(text, path=f)
            if skill.name in seen:
                raise SkillFormatError(
                    f"skill name {skill.name!r} is also used by {seen[skill.name]}", path=f, line=2
                )
        except SkillFormatError as exc:
            out.append((f, exc))
            continue
        seen[skill.name] = f
        out.append((f, skill))
    return out


def write_skill_dir(root: Path, skills: list[Skill]) -> list[Path]:
    """Write ``<root>/<name>/SKILL.md`` for each skill; return the paths written."""
    root = Path(root)
    out = []
    for skill in skills:
        folder = root / skill.name
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "SKILL.md"
        tmp = path.with_suffix(".md.tmp")
        tmp.write_text(dump_skill_md(skill), encoding="utf-8")
        tmp.replace(path)
        out.append(path)
    return out
