"""The built-in hook implementations, one module each (listed in
:data:`metaclaw_core.plugin_manager.BUILTIN_MODULES`).

They are registered exactly like third-party plugins; replacing one is registering another
implementation of the same hook (or unregistering the built-in by name).
"""

from __future__ import annotations

from metaclaw_core.plugin_manager import BUILTIN_MODULES, make_plugin_manager

__all__ = ["BUILTIN_MODULES", "make_plugin_manager"]
