"""The engine over HTTP for hosts that are not Python: inject, capture, feedback, sessions,
skills and status (``/v1/...``). Routes that touch the store are plain ``def`` routes, which
FastAPI runs on worker threads; the hot-path routes are ``async`` and never wait on I/O."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, status
from fastapi.responses import JSONResponse

from metaclaw_core import __version__
from metaclaw_core.models import CallContext, Message, ModelOutput, Trajectory
from metaclaw_core.service.agent_scope import STATE_ALLOWED, request_agent
from metaclaw_core.service.errors import error_response
from metaclaw_core.service.proxy import redact_url
from metaclaw_core.service.schemas import (
    AddSkillsRequest,
    CaptureRequest,
    CaptureResponse,
    FeedbackRequest,
    FeedbackResponse,
    GenerationResponse,
    InjectedSkill,
    InjectRequest,
    InjectResponse,
    RetireSkillsRequest,
    SessionEndRequest,
    SessionEndResponse,
    SkillOut,
    SkillsResponse,
)
from metaclaw_core.service.state import ServiceState, service_state

log = logging.getLogger("metaclaw.service")
router = APIRouter(prefix="/v1")
State = Annotated[ServiceState, Depends(service_state)]
# The agent a request is for: header X-MetaClaw-Agent or the prefix /agents/{id}, checked
# against the token's agents before any route runs (service/agent_scope.py).
Agent = Annotated[str, Depends(request_agent)]
READ_FLUSH_TIMEOUT_S = 2.0


@router.post("/inject", response_model=InjectResponse, tags=["hot path"])
async def inject(req: InjectRequest, state: State, agent: Agent) -> InjectResponse:
    """Choose the skills for a call and render the block to append to its system prompt."""
    metadata = dict(req.metadata)
    if req.top_k is not None:
        metadata["top_k"] = req.top_k
    ctx = CallContext(
        messages=req.messages,
        task=req.task,
        session_id=req.session_id,
        framework=req.framework,
        model=req.model,
        metadata=metadata,
        agent=agent,
        **({"call_id": req.call_id} if req.call_id else {}),
    )
    injection = await state.inject(ctx)
    return InjectResponse(
        call_id=injection.call_id,
        text=injection.text,
        skill_ids=injection.skill_names,
        skills=[
            InjectedSkill(name=s.skill.name, score=round(s.score, 4)) for s in injection.skills
        ],
        generation=injection.generation,
        query=injection.query,
        degraded=injection.degraded,
    )


def _split_output(
    messages: list[Message], output: ModelOutput | str | None
) -> tuple[list[Message], ModelOutput | str | None]:
    """Without an explicit output, a trailing assistant message is the call's answer."""
    if output is not None or not messages or messages[-1].role != "assistant":
        return messages, output
    last = messages[-1]
    return messages[:-1], ModelOutput(text=last.content, tool_calls=last.tool_calls)


@router.post("/trajectories", response_model=CaptureResponse, tags=["hot path"])
async def capture(req: CaptureRequest, state: State, agent: Agent) -> CaptureResponse:
    """Capture a finished call (or agent turn). Durable (journaled) when this returns."""
    messages, output = _split_output(req.messages, req.output)
    metadata = dict(req.metadata)
    if req.success is not None:
        metadata["success"] = req.success
    error = req.error
    if req.success is False and not error:
        error = "the host reported the run as failed"
    ctx = CallContext(
        messages=messages,
        session_id=req.session_id,
        framework=req.framework,
        model=req.model,
        metadata=metadata,
        agent=agent,
        **({"call_id": req.call_id} if req.call_id else {}),
    )
    tid = await state.capture(ctx, output, error=error, latency_ms=req.latency_ms)
    return CaptureResponse(captured=tid is not None, trajectory_id=tid, call_id=ctx.call_id)


@router.get("/trajectories", tags=["trajectories"])
def recent_trajectories(
    state: State,
    agent: Agent,
    session_id: Annotated[str | None, Query(max_length=256)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 20,
) -> list[dict[str, Any]]:
    """The newest trajectories (without message bodies), waiting briefly for queued ones."""
    state.engine.flush(READ_FLUSH_TIMEOUT_S)
    found = state.engine.trajectories.recent(limit, session_id=session_id, agent=agent)
    return [t.model_dump(mode="json", exclude={"messages"}) for t in found]


@router.get("/trajectories/{trajectory_id}", response_model=Trajectory, tags=["trajectories"])
def get_trajectory(trajectory_id: str, state: State, agent: Agent) -> Trajectory | JSONResponse:
    state.engine.flush(READ_FLUSH_TIMEOUT_S)
    t = state.engine.trajectories.get(trajectory_id)
    if t is None or t.agent != agent:  # another agent's: as if it did not exist
        return error_response(404, f"no trajectory {trajectory_id!r}", type="not_found")
    return t


@router.post("/feedback", response_model=FeedbackResponse, tags=["learning"])
async def feedback(
    req: FeedbackRequest, state: State, agent: Agent, request: Request
) -> FeedbackResponse | JSONResponse:
    """Record a reward in [-1, 1] for a trajectory (by id, call id, or a session's latest)."""
    tid = req.trajectory_id
    if tid is None and req.call_id is not None:
        tid = state.ledger.trajectory_for_call(req.call_id)
        if tid is None:
            return error_response(
                404,
                f"no capture of call {req.call_id!r} in this service's memory (not captured yet, "
                "or too old): send the trajectory_id instead",
                type="not_found",
            )
    if tid is None and req.session_id is not None:
        tid = state.ledger.last_trajectory(req.session_id)
        if tid is None:
            return error_response(
                404, f"no capture of session {req.session_id!r} seen yet", type="not_found"
            )
    assert tid is not None
    if getattr(request.state, STATE_ALLOWED, None) is not None:
        # A token limited to some agents rates only their trajectories: the one named must
        # be the request's agent's (read from the store; unknown counts as not).
        def owner() -> str | None:
            state.engine.flush(READ_FLUSH_TIMEOUT_S)
            return state.engine.trajectories.agents_of([tid]).get(tid)

        if await asyncio.to_thread(owner) != agent:
            return error_response(404, f"no trajectory {tid!r}", type="not_found")
    reward = await asyncio.to_thread(
        state.engine.feedback, tid, req.reward, source=req.source, detail=req.detail
    )
    state.metrics.feedback.inc(req.source)
    return FeedbackResponse(trajectory_id=tid, reward=reward.value, source=reward.source)


@router.post("/sessions/{session_id}/end", response_model=SessionEndResponse, tags=["learning"])
def end_session(
    session_id: str, state: State, req: SessionEndRequest | None = None
) -> SessionEndResponse:
    """Mark a host session finished; observers (the evolver) hear of it with its captures."""
    rec = state.ledger.end(session_id)
    state.metrics.sessions_ended.inc()
    hook = getattr(state.engine.hook, "metaclaw_session_ended", None)
    if hook is not None:
        try:
            hook(
                session_id=session_id,
                reason=req.reason if req else None,
                trajectory_ids=rec.trajectory_ids,
            )
        except Exception as exc:
            state.engine.faults.record("session end observer", exc)
    return SessionEndResponse(
        session_id=session_id,
        captured=rec.captured,
        failures=rec.failures,
        trajectory_ids=rec.trajectory_ids,
    )


@router.get("/skills", response_model=SkillsResponse, tags=["skills"])
def list_skills(state: State, agent: Agent) -> SkillsResponse:
    """The skills the request's agent is served: its own live ones and the shared ones it
    receives, at its generation."""
    lib = state.engine.library_of(agent)
    generation = lib.current_generation()
    return SkillsResponse(generation=generation, skills=[SkillOut.of(s) for s in lib.visible()])


@router.get("/skills/pending", tags=["skills"])
def pending_skills(state: State, agent: Agent) -> dict[str, Any]:
    """Skills held for a person (quarantined by vetting, or waiting under manual review),
    with the findings that held them."""
    held = state.engine.library_of(agent).pending_reviews()
    return {
        "pending": [
            {
                **SkillOut.of(skill).model_dump(mode="json"),
                "verdict": review.verdict,
                "findings": [f.to_json() for f in review.findings],
            }
            for skill, review in held
        ]
    }


@router.get("/skills/evidence", tags=["skills"])
def skills_evidence(state: State, agent: Agent, name: str | None = None) -> dict[str, Any]:
    """Evidence per skill: its replays (fixed, regressed) and its holdout (calls per arm,
    lift, interval, state), as `metaclaw skills evidence --json`."""
    from fastapi.encoders import jsonable_encoder

    from metaclaw_core.evolve.evidence import skill_evidence

    return {"skills": jsonable_encoder(skill_evidence(state.engine, name, agent=agent))}


@router.get("/report", tags=["skills"])
def learning_report(state: State, agent: Agent) -> dict[str, Any]:
    """The learning curve of the request's agent: mean reward and failure rate per
    generation and per day."""
    from metaclaw_core.evolve.evidence import learning_curve

    return learning_curve(state.engine, agent)


@router.get("/skills/{name}", response_model=SkillOut, tags=["skills"])
def get_skill(name: str, state: State, agent: Agent) -> SkillOut:
    for s in state.engine.library_of(agent).visible():
        if s.name == name:
            return SkillOut.of(s)
    return SkillOut.of(state.engine.library_of(agent).get(name))  # raises: not found


@router.post(
    "/skills",
    response_model=GenerationResponse,
    status_code=status.HTTP_201_CREATED,
    tags=["skills"],
)
def add_skills(req: AddSkillsRequest, state: State, agent: Agent) -> GenerationResponse:
    """Add skills to the request's agent's library (vetted); one new generation, live for
    its next call."""
    lib = state.engine.library_of(agent)
    gen = lib.add([s.to_skill() for s in req.skills], reason=req.reason)
    return GenerationResponse(generation=gen)


@router.post("/skills/retire", response_model=GenerationResponse, tags=["skills"])
def retire_skills(req: RetireSkillsRequest, state: State, agent: Agent) -> GenerationResponse:
    gen = state.engine.library_of(agent).retire(req.names, reason=req.reason)
    return GenerationResponse(generation=gen)


@router.delete("/skills/{name}", response_model=GenerationResponse, tags=["skills"])
def retire_skill(name: str, state: State, agent: Agent) -> GenerationResponse:
    gen = state.engine.library_of(agent).retire([name], reason="retired through the API")
    return GenerationResponse(generation=gen)


@router.get("/generations", tags=["skills"])
def generations(state: State, agent: Agent) -> list[dict[str, Any]]:
    return [g.model_dump(mode="json") for g in state.engine.library_of(agent).history()]


@router.get("/status", tags=["service"])
def service_status(state: State, request: Request) -> dict[str, Any]:
    """Engine status (paths, counts, generation, health) and the service's own. Under a
    token limited to some agents, the agents listed are only those."""
    proxy = state.settings.proxy
    engine_status = state.engine.status()
    allowed = getattr(request.state, STATE_ALLOWED, None)
    if allowed is not None and isinstance(engine_status.get("agents"), dict):
        engine_status["agents"] = {a: v for a, v in engine_status["agents"].items() if a in allowed}
    return {
        "service": {
            "version": __version__,
            "uptime_s": round(time.time() - state.started_at, 3),
            "auth": state.settings.service.token is not None,
            "proxy": {
                "upstream_base_url": redact_url(proxy.upstream_base_url),
                "anthropic_base_url": redact_url(proxy.anthropic_base_url),
                "inject": proxy.inject,
                "capture": proxy.capture,
            },
        },
        "engine": engine_status,
    }
