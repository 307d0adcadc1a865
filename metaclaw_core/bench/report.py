"""Summaries, Markdown reports and plots of benchmark runs (one run or several side by side).

``summarize(run_dir)`` reads only the files a run wrote, so it works on a finished run, on
one still going (complete days and the rounds so far) and on one that crashed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from metaclaw_core.bench.runner import BenchError


def _natural(name: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def summarize(run_dir: Path) -> dict[str, Any]:
    """Scores per day, per question type and overall; skills and generations per day."""
    run_dir = Path(run_dir)
    manifest_path = run_dir / "run.json"
    if not manifest_path.is_file():
        raise BenchError(f"{run_dir}: not a benchmark run (no run.json)")
    manifest = _load(manifest_path)
    days_out: list[dict[str, Any]] = []
    all_scores: list[float] = []
    by_type: dict[str, list[float]] = {}
    for day_id in manifest.get("days", []):
        ddir = run_dir / "days" / day_id
        rounds = sorted(
            (p for p in ddir.glob("*.json") if p.name not in ("day.json", "start.json")),
            key=lambda p: _natural(p.stem),
        )
        results = [_load(p) for p in rounds]
        if not results:
            continue
        day_meta = _load(ddir / "day.json") if (ddir / "day.json").is_file() else {}
        start = _load(ddir / "start.json") if (ddir / "start.json").is_file() else {}
        scores = [float(r["score"]) for r in results]
        types: dict[str, list[float]] = {}
        for r in results:
            types.setdefault(r["type"], []).append(float(r["score"]))
            by_type.setdefault(r["type"], []).append(float(r["score"]))
        all_scores.extend(scores)
        gens = day_meta.get("generations")
        if gens is not None:  # the library's own record: added or rewritten that day
            learned = sorted({n for g in gens for n in [*g["added"], *g["updated"]]})
        else:
            evolutions = day_meta.get("evolutions", [])
            learned = sorted({name for e in evolutions for name in e.get("live", [])})
        days_out.append(
            {
                "day": day_id,
                "complete": bool(day_meta),
                "rounds": len(results),
                "score": _mean(scores),
                "by_type": {t: _mean(v) for t, v in sorted(types.items())},
                "generation_start": start.get("generation"),
                "generation_end": day_meta.get("generation_end"),
                "skills_learned": learned,
                "skills_live": len(day_meta.get("skills_live", [])),
                "zero_reasons": [
                    f"{r['round']}: {r['reason']}"
                    for r in results
                    if float(r["score"]) == 0.0 and r.get("reason")
                ],
                "errors": [f"{r['round']}: {r['error']}" for r in results if r.get("error")],
                "seconds": day_meta.get("seconds"),
            }
        )
    return {
        "run": str(run_dir),
        "mode": manifest.get("mode"),
        "model": manifest.get("model"),
        "suite": manifest.get("suite_name"),
        "days_planned": len(manifest.get("days", [])),
        "days_complete": sum(1 for d in days_out if d["complete"]),
        "rounds": len(all_scores),
        "score": _mean(all_scores),
        "by_type": {t: _mean(v) for t, v in sorted(by_type.items())},
        "days": days_out,
    }


def _label(s: dict[str, Any]) -> str:
    return f"{s['mode']} ({Path(s['run']).name})"


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def markdown(summaries: list[dict[str, Any]], plot_name: str | None = None) -> str:
    """A Markdown report: overall, per question type, per day, and each run's learning."""
    if not summaries:
        raise BenchError("no runs to report")
    labels = [_label(s) for s in summaries]
    lines = [f"# MetaClaw-Bench: {summaries[0].get('suite') or 'suite'}", ""]
    lines += ["| run | model | days | rounds | score |", "|---|---|---|---|---|"]
    for s, label in zip(summaries, labels, strict=True):
        days = f"{s['days_complete']}/{s['days_planned']}"
        lines.append(f"| {label} | {s['model']} | {days} | {s['rounds']} | {_fmt(s['score'])} |")
    common = _common_days(summaries)
    if len(summaries) > 1 and any(
        [d["day"] for d in s["days"] if d["complete"]] != common for s in summaries
    ):
        lines += [
            "",
            f"On the {len(common)} day(s) every run completed ({', '.join(common) or 'none'}):",
            "",
            "| run | rounds | score |",
            "|---|---|---|",
        ]
        for s, label in zip(summaries, labels, strict=True):
            scores = [d["score"] * d["rounds"] for d in s["days"] if d["day"] in common]
            rounds = sum(d["rounds"] for d in s["days"] if d["day"] in common)
            score = round(sum(scores) / rounds, 4) if rounds else None
            lines.append(f"| {label} | {rounds} | {_fmt(score)} |")
    types = sorted({t for s in summaries for t in s["by_type"]})
    lines += ["", "## Per question type", "", "| type | " + " | ".join(labels) + " |"]
    lines.append("|---|" + "---|" * len(labels))
    for t in types:
        cells = [_fmt(s["by_type"].get(t)) for s in summaries]
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    day_ids: list[str] = []
    for s in summaries:
        day_ids += [d["day"] for d in s["days"] if d["day"] not in day_ids]
    lines += ["", "## Per day", "", "| day | " + " | ".join(labels) + " |"]
    lines.append("|---|" + "---|" * len(labels))
    for day in day_ids:
        cells = []
        for s in summaries:
            d = next((x for x in s["days"] if x["day"] == day), None)
            cell = "–" if d is None else _fmt(d["score"]) + ("" if d["complete"] else " (partial)")
            cells.append(cell)
        lines.append(f"| {day} | " + " | ".join(cells) + " |")
    if plot_name:
        lines += ["", f"![accuracy per day]({plot_name})"]
    for s, label in zip(summaries, labels, strict=True):
        if s["mode"] == "baseline":
            continue
        lines += ["", f"## Learning: {label}", "", "| day | generation | skills learned |"]
        lines.append("|---|---|---|")
        for d in s["days"]:
            gen = f"{d['generation_start']} → {d['generation_end']}"
            learned = ", ".join(d["skills_learned"]) or "–"
            lines.append(f"| {d['day']} | {gen} | {learned} |")
    return "\n".join(lines) + "\n"


def _common_days(summaries: list[dict[str, Any]]) -> list[str]:
    """Days complete in every run, in the first run's order."""
    done = [{d["day"] for d in s["days"] if d["complete"]} for s in summaries]
    first = [d["day"] for d in summaries[0]["days"]] if summaries else []
    return [d for d in first if all(d in x for x in done)]


def plot(summaries: list[dict[str, Any]], path: Path) -> Path:
    """Accuracy per day, one bar per run side by side (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    day_ids: list[str] = []
    for s in summaries:
        day_ids += [d["day"] for d in s["days"] if d["day"] not in day_ids]
    n = max(1, len(summaries))
    width = 0.8 / n
    fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(day_ids) + 2), 3.8), dpi=110)
    for i, s in enumerate(summaries):
        scores = {d["day"]: d["score"] for d in s["days"]}
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(day_ids))]
        ys = [scores.get(day) or 0.0 for day in day_ids]
        ax.bar(xs, ys, width=width, label=f"{_label(s)}: {_fmt(s['score'])}")
    ax.set_xticks(range(len(day_ids)), day_ids, rotation=45, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.set_title("Accuracy per day")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(run_dirs: list[Path], out_dir: Path) -> dict[str, Any]:
    """Write ``report.md``, ``accuracy_per_day.png`` and ``report.json`` into ``out_dir``."""
    summaries = [summarize(d) for d in run_dirs]
    out_dir.mkdir(parents=True, exist_ok=True)
    png = plot(summaries, out_dir / "accuracy_per_day.png")
    md = out_dir / "report.md"
    md.write_text(markdown(summaries, png.name), encoding="utf-8")
    data = {"runs": summaries}
    (out_dir / "report.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    return {"markdown": str(md), "plot": str(png), "runs": summaries}
