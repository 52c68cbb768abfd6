"""CompileIQ's plain-text legacy DNA ``.config`` search spaces (lisp s-expressions).

A file holds two lists::

    (classes
      (class-A (type . range) (low . 0) (high . 10) (step . 1) (repr . "\\"$key\\": $value,"))
      (class-KO50 (type . knockout) (threshold . 0.5)))
    (dna
      "{"
      (A (class . "class-A") (high . 5))                       ; a gene, overriding its class
      (A-KO (class . "class-KO50") (linked_genes . [A]))       ; on/off gene of A
      "}")

Class types: ``range`` (``low``/``high``/``step``, optional ``seed-low``/``seed-high``),
``enum`` (``vals``), ``literal`` (``value``) and ``knockout`` (``threshold``: the share of the
first generation in which the linked genes are present). The candidate is the text of the
``dna`` list: strings verbatim, each present gene as its ``repr`` with ``$key`` and ``$value``
replaced, one per line; it is parsed as JSON (trailing commas allowed), else passed as text.
Encrypted DNA files (NVIDIA's compiler spaces) are refused: only NVIDIA's engine reads them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ciq_optuna.compileiq.search_spaces import base as ss

__all__ = ["LegacyDna", "LegacyGene", "load_legacy_dna"]

_TOKEN = re.compile(r'\s+|;[^\n]*|"(?:[^"\\]|\\.)*"|[()\[\]]|[^\s()\[\]";]+', re.S)


@dataclass(frozen=True)
class LegacyGene:
    """One gene of the ``dna`` list: its parameter (None for a knockout gene) and repr."""

    name: str
    param: ss.ParamConfig | None
    repr: str = '"$key": $value,'
    threshold: float = 1.0
    linked: tuple[str, ...] = ()


@dataclass
class LegacyDna:
    """A parsed DNA file: the ``dna`` items in order (text or gene) and the genes by name."""

    path: Path
    items: list[str | LegacyGene] = field(default_factory=list)

    @property
    def genes(self) -> list[LegacyGene]:
        return [i for i in self.items if isinstance(i, LegacyGene)]

    def render(self, values: dict[str, Any], present: set[str]) -> Any:
        """The candidate the objective receives, for gene values and the genes present."""
        lines: list[str] = []
        for item in self.items:
            if isinstance(item, str):
                lines.append(item)
            elif item.param is not None and item.name in present:
                lines.append(item.repr.replace("$key", item.name).replace("$value", _show(values[item.name])))
        text = "\n".join(lines)
        for candidate in (text, re.sub(r",(\s*[}\]])", r"\1", text)):
            try:
                return json.loads(candidate)
            except ValueError:
                continue
        return text


def _show(value: Any) -> str:
    return str(value)


def _tokens(text: str, path: Path) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"{path}: unreadable legacy DNA text at character {pos}")
        tok = m.group(0)
        if not (tok.isspace() or tok.startswith(";")):
            out.append(tok)
        pos = m.end()
    return out


def _parse(tokens: list[str], path: Path) -> list[Any]:
    """Nested lists of atoms; ``"..."`` strings become ``("str", text)``."""
    stack: list[list[Any]] = [[]]
    closers: list[str] = []
    for tok in tokens:
        if tok in "([":
            stack.append([])
            closers.append(")" if tok == "(" else "]")
        elif tok in ")]":
            if not closers or closers.pop() != tok:
                raise ValueError(f"{path}: unbalanced {tok!r} in the legacy DNA file")
            done = stack.pop()
            stack[-1].append(done)
        elif tok.startswith('"'):
            stack[-1].append(("str", json.loads(tok) if "\\" in tok else tok[1:-1]))
        else:
            stack[-1].append(tok)
    if closers:
        raise ValueError(f"{path}: a list is not closed in the legacy DNA file")
    return stack[0]


def _atom(value: Any) -> Any:
    if isinstance(value, tuple):
        return value[1]
    if isinstance(value, list):
        return [_atom(v) for v in value if v != "."]
    if value in ("#t", "#f"):
        return value == "#t"
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def _fields(entries: list[Any], where: str) -> dict[str, Any]:
    """``(key . value)`` pairs as a dict."""
    out: dict[str, Any] = {}
    for e in entries:
        if not (isinstance(e, list) and len(e) >= 3 and e[1] == "." and isinstance(e[0], str)):
            raise ValueError(f"{where}: expected (key . value), got {e!r}")
        rest = e[2:]
        out[e[0]] = _atom(rest[0]) if len(rest) == 1 else _atom(rest)
    return out


def _param(name: str, f: dict[str, Any], where: str) -> ss.ParamConfig | None:
    kind = f.get("type")
    try:
        if kind == "range":
            return ss.range(
                f["low"],
                f["high"],
                f.get("step", 1),
                seed_low=f.get("seed-low"),
                seed_high=f.get("seed-high"),
            )
        if kind == "enum":
            vals = f["vals"]
            return ss.choice(vals if isinstance(vals, list) else [vals])
        if kind == "literal":
            return ss.literal(f.get("value", name))
        if kind == "knockout":
            return None
    except KeyError as exc:
        raise ValueError(f"{where}: a {kind} gene needs {exc.args[0]!r}") from None
    raise ValueError(f"{where}: unknown gene type {kind!r} (range, enum, literal or knockout)")


def load_legacy_dna(path: Path) -> LegacyDna:
    """Parse a plain-text legacy DNA file; ValueError for an encrypted or malformed one."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if not text or "\x00" in text or not text.lstrip().startswith(("(", ";")):
        raise ValueError(
            f"{path}: not a plain-text legacy DNA file (it looks encrypted or binary); CompileIQ's "
            f"encrypted compiler spaces can only be read by NVIDIA's engine: use "
            f"PtxasSearchSpace()/NvccSearchSpace() or a ciq-optuna spaces/*.toml file"
        )
    sections = {s[0]: s[1:] for s in _parse(_tokens(text, path), path) if isinstance(s, list) and s}
    if "dna" not in sections:
        raise ValueError(f"{path}: no (dna ...) list: not a legacy DNA search space")
    classes: dict[str, dict[str, Any]] = {}
    for c in sections.get("classes", []):
        if not isinstance(c, list) or not c:
            raise ValueError(f"{path}: malformed class {c!r}")
        classes[str(_atom(c[0]))] = _fields(c[1:], f"{path}: class {c[0]}")
    dna = LegacyDna(path)
    seen: set[str] = set()
    for item in sections["dna"]:
        if isinstance(item, tuple):
            dna.items.append(item[1])
            continue
        if not isinstance(item, list) or not item:
            raise ValueError(f"{path}: malformed gene {item!r}")
        name = str(_atom(item[0]))
        where = f"{path}: gene {name}"
        if name in seen:
            raise ValueError(f"{where} appears twice")
        seen.add(name)
        own = _fields(item[1:], where)
        cls = own.pop("class", None)
        if cls is not None and str(cls) not in classes:
            raise ValueError(f"{where} uses class {cls!r}, which the (classes ...) list does not define")
        f = {**(classes[str(cls)] if cls is not None else {}), **own}
        linked = f.get("linked_genes", [])
        dna.items.append(
            LegacyGene(
                name=name,
                param=_param(name, f, where),
                repr=f.get("repr", '"$key": $value,'),
                threshold=float(f.get("threshold", 1.0)),
                linked=tuple(str(g) for g in (linked if isinstance(linked, list) else [linked])),
            )
        )
    names = {g.name for g in dna.genes}
    for g in dna.genes:
        missing = [n for n in g.linked if n not in names]
        if missing:
            raise ValueError(f"{path}: gene {g.name} links to unknown genes {missing}")
    return dna
