"""What a cubin itself says about its kernels: entry functions, registers, target architecture.

Used to check the ``-v`` report of a compile against the binary it describes: a report that
names another function, another architecture or another register count than the cubin is not
trusted (a wrapper or a broken compiler printed it). Read from the ELF, checked on cubins of
ptxas 13.0 and 13.5 (sm_80, sm_90a, sm_100a, sm_120):

- entry functions are the ``STT_FUNC`` symbols with ``STO_CUDA_ENTRY`` (0x10) in ``st_other``;
- registers per thread are the ``EIATTR_REGCOUNT`` records of the module's ``.nv.info``
  section (format ``EIFMT_SVAL``: symbol index, count). Before sm_90 the count is also the top
  byte of the ``.text.<fn>`` section's ``sh_info``; sm_90+ leaves that byte 0, so it is not used;
- the architecture is ``e_flags`` bits 8-15 for ELF ABI version 8 (CUDA 13), bits 0-7 before.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ciq_optuna.compilers.cubin import CubinError, ElfImage, UnsupportedElf

#: ``st_other`` bit of a kernel (entry function) symbol.
STO_CUDA_ENTRY = 0x10
#: ``.nv.info`` attribute: registers per thread of one function.
EIATTR_REGCOUNT = 0x2F
#: ``.nv.info`` record format with a 16-bit size and a payload.
EIFMT_SVAL = 0x04

_SYM64 = struct.Struct("<IBBHQQ")


@dataclass
class CubinInfo:
    """Kernels of one cubin: ``entries`` (names), ``registers`` by function name, ``sm`` (80, 90...)."""

    sm: int | None
    entries: list[str] = field(default_factory=list)
    registers: dict[str, int] = field(default_factory=dict)


def _nv_info_records(data: bytes) -> list[tuple[int, int, bytes]]:
    """(format, attribute, payload) of every record of a ``.nv.info`` section."""
    out = []
    pos = 0
    while pos + 4 <= len(data):
        fmt, attr = data[pos], data[pos + 1]
        if fmt == EIFMT_SVAL:
            (size,) = struct.unpack_from("<H", data, pos + 2)
            out.append((fmt, attr, data[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        else:  # EIFMT_NVAL / BVAL / HVAL: the value fits in the 2 bytes after the attribute
            out.append((fmt, attr, data[pos + 2 : pos + 4]))
            pos += 4
    return out


def _sm(elf: ElfImage) -> int | None:
    flags = elf.e_flags
    abi = elf.ident[8]  # EI_ABIVERSION
    sm = (flags >> 8) & 0xFF if abi >= 8 else flags & 0xFF
    return sm or None


def _name(strtab: bytes, offset: int) -> str:
    return strtab[offset : strtab.index(b"\0", offset)].decode()


def read_cubin_info(cubin: bytes) -> CubinInfo:
    """Entry functions, their register counts and the target architecture of a cubin.

    Raises :class:`CubinError` when the file is not a readable 64-bit little-endian ELF.
    """
    try:
        elf = ElfImage(cubin)
        info = CubinInfo(sm=_sm(elf))
        symtab = elf.section(".symtab")
        names: dict[int, str] = {}
        if symtab is not None:
            strtab = elf.sections[symtab.header[3]].data  # sh_link: the symbol names
            data = symtab.data
            for index in range(len(data) // _SYM64.size):
                st_name, st_info, st_other, _, _, _ = _SYM64.unpack_from(data, index * _SYM64.size)
                name = _name(strtab, st_name)
                names[index] = name
                if st_info & 0xF == 2 and st_other & STO_CUDA_ENTRY:  # STT_FUNC, entry
                    info.entries.append(name)
        nv_info = elf.section(".nv.info")
        if nv_info is not None:
            for fmt, attr, payload in _nv_info_records(nv_info.data):
                if fmt == EIFMT_SVAL and attr == EIATTR_REGCOUNT and len(payload) >= 8:
                    sym_index, count = struct.unpack_from("<II", payload)
                    if sym_index in names:
                        info.registers[names[sym_index]] = count
    except UnsupportedElf as exc:
        raise CubinError(f"not a valid cubin: {exc}") from exc
    except (struct.error, ValueError, IndexError, KeyError) as exc:
        raise CubinError(f"not a valid cubin (ELF): {exc}") from exc
    return info
