from pathlib import Path

import pytest

from metaclaw_core import MetaClaw, Skill, SkillFormatError
from metaclaw_core.skills.skillmd import dump_skill_md, parse_skill_md, read_skill_dir

# The format of the paper's released skills (memory_data/skills/<name>/SKILL.md).
PAPER_STYLE = """---
name: debug-systematically
description: "Use this skill when a test is failing, or there is a bug to diagnose."
---

# Debug Systematically

**Process:**
1. **Reproduce** the bug with the smallest possible input.
2. **Isolate** which component causes it.
"""


def write(root: Path, name: str, text: str) -> Path:
    (root / name).mkdir(parents=True, exist_ok=True)
    p = root / name / "SKILL.md"
    p.write_text(text)
    return p


def test_parses_the_papers_skill_format() -> None:
    s = parse_skill_md(PAPER_STYLE)
    assert s.name == "debug-systematically"
    assert s.description.startswith("Use this skill when a test is failing")
    assert s.body.startswith("# Debug Systematically")
    assert s.category is None


def test_round_trips_through_dump() -> None:
    s = Skill(
        name="a-b", description='Has "quotes": and colons', body="Line 1\n---\nLine 3", category="x"
    )
    again = parse_skill_md(dump_skill_md(s))
    assert (again.name, again.description, again.body, again.category) == (
        s.name,
        s.description,
        s.body,
        s.category,
    )


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("name: x\n", 1, "missing front matter"),
        ("---\nname: x\ndescription: y\n", 3, "not closed"),
        ("---\nname: x\ndescription: [unclosed\n---\nbody\n", 3, "not valid YAML"),
        ("---\nname: Bad Name\ndescription: y\n---\nbody\n", 2, "not a slug"),
        ("---\nname: ok\n---\nbody\n", 2, "no 'description'"),
        ("---\nname: ok\ndescription: fine\n---\n\n", 5, "body is empty"),
    ],
)
def test_malformed_file_names_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = write(tmp_path, "bad", text)
    with pytest.raises(SkillFormatError) as info:
        read_skill_dir(tmp_path)
    assert info.value.path == path
    assert info.value.line == line
    assert message in str(info.value)
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_import_strict_is_all_or_nothing(engine: MetaClaw, tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write(root, "good-one", "---\nname: good-one\ndescription: fine\n---\nDo it well.\n")
    write(root, "zz-bad", "---\nname: zz-bad\ndescription: [oops\n---\nbody\n")
    before = engine.library.current_generation()
    with pytest.raises(SkillFormatError, match="zz-bad"):
        engine.import_skills(root, strict=True)
    assert engine.library.live() == []
    assert engine.library.current_generation() == before


def test_import_admits_the_good_files_and_names_the_bad_one(
    engine: MetaClaw, tmp_path: Path
) -> None:
    root = tmp_path / "skills"
    write(root, "good-one", "---\nname: good-one\ndescription: fine\n---\nDo it well.\n")
    bad = write(root, "zz-bad", "---\nname: zz-bad\ndescription: [oops\n---\nbody\n")
    report = engine.import_skills(root)
    assert report.live == ["good-one"] and report.held_back
    assert "front matter is not valid YAML" in report.rejected[str(bad)][0]
    assert [s.name for s in engine.library.live()] == ["good-one"]


def test_import_then_export_reproduces_the_files(engine: MetaClaw, tmp_path: Path) -> None:
    root = tmp_path / "in"
    write(root, "debug-systematically", PAPER_STYLE)
    write(
        root, "tidy", "---\nname: tidy\ndescription: Keep it tidy\ncategory: style\n---\nTidy up.\n"
    )
    report = engine.import_skills(root)
    assert report.generation is not None
    assert report.generation.added == ["debug-systematically", "tidy"]
    paths = engine.library.export_dir(tmp_path / "out")
    assert sorted(p.parent.name for p in paths) == ["debug-systematically", "tidy"]
    exported = {s.name: s for s in read_skill_dir(tmp_path / "out")}
    assert exported["tidy"].category == "style"
    assert exported["debug-systematically"].body == parse_skill_md(PAPER_STYLE).body


def test_import_refuses_live_names_unless_replace(engine: MetaClaw, tmp_path: Path) -> None:
    root = tmp_path / "in"
    write(root, "tidy", "---\nname: tidy\ndescription: Keep it tidy\n---\nTidy up.\n")
    engine.import_skills(root)
    write(root, "tidy", "---\nname: tidy\ndescription: Keep it tidy\n---\nTidy up twice.\n")
    report = engine.import_skills(root)
    assert report.rejected == {"tidy": ["already live; use --replace to update it"]}
    with pytest.raises(SkillFormatError, match="already live"):
        engine.import_skills(root, strict=True)
    gen = engine.import_skills(root, replace=True).generation
    assert gen is not None and gen.updated == ["tidy"]
    assert engine.library.get("tidy").body == "Tidy up twice."
