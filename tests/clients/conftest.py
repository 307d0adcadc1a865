"""The real coding-agent clients, Claude Code and the Codex CLI, installed from npm by
scripts/setup-coding-agents.sh (cached in .cache/coding-agents). Without them these tests skip
and say why, unless METACLAW_REQUIRE_CODING_AGENTS=1 (CI), where a failed install fails the
run."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup-coding-agents.sh"
INSTALL_TIMEOUT_S = 420  # under pytest-timeout's 600 s, which also counts this fixture
RUN_TIMEOUT_S = 120


@dataclass(frozen=True)
class CodingAgents:
    claude: Path
    codex: Path

    @staticmethod
    def env(home: Path, **extra: str) -> dict[str, str]:
        """A private HOME and temp dir, none of the caller's keys or agent settings."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "CLAUDE_", "CODEX_", "OPENAI_", "METACLAW_"))
        }
        tmp = home / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env.update(HOME=str(home), TMPDIR=str(tmp), NO_COLOR="1", **extra)
        return env


def _unavailable(reason: str) -> None:
    if os.environ.get("METACLAW_REQUIRE_CODING_AGENTS") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def coding_agents() -> CodingAgents:
    try:
        done = subprocess.run(
            ["bash", str(SETUP)],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        _unavailable(f"Claude Code / Codex could not be installed: {exc}")
        raise
    if done.returncode != 0:
        _unavailable(
            "Claude Code / Codex could not be installed by scripts/setup-coding-agents.sh "
            f"(exit {done.returncode}): {done.stderr.strip()[-1500:]}"
        )
    paths = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    agents = CodingAgents(Path(paths["CLAUDE"]), Path(paths["CODEX"]))
    if not (agents.claude.exists() and agents.codex.exists()):
        _unavailable(f"scripts/setup-coding-agents.sh reported missing files: {paths}")
    return agents


def run_agent(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a client headless: stdin closed (with an open pipe both wait for input)."""
    return subprocess.run(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
