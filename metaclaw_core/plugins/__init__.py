"""Built-in hook implementations and plugin discovery.

The built-ins are registered exactly like third-party plugins; replacing one is registering
another implementation of the same hook (or unregistering the built-in by name).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import pluggy

from metaclaw_core import hookspecs

log = logging.getLogger("metaclaw.plugins")

BUILTIN_MODULES = (
    "metaclaw_core.plugins.embedder",
    "metaclaw_core.plugins.query",
    "metaclaw_core.plugins.retrieval",
    "metaclaw_core.plugins.render",
    "metaclaw_core.plugins.redact",
    "metaclaw_core.plugins.vetting",
    "metaclaw_core.plugins.training",
    "metaclaw_core.plugins.idle",
    # the fast loop: vetting checks and reward sources (the judge answers last)
    "metaclaw_core.plugins.vet_limits",
    "metaclaw_core.plugins.vet_duplicates",
    "metaclaw_core.plugins.vet_conflicts",
    "metaclaw_core.plugins.vet_injection",
    "metaclaw_core.plugins.vet_intent",
    "metaclaw_core.plugins.vet_reviewer",
    "metaclaw_core.plugins.judge",
    "metaclaw_core.plugins.checks",
)


def make_plugin_manager(
    plugins: Iterable[Any] = (), *, load_entrypoints: bool = True
) -> pluggy.PluginManager:
    """Built-ins first, then entry-point plugins (group ``metaclaw``), then ``plugins``."""
    import importlib

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in BUILTIN_MODULES:
        pm.register(importlib.import_module(name), name=f"builtin:{name.rsplit('.', 1)[1]}")
    if load_entrypoints:
        try:
            pm.load_setuptools_entrypoints(hookspecs.PROJECT)
        except Exception as exc:  # a broken third-party plugin must not take the host down
            log.warning("metaclaw: could not load entry-point plugins: %s", exc)
    for plugin in plugins:
        pm.register(plugin)
    return pm
