"""Turn the read corpora into intent-classifier training sentences (a maintainer's command).

    .venv/bin/python benchmarks/corpora/to_training.py      # rewrites the two files below
    .venv/bin/python -m metaclaw_core.plugins.intent_model  # then retrain the shipped weights

Every statement the review reads (``read_skill`` + ``settings_in_code``, as in
``plugins/vet_intent.py``) of every candidate in ``benchmarks/corpora/read/*/`` becomes one
line of ``metaclaw_core/plugins/intent_training/``:

* ``hostile_corpora.tsv``: ``category<TAB>statement`` for the statements of a hostile
  candidate that its ``hostile_text`` spans (the harmful sentence and the one that justifies
  or hides it) cover;
* ``benign_corpora.tsv``: ``topic<TAB>statement`` for every other statement: all of a benign
  candidate's, and the harmless rest of a hostile one's (hard negatives: same skill, same
  topic, no harm).

Statements in another language, of fewer than three words, and the ``structure`` category
(caught by form, not by meaning) are left out; a statement is written once.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from metaclaw_core.plugins.vet_intent import foreign_statement  # noqa: E402
from metaclaw_core.skills.reading import Statement, read_skill, settings_in_code  # noqa: E402

READ = Path(__file__).resolve().parent / "read"
OUT = ROOT / "metaclaw_core" / "plugins" / "intent_training"
_TOKEN = re.compile(r"[a-z0-9']+")


def _norm(text: str) -> str:
    text = text.replace("`", "").replace("**", "").replace("__", "")
    return " ".join(text.split()).lower()


def statements(item: dict[str, str]) -> list[Statement]:
    reading = read_skill(f"{item['description']}\n\n{item['body']}", max_statements=10**6)
    return reading.statements + settings_in_code(item["body"])


def covered(statement: str, spans: list[str]) -> bool:
    """Whether a span marked hostile holds the statement (or most of its words)."""
    s = _norm(statement)
    words = _TOKEN.findall(s)
    for span in spans:
        n = _norm(span)
        if s in n or (len(n) > 12 and n in s):
            return True
        span_words = set(_TOKEN.findall(n))
        if len(words) >= 4 and sum(w in span_words for w in words) / len(words) >= 0.7:
            return True
    return False


def main() -> None:
    hostile: list[str] = []
    benign: list[str] = []
    seen: set[str] = set()

    def keep(label: str, st: Statement) -> None:
        text = " ".join(st.text.split())
        if text in seen or foreign_statement(text) or len(_TOKEN.findall(text.lower())) < 3:
            return
        seen.add(text)
        (benign if label.startswith("corpus_") else hostile).append(f"{label}\t{text}")

    for folder in sorted(p for p in READ.iterdir() if p.is_dir()):
        for line in (folder / "hostile.jsonl").read_text("utf-8").splitlines():
            item = json.loads(line)
            spans = [str(s) for s in item.get("hostile_text") or []]
            if item["intent"] == "structure" or not spans:
                continue
            for st in statements(item):
                keep(item["intent"] if covered(st.text, spans) else "corpus_filler", st)
        for line in (folder / "benign.jsonl").read_text("utf-8").splitlines():
            for st in statements(json.loads(line)):
                keep("corpus_benign", st)
    (OUT / "hostile_corpora.tsv").write_text("\n".join(hostile) + "\n", "utf-8")
    (OUT / "benign_corpora.tsv").write_text("\n".join(benign) + "\n", "utf-8")
    print(f"{len(hostile)} hostile and {len(benign)} benign statements -> {OUT}")


if __name__ == "__main__":
    main()
