"""Scoring a round: multiple-choice answers in ``\\bbox{...}`` and file checks run in the workspace.

* multi-choice: ``1 - (FP + FN) / options`` over the letters of the last ``\\bbox{...}`` in
  the answer; no box scores 0.
* file check: the round's command runs in the workspace through the shell, in its own process
  group, with a time-out (the whole group is killed), no network where the kernel allows it
  (``unshare --net``), and the interpreter of this process first on ``PATH`` so ``python``
  means a Python that exists. Passing means the expected exit status.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from metaclaw_core.bench.suite import Round

BBOX = re.compile(r"\\?bbox\s*\{([^{}]*)\}", re.IGNORECASE)
LETTER = re.compile(r"\b([A-Z])\b")
OUTPUT_CHARS = 4000


@dataclass(frozen=True)
class Score:
    score: float
    detail: str
    selected: tuple[str, ...] = ()


def parse_bbox(text: str) -> tuple[str, ...] | None:
    """The option letters of the last ``\\bbox{...}`` in ``text`` (None when there is none)."""
    boxes = BBOX.findall(text or "")
    if not boxes:
        return None
    return tuple(sorted(set(LETTER.findall(boxes[-1].upper()))))


def score_multi_choice(rnd: Round, answer_text: str) -> Score:
    selected = parse_bbox(answer_text)
    if selected is None:
        return Score(0.0, "no \\bbox{...} answer")
    chosen, right = set(selected), set(rnd.answer)
    fp = sorted(chosen - right)
    fn = sorted(right - chosen)
    unknown = sorted(chosen - set(rnd.options))
    score = max(0.0, 1.0 - (len(fp) + len(fn)) / len(rnd.options))
    detail = f"selected {','.join(selected) or '-'}; answer {','.join(rnd.answer)}"
    if fp or fn:
        detail += f"; wrong {','.join(fp) or '-'}, missed {','.join(fn) or '-'}"
    if unknown:
        detail += f"; not an option: {','.join(unknown)}"
    return Score(round(score, 6), detail, selected)


def feedback_text(rnd: Round, score: Score) -> str:
    """What the user says about the answer, from the round's feedback texts."""
    fb = rnd.feedback
    if score.score >= 1.0:
        return str(fb.get("correct") or "Correct.")
    if rnd.type == "file_check":
        return str(fb.get("incorrect") or "That is not right.")
    per_option = fb.get("options") or {}
    wrong = sorted(set(score.selected) ^ set(rnd.answer))
    # Each note names its option's text, so the feedback (and a skill made of it) stands alone.
    notes = [
        f"{o} ({rnd.options[o]}): {per_option[o]}" if o in rnd.options else str(per_option[o])
        for o in wrong
        if o in per_option
    ]
    head = "Not quite." if score.selected else "Please answer in the \\bbox{...} format."
    return " ".join([head, *notes]) if notes else head


@functools.cache
def _unshare_prefix() -> tuple[str, ...]:
    """``unshare --net`` (and, if needed, ``--map-root-user``) when it works here, else ()."""
    exe = shutil.which("unshare")
    if exe is None:
        return ()
    for extra in ((), ("--map-root-user",)):
        try:
            ok = subprocess.run(
                [exe, "--net", *extra, "true"], capture_output=True, timeout=10, check=False
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if ok.returncode == 0:
            return (exe, "--net", *extra)
    return ()


def network_isolation() -> bool:
    """Whether check commands run without network here (``unshare --net`` works)."""
    return bool(_unshare_prefix())


def check_env() -> dict[str, str]:
    """A small environment for check commands: this interpreter first on PATH, no secrets."""
    keep = ("HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PATH"] = os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")]
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_check(
    rnd: Round, workspace: Path, *, timeout_s: float = 30.0, isolate_network: bool = True
) -> Score:
    """Run the round's check command in ``workspace``."""
    prefix: tuple[str, ...] = _unshare_prefix() if isolate_network else ()
    argv = [*prefix, "/bin/sh", "-c", rnd.command]
    try:
        proc = subprocess.Popen(
            argv,
            cwd=workspace,
            env=check_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return Score(0.0, f"check could not start: {exc}")
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, _ = proc.communicate()
        tail = _tail(out)
        return Score(0.0, f"check timed out after {timeout_s:g} s" + (f": {tail}" if tail else ""))
    tail = _tail(out)
    net = "" if prefix else " (network not isolated)"
    if proc.returncode == rnd.expect_exit:
        return Score(1.0, f"check passed (exit {proc.returncode}){net}" + _suffix(tail))
    return Score(
        0.0,
        f"check failed: exit {proc.returncode}, expected {rnd.expect_exit}{net}" + _suffix(tail),
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _tail(out: bytes | None) -> str:
    text = (out or b"").decode("utf-8", "replace").strip()
    return text[-OUTPUT_CHARS:]


def _suffix(tail: str) -> str:
    return f": {tail}" if tail else ""
