"""A tiny suite in the MetaClaw-Bench format, written to a temp dir by the tests, and the
engine factory the runs use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from metaclaw_core import MetaClaw
from tests.support.engines import SharedEmbedder

CHECK_ISO = """\
import json, re, sys
data = json.load(open(sys.argv[1]))
ok = re.fullmatch(r"\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\+08:00", str(data.get("when", "")))
sys.exit(0 if ok else 1)
"""

TIME_FEEDBACK = (
    "Meeting times must be full ISO 8601 datetimes with the +08:00 offset, "
    "like 2026-03-16T09:30:00+08:00."
)


def day01() -> dict[str, Any]:
    return {
        "id": "day01",
        "rounds": [
            {
                "id": "r1",
                "type": "file_check",
                "question": "Record the standup meeting time from day01/notes.txt in "
                "day01/out.json as the field 'when'.",
                "feedback": {"correct": "The meeting time is right.", "incorrect": TIME_FEEDBACK},
                "eval": {"command": "python scripts/check_iso.py day01/out.json", "expect_exit": 0},
            },
            {
                "id": "r2",
                "type": "multi_choice",
                "question": "Which meeting time values use the required format?\n"
                "A. 2026-03-16T09:30:00+08:00\nB. 09:30\nC. 2026-03-17T10:00:00+08:00\n"
                "Answer using \\bbox{X,Y} format.",
                "feedback": {
                    "correct": "Right: A and C.",
                    "options": {
                        "A": "A is correct.",
                        "B": "B lacks the date.",
                        "C": "C is correct.",
                    },
                },
                "eval": {
                    "options": {"A": "2026-03-16T09:30:00+08:00", "B": "09:30", "C": "2026-..."},
                    "answer": ["A", "C"],
                },
            },
        ],
    }


def day02() -> dict[str, Any]:
    return {
        "id": "day02",
        "rounds": [
            {
                "id": "r1",
                "type": "multi_choice",
                "question": "Which of these meeting time values use the required ISO 8601 "
                "format with the +08:00 offset?\nA. 2026/03/18 10:00\nB. 2026-03-18T10:00:00+08:00"
                "\nAnswer using \\bbox{X}.",
                "feedback": {"correct": "Right.", "options": {"A": "A uses slashes."}},
                "eval": {"options": {"A": "x", "B": "y"}, "answer": ["B"]},
            }
        ],
    }


def write_suite(root: Path, days: list[dict[str, Any]] | None = None) -> Path:
    days = days if days is not None else [day01(), day02()]
    (root / "workspaces" / "shared" / "day01").mkdir(parents=True)
    (root / "workspaces" / "shared" / "AGENTS.md").write_text("# Agent\nBe precise.\n")
    (root / "workspaces" / "shared" / "day01" / "notes.txt").write_text("Standup at 9:30.\n")
    (root / "eval" / "scripts").mkdir(parents=True)
    (root / "eval" / "scripts" / "check_iso.py").write_text(CHECK_ISO)
    for d in days:
        (root / "eval" / d["id"]).mkdir(parents=True)
        (root / "eval" / d["id"] / "questions.json").write_text(json.dumps(d, indent=1))
    index = {"name": "tiny", "test": [{"id": d["id"], "eval": d["id"]} for d in days]}
    (root / "all_tests.json").write_text(json.dumps(index, indent=1))
    return root


def engine_factory(minilm: Any) -> Any:
    """A run's engine: the session's MiniLM, no entry points, captures committed quickly."""

    def make(settings: Any) -> MetaClaw:
        settings.load_entrypoints = False
        settings.store.flush_interval_s = 0.02
        return MetaClaw(settings, plugins=[SharedEmbedder(minilm)])

    return make
