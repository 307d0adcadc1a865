"""What importing metaclaw leaves unimported: the heavy libraries load where first used.

Each check runs in a fresh interpreter and reads ``sys.modules``; nothing is timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The libraries that cost the host hundreds of milliseconds or megabytes at import.
HEAVY = (
    "openai",
    "lancedb",
    "pyarrow",
    "fastapi",
    "uvicorn",
    "starlette",
    "torch",
    "transformers",
    "sentence_transformers",
)
INTEGRATIONS = {
    "metaclaw_langchain": ROOT / "integrations" / "langchain",
    "metaclaw_langgraph": ROOT / "integrations" / "langgraph",
    "metaclaw_llamaindex": ROOT / "integrations" / "llamaindex",
}


# What the engine runs on, loaded with the first ``MetaClaw(...)``, not with the class.
ENGINE_RUNTIME = (
    "numpy",
    "pydantic_settings",
    "metaclaw_core.config",
    "metaclaw_core.store.db",
    "metaclaw_core.evolve.evolver",
    "metaclaw_core.llm",
)


def heavy_after(code: str, *extra_path: Path, watch: tuple[str, ...] = HEAVY) -> list[str]:
    """The modules of ``watch`` present in ``sys.modules`` once ``code`` has run in a new
    process."""
    probe = (
        "import json, sys\n"
        f"{code}\n"
        f"print(json.dumps(sorted(m for m in {list(watch)!r} if m in sys.modules)))\n"
    )
    env_path = ":".join(str(p) for p in (ROOT, *extra_path))
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": env_path, "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_importing_the_package_loads_none_of_the_heavy_libraries() -> None:
    assert heavy_after("import metaclaw_core") == []


def test_every_public_name_imports_without_the_heavy_libraries() -> None:
    code = "import metaclaw_core\nfor name in metaclaw_core.__all__: getattr(metaclaw_core, name)"
    assert heavy_after(code) == []


def test_the_engine_module_imports_without_the_heavy_libraries() -> None:
    assert heavy_after("from metaclaw_core.engine import MetaClaw") == []


def test_the_engine_class_defers_its_runtime_to_the_first_engine() -> None:
    code = "from metaclaw_core import MetaClaw"
    assert heavy_after(code, watch=HEAVY + ENGINE_RUNTIME) == []


def test_the_first_engine_loads_its_runtime_but_not_the_evolver(tmp_path: Path) -> None:
    code = (
        "from metaclaw_core import MetaClaw, Settings\n"
        f"engine = MetaClaw(Settings(home={str(tmp_path)!r}), capture=False)\n"
        "assert 'metaclaw_core.store.db' in sys.modules and 'numpy' in sys.modules\n"
        "engine.close()"
    )
    # the store's libraries may be loading on the engine's threads; the evolver and its LLM
    # client are loaded only when something evolves
    watch = ("openai", "torch", "sentence_transformers", "metaclaw_core.evolve.evolver")
    assert heavy_after(code, watch=watch) == []


@pytest.mark.parametrize("package", sorted(INTEGRATIONS))
def test_an_integration_package_imports_without_the_heavy_libraries(package: str) -> None:
    assert heavy_after(f"import {package}", INTEGRATIONS[package]) == []
    # and without the engine's runtime: a host pays for it when it makes the engine
    watch = ("pydantic_settings", "metaclaw_core.config", "metaclaw_core.evolve.evolver")
    assert heavy_after(f"import {package}", INTEGRATIONS[package], watch=watch) == []


def test_cli_help_loads_none_of_the_heavy_libraries_nor_the_engine() -> None:
    code = (
        "sys.argv = ['metaclaw', '--help']\n"
        "from metaclaw_core.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "assert 'metaclaw_core.engine' not in sys.modules, 'the engine loaded for --help'\n"
        "assert 'metaclaw_core.config' not in sys.modules, 'the settings loaded for --help'"
    )
    assert heavy_after(code) == []


def test_a_lazy_name_that_does_not_exist_is_an_attribute_error() -> None:
    import metaclaw_core

    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = metaclaw_core.NoSuchThing  # type: ignore[attr-defined]
