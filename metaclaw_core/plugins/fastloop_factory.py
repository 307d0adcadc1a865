"""Built-in fast loop factory: one :class:`~metaclaw_core.evolve.loop.FastLoop` per engine.

When an engine starts, this builds its fast loop (scoring, evolution triggers, the one
evolver) and registers it as ``builtin:fastloop``; from then on the engine reaches it only
through hooks. :func:`metaclaw_core.evolve.loop.fastloop_of` and ``evolver_of`` find it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metaclaw_core.engine import FASTLOOP_PLUGIN
from metaclaw_core.evolve.loop import FastLoop
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.plugin_manager import register_checked

if TYPE_CHECKING:
    from metaclaw_core.engine import MetaClaw


@hookimpl
def metaclaw_engine_started(engine: MetaClaw) -> None:
    loop = FastLoop(engine)
    register_checked(engine.pm, loop, FASTLOOP_PLUGIN)
    loop.start_store_tail()
