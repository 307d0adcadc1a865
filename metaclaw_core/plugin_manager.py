"""The plugin manager: the hook specifications, the built-in plugins, entry points, the host's.

The built-ins live in :mod:`metaclaw_core.plugins` (a floor above the engine) and are found by
module name, exactly as third-party plugins are found by entry point; replacing one is
registering another implementation of the same hook (or unregistering the built-in by name).
Every registration is checked against the specifications (``check_pending``): a hook
implementation whose name is no hook (a misspelling) is an error, not silently dead code.
"""

from __future__ import annotations

import difflib
import importlib
import logging
from collections.abc import Iterable
from typing import Any

import pluggy

from metaclaw_core import hookspecs
from metaclaw_core.errors import ConfigError

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
    "metaclaw_core.plugins.vet_acts",
    "metaclaw_core.plugins.vet_intent",
    "metaclaw_core.plugins.vet_reviewer",
    "metaclaw_core.plugins.judge",
    "metaclaw_core.plugins.checks",
    # the fast loop itself: one FastLoop per engine, registered when the engine starts
    "metaclaw_core.plugins.fastloop_factory",
)


def unknown_hooks(pm: pluggy.PluginManager) -> list[tuple[str, str]]:
    """``(plugin name, hook name)`` for every implementation of a hook that has no spec."""
    found: list[tuple[str, str]] = []
    for name in dir(pm.hook):
        caller = getattr(pm.hook, name)
        if not isinstance(caller, pluggy.HookCaller) or caller.has_spec():
            continue
        for impl in caller.get_hookimpls():
            if not impl.optionalhook:
                found.append((impl.plugin_name, name))
    return sorted(found)


def _describe(unknown: list[tuple[str, str]]) -> str:
    parts: list[str] = []
    for plugin, hook in unknown:
        close = difflib.get_close_matches(hook, hookspecs.hook_names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        parts.append(f"{hook!r} in plugin {plugin!r}{hint}")
    return "; ".join(parts)


def _unknown_error(unknown: list[tuple[str, str]]) -> ConfigError:
    return ConfigError(
        f"metaclaw: unknown hook implementation: {_describe(unknown)}; the hooks are listed "
        "in metaclaw_core.hookspecs"
    )


def check_registered(pm: pluggy.PluginManager) -> None:
    """Raise :class:`ConfigError` naming each hook implementation that matches no hook."""
    unknown = unknown_hooks(pm)
    if unknown:
        raise _unknown_error(unknown)
    pm.check_pending()  # pluggy's own check (the same rule), for anything it adds


def register_checked(pm: pluggy.PluginManager, plugin: Any, name: str | None = None) -> None:
    """Register ``plugin``, or raise :class:`ConfigError` (and leave it unregistered) if one
    of its hook implementations matches no hook."""
    pm.register(plugin, name=name)
    unknown = unknown_hooks(pm)
    if unknown:
        pm.unregister(plugin)
        raise _unknown_error(unknown)


def make_plugin_manager(
    plugins: Iterable[Any] = (), *, load_entrypoints: bool = True
) -> pluggy.PluginManager:
    """Built-ins first, then entry-point plugins (group ``metaclaw``), then ``plugins``.

    Raises :class:`ConfigError` when one of ``plugins`` implements a hook that does not exist;
    an entry-point plugin that does is unregistered with a warning (an installed package
    must not take the host down).
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in BUILTIN_MODULES:
        register_checked(pm, importlib.import_module(name), f"builtin:{name.rsplit('.', 1)[1]}")
    if load_entrypoints:
        try:
            pm.load_setuptools_entrypoints(hookspecs.PROJECT)
        except Exception as exc:  # a broken third-party plugin must not take the host down
            log.warning("metaclaw: could not load entry-point plugins: %s", exc)
        unknown = unknown_hooks(pm)
        for plugin_name in sorted({p for p, _ in unknown}):
            log.warning(
                "metaclaw: entry-point plugin not loaded: unknown hook implementation: %s",
                _describe([u for u in unknown if u[0] == plugin_name]),
            )
            pm.unregister(name=plugin_name)
    for plugin in plugins:
        register_checked(pm, plugin)
    check_registered(pm)
    return pm
