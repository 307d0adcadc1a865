from pathlib import Path

import pytest

from metaclaw_core import Settings


def test_config_file_in_home_is_read_and_env_overrides_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "mc"
    home.mkdir()
    (home / "config.toml").write_text(
        "[retrieval]\ntop_k = 7\nmin_similarity = 0.4\n[store]\nbatch_size = 64\n"
    )
    monkeypatch.setenv("METACLAW_HOME", str(home))
    monkeypatch.setenv("METACLAW_RETRIEVAL__TOP_K", "3")
    s = Settings()
    assert s.home == home
    assert s.retrieval.top_k == 3  # env beats file
    assert s.retrieval.min_similarity == 0.4  # file beats default
    assert s.store.batch_size == 64
    assert s.store_uri == str(home / "db")


def test_store_uri_can_point_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METACLAW_STORE__URI", "s3://bucket/metaclaw")
    s = Settings(home=tmp_path)
    assert s.store_uri == "s3://bucket/metaclaw"
    assert s.spool_dir == tmp_path / "spool"


def test_invalid_setting_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METACLAW_RETRIEVAL__TOP_K", "-2")
    with pytest.raises(ValueError, match="top_k"):
        Settings(home=tmp_path)


def test_configuration_docs_are_generated_from_the_settings() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, str(root / "scripts" / "gen_config_docs.py"), "--check"], cwd=root
    )
    assert proc.returncode == 0, "docs/configuration.md is stale: run scripts/gen_config_docs.py"
