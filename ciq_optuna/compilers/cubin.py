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
from collections.abc import Callable, Iterable

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


class ElfSection:
    """One section of a 64-bit little-endian ELF: its name, header fields and raw bytes."""

    __slots__ = ("name", "sh_type", "header", "data")

    def __init__(self, name: str, sh_type: int, header: tuple[int, ...], data: bytes) -> None:
        self.name = name
        self.sh_type = sh_type
        #: sh_flags, sh_addr, sh_size, sh_link, sh_info, sh_addralign, sh_entsize (``_SHDR_FIELDS`` order).
        self.header = header
        self.data = data


class ElfImage:
    """A 64-bit little-endian ELF read with :mod:`struct` alone: header, sections, program headers.

    A cubin is small and regular, so this minimal walk replaces pyelftools on the per-trial path
    (pyelftools builds its parsers for every file: ~1 ms per cubin, ~20x this walk). Raises
    ``struct.error``/``ValueError``/``IndexError`` on a truncated or malformed file, and :class:`UnsupportedElf`
    for ELF features a cubin does not use (32-bit, big-endian, extended numbering, compressed
    sections), which :func:`code_hash` hands to pyelftools.
    """

    def __init__(self, data: bytes) -> None:
        if data[:4] != b"\x7fELF" or len(data) < 64:
            raise UnsupportedElf("no ELF magic")
        if data[4] != 2 or data[5] != 1:  # EI_CLASS = ELFCLASS64, EI_DATA = ELFDATA2LSB
            raise UnsupportedElf("not a 64-bit little-endian ELF")
        self.ident = data[:16]
        (
            self.e_type,
            self.e_machine,
            self.e_version,
            self.e_entry,
            e_phoff,
            e_shoff,
            self.e_flags,
            self.e_ehsize,
            self.e_phentsize,
            self.e_phnum,
            self.e_shentsize,
            self.e_shnum,
            self.e_shstrndx,
        ) = _EHDR.unpack_from(data, 16)
        if (self.e_shnum == 0 and e_shoff) or self.e_shstrndx >= 0xFF00 or self.e_phnum == 0xFFFF:
            raise UnsupportedElf("extended section or segment numbering")
        if self.e_shnum and not self.e_shstrndx:
            raise UnsupportedElf("sections without a name table")
        headers = [_SHDR.unpack_from(data, e_shoff + i * self.e_shentsize) for i in range(self.e_shnum)]
        names = headers[self.e_shstrndx][4] if headers else 0
        self.sections: list[ElfSection] = []
        for sh_name, sh_type, flags, addr, offset, size, link, info, align, entsize in headers:
            if flags & _SHF_COMPRESSED:
                raise UnsupportedElf("compressed section")
            start = names + sh_name
            name = data[start : data.index(b"\0", start)].decode()
            body = b"" if sh_type == _SHT_NOBITS else data[offset : offset + size]
            self.sections.append(ElfSection(name, sh_type, (flags, addr, size, link, info, align, entsize), body))
        #: p_type, p_flags, p_vaddr, p_paddr, p_align of each program header (``_PHDR_FIELDS`` order).
        self.segments: list[tuple[int, ...]] = []
        for i in range(self.e_phnum):
            p_type, p_flags, _, vaddr, paddr, _, _, align = _PHDR.unpack_from(data, e_phoff + i * self.e_phentsize)
            self.segments.append((p_type, p_flags, vaddr, paddr, align))

    def section(self, name: str) -> ElfSection | None:
        """The first section called ``name``, or None."""
        return next((s for s in self.sections if s.name == name), None)


class UnsupportedElf(ValueError):
    """Not an ELF, or an ELF feature outside :class:`ElfImage`'s minimal walk."""


_EHDR = struct.Struct("<HHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_PHDR = struct.Struct("<IIQQQQQQ")
_SHT_NOBITS = 8
_SHF_COMPRESSED = 0x800


def _enum_names() -> dict[str, dict[int, str]]:
    """pyelftools' names of the enumerated header fields (the hash covers them as pyelftools
    spells them, see docs/acf.md), for a machine without machine-specific section or segment types."""
    from elftools.elf import enums

    def names(mapping: dict[str, int]) -> dict[int, str]:
        return {v: k for k, v in mapping.items()}  # as pyelftools decodes: the last name wins

    return {
        "e_type": names(enums.ENUM_E_TYPE),
        "e_machine": names(enums.ENUM_E_MACHINE),
        "e_version": names(enums.ENUM_E_VERSION),
        "sh_type": names(enums.ENUM_SH_TYPE_BASE),
        "p_type": names(enums.ENUM_P_TYPE_BASE),
    }


_NAMES: dict[str, dict[int, str]] = {}
#: Machines whose section/segment type names pyelftools takes from another table (not cubins).
_OWN_TYPE_NAMES = frozenset({"EM_ARM", "EM_AARCH64", "EM_X86_64", "EM_MIPS", "EM_RISCV"})


def code_hash(cubin: bytes, *, skip_debug: bool = False) -> str:
    """sha256 of the cubin's content without the ``.note.nv.tkinfo`` section (hex digest).

    Equal for compiles that produce the same code whatever the flag spelling; different as
    soon as any other section (code, resources, constants, metadata) differs. ``skip_debug``
    also leaves out the line-info sections (``.debug_*``, ``.nv_debug_*`` and their
    relocations): Triton compiles with ``-lineinfo``, which records the kernel file's absolute
    path, so only this hash stays the same when the kernel file moves.
    """
    try:
        elf = ElfImage(cubin)
    except UnsupportedElf:
        return _code_hash_pyelftools(cubin, skip_debug=skip_debug)
    except (struct.error, ValueError, IndexError) as exc:
        raise CubinError(f"not a valid cubin (ELF): {exc}") from exc
    if not _NAMES:
        _NAMES.update(_enum_names())
    machine = _NAMES["e_machine"].get(elf.e_machine, elf.e_machine)
    if machine in _OWN_TYPE_NAMES:
        return _code_hash_pyelftools(cubin, skip_debug=skip_debug)
    sh_types, p_types = _NAMES["sh_type"], _NAMES["p_type"]
    header = (
        _NAMES["e_type"].get(elf.e_type, elf.e_type),
        machine,
        _NAMES["e_version"].get(elf.e_version, elf.e_version),
        elf.e_entry,
        elf.e_flags,
        elf.e_ehsize,
        elf.e_phentsize,
        elf.e_phnum,
        elf.e_shentsize,
        elf.e_shnum,
        elf.e_shstrndx,
    )
    sections = (
        (s.name, (sh_types.get(s.sh_type, s.sh_type), *s.header), lambda s=s: s.data) for s in elf.sections
    )
    segments = ((p_types.get(p_type, p_type), *rest) for p_type, *rest in elf.segments)
    return _digest(elf.ident, header, sections, segments, skip_debug=skip_debug)


def _digest(
    ident: bytes,
    header: Iterable[object],
    sections: Iterable[tuple[str, Iterable[object], Callable[[], bytes]]],
    segments: Iterable[Iterable[object]],
    *,
    skip_debug: bool,
) -> str:
    """The code hash over an ELF as either reader sees it: ident, header fields (``_EHDR_FIELDS``
    order), each section's name, header fields (``_SHDR_FIELDS``) and data, each segment's fields
    (``_PHDR_FIELDS``). One function, so both readers give the same digest by construction."""
    h = hashlib.sha256()
    _field(h, ident)
    for value in header:
        _field(h, value)
    for name, fields, data in sections:
        if name == TKINFO_SECTION:
            _field(h, "(tkinfo removed)")
            continue
        if skip_debug and name.startswith(_DEBUG_PREFIXES):
            _field(h, "(line info removed)")
            continue
        _field(h, name)
        for value in fields:
            _field(h, value)
        _field(h, data())
    for fields in segments:
        for value in fields:
            _field(h, value)
    return h.hexdigest()


def _code_hash_pyelftools(cubin: bytes, *, skip_debug: bool) -> str:
    """:func:`code_hash` through pyelftools, for ELF files outside :class:`ElfImage`'s walk."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(io.BytesIO(cubin))
        return _digest(
            bytes(elf.e_ident_raw),
            (elf.header[name] for name in _EHDR_FIELDS),
            (
                (
                    sec.name,
                    [sec.header[name] for name in _SHDR_FIELDS],
                    lambda sec=sec: b"" if sec.header["sh_type"] == "SHT_NOBITS" else sec.data(),
                )
                for sec in elf.iter_sections()
            ),
            ([seg.header[name] for name in _PHDR_FIELDS] for seg in elf.iter_segments()),
            skip_debug=skip_debug,
        )
    except (ELFError, struct.error, ValueError, OSError) as exc:
        raise CubinError(f"not a valid cubin (ELF): {exc}") from exc


def tkinfo_text(cubin: bytes) -> str:
    """The printable strings of the tkinfo note (tool, version, command line), for diagnostics."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        section = ELFFile(io.BytesIO(cubin)).get_section_by_name(TKINFO_SECTION)
    except (ELFError, struct.error, ValueError) as exc:
        raise CubinError(f"not a valid cubin (ELF): {exc}") from exc
    if section is None:
        return ""
    parts = [p.decode(errors="replace") for p in section.data().split(b"\0")]
    return " | ".join(p for p in parts if len(p) >= 2 and p.isprintable())
