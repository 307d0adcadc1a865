"""Package attributes resolved on first use (PEP 562), so importing a package is cheap.

A package lists ``name -> defining module`` and sets ``__getattr__ = lazy_exports(...)``;
``from package import name`` then imports only the module that defines ``name``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``homes[name]`` on first use."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(home), name)
        setattr(sys.modules[package], name, value)  # later look-ups skip this function
        return value

    return __getattr__
