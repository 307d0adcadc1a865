"""Admission review: live / quarantined / rejected per corpus and category, and review time.

    .venv/bin/python benchmarks/vetting.py                  # the corpora in tests/data/vetting
    .venv/bin/python benchmarks/vetting.py DIR [DIR ...]    # also other hostile/benign.jsonl
    .venv/bin/python benchmarks/vetting.py --released PATH  # and a SKILL.md library
    .venv/bin/python benchmarks/vetting.py --no-repo-corpora DIR   # only DIR's corpora

With the optional LLM reviewer configured (``METACLAW_VETTING__REVIEWER__BASE_URL`` and the
rest of ``[vetting.reviewer]``, e.g. a local ``metaclaw models serve``), its votes are part of
every review, and the time per candidate includes them.

Every candidate goes through every ``metaclaw_vet_skill`` check of a default engine (the
evolver's path, as a learned skill, against an empty live library), offline, with the
engine's default embedder. A JSONL line is ``{"name", "description", "body", "intent"}``;
``intent`` is a risk category for hostile corpora and ``benign`` for benign ones. A line the
``Skill`` model itself refuses (a multi-line description, say) counts as rejected. Prints
per corpus and per intent the three outcomes, the review time per candidate (p50 / p99 /
mean, warm), and the benign items held back with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic import ValidationError  # noqa: E402

from metaclaw_core import MetaClaw, Settings, Skill  # noqa: E402
from metaclaw_core.skills.skillmd import read_skill_dir  # noqa: E402
from metaclaw_core.skills.verdict import Review  # noqa: E402

OUTCOME = {"live": "live", "quarantine": "quarantined", "reject": "rejected"}


def load(path: Path) -> list[tuple[dict[str, str], Skill | None, str]]:
    out: list[tuple[dict[str, str], Skill | None, str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        try:
            skill = Skill(
                name=d["name"], description=d["description"], body=d["body"], source="evolver"
            )
            out.append((d, skill, ""))
        except ValidationError as exc:
            out.append((d, None, exc.errors()[0]["msg"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", type=Path, help="more folders with hostile/benign.jsonl")
    ap.add_argument("--released", type=Path, help="a SKILL.md library to review as imports")
    ap.add_argument("--show", type=int, default=12, help="held-back benign items to list")
    ap.add_argument(
        "--no-repo-corpora",
        action="store_true",
        help="skip tests/data/vetting (only the folders given)",
    )
    args = ap.parse_args()

    corpora: dict[str, list[tuple[dict[str, str], Skill | None, str]]] = {}
    repo = [] if args.no_repo_corpora else [ROOT / "tests" / "data" / "vetting"]
    for folder in [*repo, *args.dirs]:
        for kind in ("hostile", "benign"):
            f = folder / f"{kind}.jsonl"
            if f.is_file():
                corpora[f"{kind} ({folder.name})"] = load(f)
    if args.released:
        corpora[f"released ({args.released.name})"] = [
            ({"name": s.name, "intent": "benign"}, s, "") for s in read_skill_dir(args.released)
        ]

    with tempfile.TemporaryDirectory() as home:
        engine = MetaClaw(Settings(home=Path(home)), capture=False)
        try:
            t0 = time.perf_counter()
            engine.wait_ready(120)
            warm = Skill(name="warm-up", description="Use when warming up.", body="Be brief.")
            engine.vet(warm, [])
            print(f"engine + review ready in {time.perf_counter() - t0:.1f} s")
            times: list[float] = []
            for label, items in corpora.items():
                per: dict[str, Counter[str]] = defaultdict(Counter)
                held: list[str] = []
                for d, skill, error in items:
                    intent = d.get("intent", "?")
                    if skill is None:
                        per[intent]["rejected"] += 1
                        if intent == "benign":
                            held.append(f"  rejected {d['name']}: {error}")
                        continue
                    start = time.perf_counter()
                    review = Review(engine.vet(skill, []))
                    times.append(time.perf_counter() - start)
                    outcome = OUTCOME[review.verdict]
                    per[intent][outcome] += 1
                    if intent == "benign" and outcome != "live":
                        held.append(f"  {outcome} {d['name']}: {'; '.join(review.reasons())[:220]}")
                total: Counter[str] = Counter()
                for c in per.values():
                    total.update(c)
                n = sum(total.values())
                print(
                    f"\n{label}: {n} candidates — live {total['live']}, quarantined "
                    f"{total['quarantined']}, rejected {total['rejected']}"
                    f" ({100 * total['live'] / max(n, 1):.1f} % live)"
                )
                if len(per) > 1:
                    for intent in sorted(per):
                        c = per[intent]
                        print(
                            f"  {intent:13s} live {c['live']:3d}  quarantined "
                            f"{c['quarantined']:3d}  rejected {c['rejected']:3d}"
                        )
                for line in held[: args.show]:
                    print(line)
            if times:
                ms = sorted(t * 1000 for t in times)
                p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
                print(
                    f"\nreview time per candidate ({len(ms)} reviewed): p50 "
                    f"{statistics.median(ms):.1f} ms, p99 {p99:.1f} ms, "
                    f"mean {statistics.fmean(ms):.1f} ms (embedder: "
                    f"{engine.status().get('embedding_model')})"
                )
        finally:
            engine.close()


if __name__ == "__main__":
    main()
