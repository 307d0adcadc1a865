"""Built-in retrieval: cosine top-k over the in-memory snapshot, with a similarity floor."""

from __future__ import annotations

from metaclaw_core.config import Settings
from metaclaw_core.embeddings import Vector
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import CallContext, ScoredSkill
from metaclaw_core.skills.index import SkillSnapshot


@hookimpl(trylast=True)
def metaclaw_retrieve(
    query: str,
    query_vector: Vector | None,
    snapshot: SkillSnapshot,
    ctx: CallContext,
    settings: Settings,
) -> list[ScoredSkill]:
    if query_vector is None or not query:
        return []
    k = settings.retrieval.top_k
    wanted = ctx.metadata.get("top_k")  # a per-call limit, e.g. the OpenClaw plugin's topK
    if isinstance(wanted, int) and not isinstance(wanted, bool) and 0 <= wanted <= 50:
        k = wanted
    return snapshot.top_k(query_vector, k, settings.retrieval.min_similarity)
