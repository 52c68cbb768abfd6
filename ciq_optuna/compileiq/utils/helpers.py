"""CompileIQ's helpers: compiler-configuration files and nested-dict flattening.

In ciq-optuna a compiler candidate is the text of a compiler *options file* (whitespace-
separated flags), passed to the objective hex-encoded as CompileIQ passes its ACF bytes. The
file written by :func:`save_compiler_config` is applied with ``ptxas --options-file FILE`` (or
``nvcc -Xptxas --options-file=FILE``) where CompileIQ used ``--apply-controls FILE``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "flatten_nested_dict",
    "load_compiler_config",
    "options_from_hex",
    "restore_nested_search_space",
    "save_compiler_config",
]


def save_compiler_config(path: str | Path, hex_str: str) -> Path:
    """Write the candidate ``hex_str`` (as received by the objective) to ``path``; return the path."""
    path = Path(path)
    try:
        data = bytes.fromhex(hex_str)
    except (TypeError, ValueError):
        raise ValueError(
            f"save_compiler_config expects the hex string the objective received, got {str(hex_str)[:40]!r}"
        ) from None
    path.write_bytes(data)
    return path


def load_compiler_config(path: str | Path) -> str:
    """Read a file written by :func:`save_compiler_config` back as a hex string."""
    return Path(path).read_bytes().hex()


def options_from_hex(hex_str: str) -> list[str]:
    """The compiler flags held in a candidate's hex string (the options-file text, split)."""
    return bytes.fromhex(hex_str).decode().split()


def _encode(key: Any) -> str:
    return base64.b64encode(str(key).encode()).decode()


def _decode(segment: str) -> str:
    return base64.b64decode(segment.encode()).decode()


def flatten_nested_dict(nested: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten a nested dict: each key path becomes its base64-encoded segments joined by ``_``.

    Base64 never contains ``_``, so keys such as ``learning_rate`` survive the round trip
    through :func:`restore_nested_search_space`. Empty sub-dicts are kept as leaves.
    """
    flat: dict[str, Any] = {}

    def walk(node: Mapping[str, Any], prefix: list[str]) -> None:
        for key, value in node.items():
            path = [*prefix, _encode(key)]
            if isinstance(value, Mapping) and value:
                walk(value, path)
            else:
                flat["_".join(path)] = value

    walk(nested, [])
    return flat


def restore_nested_search_space(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Invert :func:`flatten_nested_dict`."""
    nested: dict[str, Any] = {}
    for flat_key, value in flat.items():
        keys = [_decode(s) for s in flat_key.split("_")]
        node = nested
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return nested
