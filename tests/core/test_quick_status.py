"""`metaclaw status` answers a local store from its manifests and the snapshot cache, with the
same content as reading the store through LanceDB, and reads the store whenever the cache is
not provably current."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from metaclaw_core import CallContext, Message, MetaClaw, Skill
from metaclaw_core.cli import app
from metaclaw_core.config import Settings
from metaclaw_core.skills.snapshot_cache import cache_path
from metaclaw_core.status import quick_status
from metaclaw_core.store.db import GENERATIONS, SKILLS, TRAJECTORIES
from metaclaw_core.store.manifest import ManifestError, manifest_rows, table_rows
from tests.support.engines import SharedEmbedder, make_settings

ROOT = Path(__file__).resolve().parents[2]


def skill(name: str) -> Skill:
    return Skill(name=name, description=f"Use when {name} matters.", body=f"Do {name} well.")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, minilm: Any) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("METACLAW_HOME", str(h))
    monkeypatch.setenv("METACLAW_LOAD_ENTRYPOINTS", "false")
    with MetaClaw(make_settings(h), plugins=[SharedEmbedder(minilm)]) as engine:
        assert engine.wait_ready(60)
        engine.add_skills([skill("alpha"), skill("beta")])
        engine.add_skills(skill("gamma"))
        for i in range(5):
            ctx = CallContext(messages=[Message(role="user", content=f"task number {i}")])
            engine.after_call(ctx, "ok", injection=engine.before_call(ctx))
        assert engine.flush(30)
        engine.library.retire("beta")
        # deletions in the trajectories table: rows rewritten in place
        engine.trajectories.reembed(lambda t: minilm.embed_documents(t), "another-model")
    return h


def status(*extra: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["status", "--json", *extra], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def comparable(data: dict[str, Any]) -> dict[str, Any]:
    # how long ago the engine's refresher last looked: timing, not content
    return {k: v for k, v in data.items() if k != "staleness_s"}


def test_the_quick_status_says_what_reading_the_store_says(home: Path) -> None:
    settings = Settings()
    quick = quick_status(settings)
    assert quick is not None
    assert quick["generation"] == 3 and quick["live_skills"] == 2 and quick["trajectories"] == 5
    assert comparable(status()) == comparable(status("--read-store"))
    assert comparable(quick) == comparable(status("--read-store"))


def test_manifest_counts_match_lancedb_with_deleted_rows(home: Path) -> None:
    import lancedb

    db = lancedb.connect(str(home / "db"))
    for name in (SKILLS, GENERATIONS, TRAJECTORIES):
        assert table_rows(home / "db", name) == db.open_table(name).count_rows()
    assert table_rows(home / "db", "no_such_table") is None


def test_a_stale_or_missing_cache_reads_the_store(home: Path, minilm: Any) -> None:
    path = cache_path(home, str(home / "db"))
    old = path.with_suffix(".old")
    shutil.copy(path, old)
    with MetaClaw(make_settings(home), plugins=[SharedEmbedder(minilm)]) as engine:
        assert engine.wait_ready(60)
        engine.add_skills(skill("delta"))
    shutil.copy(old, path)  # the cache of generation 3; the store is at 4
    assert quick_status(Settings()) is None
    data = status()
    assert data["generation"] == 4 and data["live_skills"] == 3
    path.unlink()
    assert quick_status(Settings()) is None
    assert status()["generation"] == 4


def test_a_damaged_manifest_is_an_error_not_a_count(tmp_path: Path) -> None:
    with pytest.raises(ManifestError):
        manifest_rows(b"not a manifest at all, no footer")
    table = tmp_path / f"{TRAJECTORIES}.lance" / "_versions"
    table.mkdir(parents=True)
    (table / "18446744073709551614.manifest").write_bytes(b"\x00" * 8 + b"LANC")
    with pytest.raises(ManifestError):
        table_rows(tmp_path, TRAJECTORIES)
    # the command then reads the store as it always did (and says what is wrong there)
    settings = Settings(home=tmp_path / "h", load_entrypoints=False)
    settings.store.uri = str(tmp_path)
    assert quick_status(settings) is None


def test_the_quick_status_imports_no_lancedb(home: Path) -> None:
    code = (
        "import sys\n"
        "sys.argv = ['metaclaw', 'status', '--json']\n"
        "from metaclaw_core.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in ('lancedb', 'pyarrow', 'torch') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PYTHONPATH": str(ROOT),
            "HF_HUB_OFFLINE": "1",
            "PATH": "/usr/bin:/bin",
            "METACLAW_HOME": str(home),
            "METACLAW_LOAD_ENTRYPOINTS": "false",
        },
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "LOADED []"
    assert json.loads(done.stdout[: done.stdout.rindex("LOADED")])["live_skills"] == 2
