"""The plugin's own Node tests (integrations/openclaw/test), run under Node 24 with the real
openclaw package resolving ``openclaw/plugin-sdk/plugin-entry``."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from tests.openclaw.conftest import ROOT, OpenClawTools

PLUGIN = ROOT / "integrations" / "openclaw"


def test_plugin_node_suite_passes(openclaw_tools: OpenClawTools, tmp_path: Path) -> None:
    # A copy beside a node_modules/openclaw link, so the repository stays free of node_modules.
    work = tmp_path / "plugin"
    shutil.copytree(PLUGIN, work, ignore=shutil.ignore_patterns("node_modules"))
    (work / "node_modules").mkdir()
    (work / "node_modules" / "openclaw").symlink_to(openclaw_tools.openclaw.resolve().parent)
    done = subprocess.run(
        [str(openclaw_tools.node), "--test", "--test-reporter=spec", "test/plugin.test.ts"],
        cwd=work,
        env=openclaw_tools.env(tmp_path / "home", tmp_path / "tmp"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    passed = re.search(r"\bpass (\d+)", done.stdout)
    assert passed and int(passed.group(1)) >= 8 and re.search(r"\bfail 0\b", done.stdout)
