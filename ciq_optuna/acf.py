"""The Advanced Control File (ACF): tuned compiler controls for one kernel, as a TOML text file.

An ACF is self-describing (compiler, version, architecture, space identity, objectives,
baseline, binary hash, provenance) and diff-friendly, so it can be committed next to the
kernel. The stock compiler applies it without Python through an exported options file
(``ptxas --options-file``) or the printed flags. A checksum over the content detects damaged
or hand-edited files.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import shlex
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from ciq_optuna import __version__
from ciq_optuna.compilers.base import render_options_file, xptxas_arg
from ciq_optuna.errors import CiqError, read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FORMAT = "ciq-optuna-acf"
FORMAT_VERSION = 1

_HEADER = """\
# ciq-optuna Advanced Control File: compiler controls tuned for one kernel.
# Apply with the stock compiler (no Python needed once exported):
#   ciq-optuna acf export {name} -o {opts}   then   {compiler} -arch={arch} --options-file {opts} ...
#   {compiler} -arch={arch} $(ciq-optuna acf flags {name}) ...
# Flags: {flags}
# Do not edit by hand: the checksum covers the whole content.
"""


@dataclass
class Acf:
    """The content of an ACF. ``flags`` is what the compiler receives, in order."""

    compiler: str
    compiler_version: str
    arch: str
    flags: list[str]
    controls: dict[str, dict[str, Any]]
    space: dict[str, Any]
    objectives: list[dict[str, Any]]
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    kernel: dict[str, Any] = field(default_factory=dict)
    binary: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    application: dict[str, Any] = field(default_factory=dict)
    #: Triton kernels: version, kernel, constexprs, compile options and ``ptx_options``.
    triton: dict[str, Any] = field(default_factory=dict)

    def to_document(self) -> dict[str, Any]:
        """The TOML document, checksum included."""
        doc: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION}
        doc["compiler"] = {
            "name": self.compiler,
            "version": self.compiler_version,
            "arch": self.arch,
            "flags": list(self.flags),
        }
        doc["space"] = dict(self.space)
        doc["controls"] = _clean(self.controls)
        doc["objectives"] = [_clean(o) for o in self.objectives]
        for key in ("metrics", "kernel", "binary", "provenance", "application", "triton"):
            value = _clean(getattr(self, key))
            if value:
                doc[key] = value
        doc["checksum"] = "sha256:" + _checksum(doc)
        return doc

    def dumps(self, name: str = "kernel.acf") -> str:
        """The file text: a comment header followed by the TOML document."""
        stem = Path(name).name.removesuffix(".acf")
        header = _HEADER.format(
            arch=self.arch,
            name=shlex.quote(name),
            opts=shlex.quote(f"{stem}.opts"),
            compiler=self.compiler,
            flags=shlex.join(self.flags) or "(none: the compiler defaults won)",
        )
        if self.triton:
            header += (
                f"# Triton kernel {self.triton.get('kernel')}: `ciq-optuna acf triton {shlex.quote(name)}` prints the "
                "triton.Config to paste; ciq_optuna.triton_acf.apply_acf applies it at run time.\n"
            )
        return header + tomli_w.dumps(self.to_document())

    def options_file_text(self) -> str:
        """Text for ``ptxas --options-file`` / ``nvcc --options-file``: the flags, one per line."""
        return render_options_file(self.flags)

    def xptxas_arg(self) -> str:
        """The value for ``nvcc -Xptxas VALUE`` (ptxas ACFs only)."""
        if self.compiler != "ptxas":
            raise CiqError(f"-Xptxas applies ptxas controls; this ACF holds {self.compiler} controls")
        return xptxas_arg(self.flags)

    def check_compiler(self, compiler: str, version: str) -> None:
        """CiqError unless the installed compiler is the one (name and CUDA release) the ACF was tuned with."""
        if compiler != self.compiler or _release(version) != _release(self.compiler_version):
            raise CiqError(
                f"this ACF was tuned for {self.compiler} {self.compiler_version}; the compiler found is "
                f"{compiler} {version} (tune again with it, or point --compiler-path at a {self.compiler} "
                f"{_release(self.compiler_version)})"
            )


def write_acf(path: str | Path, acf: Acf) -> Path:
    """Write ``acf`` to ``path`` atomically (temporary file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(acf.dumps(path.name), encoding="utf-8")
    tmp.replace(path)
    return path


def read_acf(path: str | Path) -> Acf:
    """Read and verify an ACF; CiqError for a missing, malformed, truncated or edited file."""
    return parse_acf(read_text(path, "ACF"), where=str(path))


def parse_acf(text: str, *, where: str = "ACF") -> Acf:
    """Parse ACF text; see :func:`read_acf`."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CiqError(f"{where} is not a valid ACF (damaged or truncated TOML: {exc})") from None
    if "format" not in doc:
        raise CiqError(
            f"{where} is not a valid ACF: it has no 'format' line (empty, truncated, or not an ACF)"
        )
    if doc.get("format") != FORMAT:
        raise CiqError(f"{where} is not a ciq-optuna ACF (format = {doc.get('format')!r})")
    if doc.get("format_version") != FORMAT_VERSION:
        raise CiqError(
            f"{where} has ACF format version {doc.get('format_version')!r}; this ciq-optuna "
            f"reads version {FORMAT_VERSION} (upgrade ciq-optuna)"
        )
    checksum = doc.pop("checksum", None)
    if not isinstance(checksum, str) or not checksum.startswith("sha256:"):
        raise CiqError(f"{where} has no checksum: it is truncated or was not written by ciq-optuna")
    if checksum != "sha256:" + _checksum(doc):
        raise CiqError(
            f"{where} fails its checksum: the file was edited or damaged; re-export it from the study"
        )
    try:
        comp = doc["compiler"]
        acf = Acf(
            compiler=comp["name"],
            compiler_version=comp["version"],
            arch=comp["arch"],
            flags=[str(f) for f in comp["flags"]],
            controls=doc.get("controls", {}),
            space=doc["space"],
            objectives=doc.get("objectives", []),
            metrics=doc.get("metrics", {}),
            kernel=doc.get("kernel", {}),
            binary=doc.get("binary", {}),
            provenance=doc.get("provenance", {}),
            application=doc.get("application", {}),
            triton=doc.get("triton", {}),
        )
    except (KeyError, TypeError) as exc:
        raise CiqError(f"{where} lacks a required field ({exc})") from None
    return acf


def provenance(study_name: str, trial_number: int, storage: str) -> dict[str, Any]:
    """The provenance table: where the ACF came from (the storage URL must already be redacted)."""
    return {
        "study": study_name,
        "trial": trial_number,
        "storage": storage,
        "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "ciq_optuna": __version__,
    }


def release_of(version: str) -> str:
    """The CUDA release (major.minor) of a full compiler version."""
    return _release(version)


def _release(version: str) -> str:
    return ".".join(str(version).split(".")[:2])


def _checksum(doc: Mapping[str, Any]) -> str:
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _clean(value: Any) -> Any:
    """Drop None values (TOML has no null) and turn tuples into lists, recursively."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value if v is not None]
    if hasattr(value, "__dataclass_fields__"):
        return _clean(asdict(value))
    return value
