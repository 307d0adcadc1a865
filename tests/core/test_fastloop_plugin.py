"""The fast loop is a built-in plugin the engine reaches only through hooks."""

from __future__ import annotations

from typing import Any

from metaclaw_core import CallContext, Message, MetaClaw, hookimpl
from metaclaw_core.evolve.loop import FastLoop, evolver_of, fastloop_of


def test_one_fast_loop_and_one_evolver_per_engine(make_engine: Any, settings: Any) -> None:
    a: MetaClaw = make_engine(settings)
    loop = fastloop_of(a)
    assert isinstance(loop, FastLoop) and a.pm.get_name(loop) == "builtin:fastloop"
    assert a.fastloop is loop and loop.engine is a
    assert evolver_of(a) is evolver_of(a) is loop.evolver
    assert "fastloop" in a.status()  # contributed through metaclaw_engine_status


def test_captures_reach_the_fast_loop_through_the_records_hook(engine: MetaClaw) -> None:
    seen: list[list[str]] = []

    class Observer:
        @hookimpl
        def metaclaw_records_stored(self, records: list[Any]) -> None:
            seen.append([r.id for r in records])

    engine.pm.register(Observer())
    tid = engine.after_call(CallContext(messages=[Message(role="user", content="hi")]), "hello")
    assert tid is not None and engine.flush(10)
    assert [tid] in seen
    assert engine.fastloop.wait_idle(10)


def test_an_engine_without_the_fast_loop_still_serves_and_closes(engine: MetaClaw) -> None:
    loop = fastloop_of(engine)
    engine.pm.unregister(loop)
    loop.close()
    assert engine.fastloop is None and "fastloop" not in engine.status()
    tid = engine.after_call(CallContext(messages=[Message(role="user", content="hi")]), "hello")
    assert tid is not None and engine.flush(10)
