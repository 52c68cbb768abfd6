"""Identify the code in a cubin, independent of how the compiler was invoked.

ptxas records its version and full command line in the ELF note section ``.note.nv.tkinfo``,
so two compiles that produce the same machine code (``-O3`` and no flag, say) give different
files. :func:`code_hash` hashes everything else. Because the note's length depends on the
command line, the file offsets of the sections after it (and of the section and program
header tables) shift too; the hash therefore covers the ELF content, not the file layout:

- the ELF header without ``e_phoff``/``e_shoff``;
- every section except the note, in index order: name, type, flags, address, size, link,
  info, alignment, entry size and its bytes (no file offset);
- every program header without ``p_offset``.
"""

from __future__ import annotations

import hashlib
import io
import struct

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ciq_optuna.errors import CiqError

#: Section that carries the compiler version and command line.
TKINFO_SECTION = ".note.nv.tkinfo"

_EHDR_FIELDS = (
    "e_type",
    "e_machine",
    "e_version",
    "e_entry",
    "e_flags",
    "e_ehsize",
    "e_phentsize",
    "e_phnum",
    "e_shentsize",
    "e_shnum",
    "e_shstrndx",
)
_SHDR_FIELDS = (
    "sh_type",
    "sh_flags",
    "sh_addr",
    "sh_size",
    "sh_link",
    "sh_info",
    "sh_addralign",
    "sh_entsize",
)
# Segment sizes are left out: a segment can span the tkinfo note, so its size follows the length
# of the recorded command line (seen on sm_80); the sections' own data already covers the code.
_PHDR_FIELDS = ("p_type", "p_flags", "p_vaddr", "p_paddr", "p_align")


#: Sections holding line information (and their relocations), left out by ``skip_debug``.
_DEBUG_PREFIXES = (".debug_", ".nv_debug_", ".rel.debug_", ".rel.nv_debug_", ".rela.debug_", ".rela.nv_debug_")


class CubinError(CiqError):
    """The compiler output is not a readable ELF cubin."""


def raw_sha256(cubin: bytes) -> str:
    """sha256 of the file as written (differs with the command line, see module doc)."""
    return hashlib.sha256(cubin).hexdigest()


def _field(h: hashlib._Hash, value: object) -> None:
    data = value if isinstance(value, bytes) else str(value).encode()
    h.update(struct.pack("<Q", len(data)))
    h.update(data)


def code_hash(cubin: bytes, *, skip_debug: bool = False) -> str:
    """sha256 of the cubin's content without the ``.note.nv.tkinfo`` section (hex digest).

    Equal for compiles that produce the same code whatever the flag spelling; different as
    soon as any other section (code, resources, constants, metadata) differs. ``skip_debug``
    also leaves out the line-info sections (``.debug_*``, ``.nv_debug_*`` and their
    relocations): Triton compiles with ``-lineinfo``, which records the kernel file's absolute
    path, so only this hash stays the same when the kernel file moves.
    """
    try:
        elf = ELFFile(io.BytesIO(cubin))
        h = hashlib.sha256()
        _field(h, bytes(elf.e_ident_raw))
        for name in _EHDR_FIELDS:
            _field(h, elf.header[name])
        for section in elf.iter_sections():
            if section.name == TKINFO_SECTION:
                _field(h, "(tkinfo removed)")
                continue
            if skip_debug and section.name.startswith(_DEBUG_PREFIXES):
                _field(h, "(line info removed)")
                continue
            _field(h, section.name)
            for name in _SHDR_FIELDS:
                _field(h, section.header[name])
            _field(h, b"" if section.header["sh_type"] == "SHT_NOBITS" else section.data())
        for segment in elf.iter_segments():
            for name in _PHDR_FIELDS:
                _field(h, segment.header[name])
    except (ELFError, struct.error, ValueError, OSError) as exc:
        raise CubinError(f"not a valid cubin (ELF): {exc}") from exc
    return h.hexdigest()


def tkinfo_text(cubin: bytes) -> str:
    """The printable strings of the tkinfo note (tool, version, command line), for diagnostics."""
    try:
        section = ELFFile(io.BytesIO(cubin)).get_section_by_name(TKINFO_SECTION)
    except (ELFError, struct.error, ValueError) as exc:
        raise CubinError(f"not a valid cubin (ELF): {exc}") from exc
    if section is None:
        return ""
    parts = [p.decode(errors="replace") for p in section.data().split(b"\0")]
    return " | ".join(p for p in parts if len(p) >= 2 and p.isprintable())
