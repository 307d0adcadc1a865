"""Node 24 and the real openclaw package, installed by scripts/setup-openclaw.sh (cached in
.cache/openclaw). Without them these tests skip and say why, unless
METACLAW_REQUIRE_OPENCLAW=1 (CI), where a failed install fails the run."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup-openclaw.sh"
INSTALL_TIMEOUT_S = 420  # under pytest-timeout's 600 s, which also counts this fixture


@dataclass(frozen=True)
class OpenClawTools:
    node_bin: Path
    openclaw: Path

    @property
    def node(self) -> Path:
        return self.node_bin / "node"

    def env(self, home: Path, tmp: Path, **extra: str) -> dict[str, str]:
        """An environment for openclaw: its own HOME and temp dir, Node 24 first on PATH."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENCLAW_", "METACLAW_", "NODE_"))
        }
        tmp.mkdir(parents=True, exist_ok=True)
        env.update(
            HOME=str(home),
            TMPDIR=str(tmp),
            PATH=f"{self.node_bin}{os.pathsep}{env.get('PATH', '')}",
            NO_COLOR="1",
            **extra,
        )
        return env


def _unavailable(reason: str) -> None:
    if os.environ.get("METACLAW_REQUIRE_OPENCLAW") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def openclaw_tools() -> OpenClawTools:
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
        _unavailable(f"Node 24 / openclaw could not be installed: {exc}")
        raise
    if done.returncode != 0:
        _unavailable(
            "Node 24 / openclaw could not be installed by scripts/setup-openclaw.sh "
            f"(exit {done.returncode}): {done.stderr.strip()[-1500:]}"
        )
    paths = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    tools = OpenClawTools(Path(paths["NODE_BIN"]), Path(paths["OPENCLAW"]))
    if not (tools.node.exists() and tools.openclaw.exists()):
        _unavailable(f"scripts/setup-openclaw.sh reported missing files: {paths}")
    return tools
