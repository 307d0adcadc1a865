"""GRPO with the local backend on SmolLM2-135M-Instruct on a verifiable task.

Task: "answer with the current time as an ISO 8601 timestamp with a +08:00 offset". Prompts
are captured through a real engine into a real store (the query buffer), then the real
``GrpoTrainer`` runs N steps with the shaped check in
``metaclaw_core.train.rewards.iso_timestamp_reward``. Prints the mean reward per step, an
evaluation on held-out prompts before and after, step time and peak memory, and writes JSON.

    .venv/bin/python benchmarks/local_grpo.py --steps 40 --out /tmp/local_grpo.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metaclaw_core import CallContext, Message, MetaClaw, Settings
from metaclaw_core.train import GrpoTrainer, QueryBuffer, iso_timestamp_reward
from metaclaw_core.train.backend import SamplingParams
from metaclaw_core.train.checkpoints import CheckpointLog
from metaclaw_core.train.local_backend import LocalBackend
from metaclaw_core.train.tokenize import chat_messages

SYSTEM = "You are a scheduling assistant. Reply with one timestamp only."
ASKS = [
    "What time is it now in {city}? Answer as an ISO 8601 timestamp with the +08:00 offset.",
    "Give the current date and time for {city} in ISO 8601 format (offset +08:00).",
    "When does the {city} office open tomorrow? Reply with an ISO 8601 timestamp, +08:00.",
    "Log entry time for {city}: write it as ISO 8601 with a +08:00 offset.",
]
CITIES = ["Shanghai", "Singapore", "Perth", "Taipei", "Manila", "Kuala Lumpur", "Hong Kong"]
HELD_OUT = [
    "Convert 9:30 in the morning on 3 March 2026 in Beijing to ISO 8601 with +08:00.",
    "What is the ISO 8601 timestamp (offset +08:00) for noon today in Shenzhen?",
]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def evaluate(
    backend: LocalBackend, prompts: list[str], samples: int, max_tokens: int
) -> tuple[float, list[str]]:
    """Mean reward of ``samples`` completions per held-out prompt, and the texts."""
    reward = iso_timestamp_reward()
    scores, texts = [], []
    sampler = backend.training_sampler()
    for p in prompts:
        msgs = [Message(role="system", content=SYSTEM), Message(role="user", content=p)]
        tokens = backend.tokenizer.encode_chat(chat_messages(msgs))
        for c in sampler.sample(tokens, samples, SamplingParams(max_tokens=max_tokens)):
            text = backend.tokenizer.decode(c.tokens)
            texts.append(text)
            scores.append(reward(None, text))
    return statistics.fmean(s for s in scores if s is not None), texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=2, help="prompts per step")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--eval-samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    home = Path(tempfile.mkdtemp(prefix="mc-grpo-"))
    settings = Settings(home=home, load_entrypoints=False)
    settings.embedding.preload = False
    settings.store.flush_interval_s = 0.02
    t = settings.train
    t.group_size, t.prompts_per_step, t.max_new_tokens = args.group, args.prompts, args.max_tokens
    t.learning_rate, t.lora_rank, t.seed = args.lr, args.rank, args.seed
    t.checkpoint_every = 10

    engine = MetaClaw(settings)
    n_prompts = args.steps * args.prompts
    for i in range(n_prompts):
        ask = ASKS[i % len(ASKS)].format(city=CITIES[i % len(CITIES)])
        ctx = CallContext(
            messages=[Message(role="system", content=SYSTEM), Message(role="user", content=ask)]
        )
        engine.before_call(ctx)
        engine.after_call(ctx, "ok")
    engine.flush()

    started = time.perf_counter()
    backend = LocalBackend.from_settings(settings)
    backend.start()
    load_s = time.perf_counter() - started
    buffer = QueryBuffer(engine.store, engine.library.current_generation)
    trainer = GrpoTrainer(
        backend,
        buffer,
        iso_timestamp_reward(),
        t,
        checkpoints=CheckpointLog(engine.store),
    )
    before, before_texts = evaluate(backend, HELD_OUT, args.eval_samples, args.max_tokens)
    for text in before_texts[:4]:
        print(f"  before: {text!r}", flush=True)
    print(f"load {load_s:.1f}s; held-out mean reward before: {before:+.3f}", flush=True)
    rows = []
    for _ in range(args.steps):
        r = trainer.step()
        rows.append(
            {
                "step": r.step,
                "status": r.status,
                "mean_reward": r.mean_reward,
                "groups_kept": r.groups_kept,
                "seconds": round(r.seconds, 2),
                "loss": r.metrics.get("loss:sum"),
            }
        )
        mr = "-" if r.mean_reward is None else f"{r.mean_reward:+.3f}"
        print(
            f"step {len(rows):3d} {r.status:9s} reward {mr} kept {r.groups_kept}/{r.prompts} "
            f"{r.seconds:.1f}s rss {peak_rss_mb():.0f}MB",
            flush=True,
        )
    after, after_texts = evaluate(backend, HELD_OUT, args.eval_samples, args.max_tokens)
    for text in after_texts[:4]:
        print(f"  after: {text!r}", flush=True)
    rewards = [row["mean_reward"] for row in rows if row["mean_reward"] is not None]
    q = max(1, len(rewards) // 4)
    result = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()}-core {platform.machine()}",
        "model": backend.model_name,
        "args": vars(args) | {"out": str(args.out) if args.out else None},
        "load_s": round(load_s, 1),
        "step_s_median": statistics.median(row["seconds"] for row in rows),
        "peak_rss_mb": round(peak_rss_mb()),
        "heldout_before": round(before, 3),
        "heldout_after": round(after, 3),
        "reward_first_quarter": round(statistics.fmean(rewards[:q]), 3) if rewards else None,
        "reward_last_quarter": round(statistics.fmean(rewards[-q:]), 3) if rewards else None,
        "heldout_samples_before": before_texts,
        "heldout_samples_after": after_texts,
        "steps": rows,
    }
    summary = {k: v for k, v in result.items() if not k.startswith(("steps", "heldout_samples"))}
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    trainer.close()
    engine.close()


if __name__ == "__main__":
    main()
