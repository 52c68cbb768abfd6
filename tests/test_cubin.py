"""code_hash: same code under different flag spellings hashes the same; different code does not."""

from __future__ import annotations

import hashlib
import io
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from ciq_optuna.compilers.cubin import TKINFO_SECTION, CubinError, code_hash, raw_sha256, tkinfo_text
from ciq_optuna.compilers.locate import list_compilers
from ciq_optuna.errors import CiqError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
STENCIL = EXAMPLES / "stencil" / "stencil.sm_90a.ptx"
SGEMM = EXAMPLES / "sgemm" / "sgemm.sm_90a.ptx"


def _ptxas(release: str) -> Path:
    found = [i for i in list_compilers("ptxas") if i.release == release]
    if not found:
        pytest.skip(f"ptxas {release} not installed")
    return found[0].path


@pytest.fixture(params=["13.0", "13.5"])
def compile_ptx(request, tmp_path):
    ptxas = _ptxas(request.param)
    counter = iter(range(1000))

    def run(ptx: Path, *flags: str) -> bytes:
        out = tmp_path / f"{next(counter)}.cubin"
        subprocess.run([str(ptxas), "-arch=sm_90a", *flags, "-o", str(out), str(ptx)], check=True)
        return out.read_bytes()

    return run


def _section_range(data: bytes, name: str) -> tuple[int, int]:
    section = ELFFile(io.BytesIO(data)).get_section_by_name(name)
    return section["sh_offset"], section["sh_size"]


def _shoff(data: bytes) -> int:
    return ELFFile(io.BytesIO(data)).header["e_shoff"]


def test_flag_spelling_changes_bytes_not_code_hash(compile_ptx):
    plain, o3 = compile_ptx(STENCIL), compile_ptx(STENCIL, "-O3")
    assert plain != o3 and raw_sha256(plain) != raw_sha256(o3)
    assert code_hash(plain) == code_hash(o3)
    assert "-O 3" in tkinfo_text(o3) and "-O 3" not in tkinfo_text(plain)


def test_longer_command_line_shifts_offsets_but_not_code_hash(compile_ptx):
    plain = compile_ptx(STENCIL)
    long = compile_ptx(
        STENCIL,
        "--warn-on-spills",
        "--warn-on-local-memory-usage",
        "--warn-on-double-precision-use",
        "--suppress-stack-size-warning",
        "--allow-expensive-optimizations=true",
        "--suppress-double-demote-warning",
        "--fmad=true",
        "--suppress-async-bulk-multicast-advisory-warning",
    )
    # The note grows, so everything after it moves: the section header table starts later.
    assert _section_range(long, TKINFO_SECTION)[1] > _section_range(plain, TKINFO_SECTION)[1]
    assert _shoff(long) > _shoff(plain)
    assert code_hash(long) == code_hash(plain)


def test_different_code_gives_different_hashes(compile_ptx):
    hashes = {
        code_hash(compile_ptx(STENCIL)),
        code_hash(compile_ptx(STENCIL, "-O0")),
        code_hash(compile_ptx(STENCIL, "--maxrregcount=32")),
        code_hash(compile_ptx(SGEMM)),
    }
    assert len(hashes) == 4


def test_any_byte_outside_tkinfo_counts(compile_ptx):
    data = bytearray(compile_ptx(STENCIL))
    base = code_hash(bytes(data))
    text_off, text_size = _section_range(bytes(data), ".text.stencil25_3d")
    changed = bytearray(data)
    changed[text_off + text_size // 2] ^= 0x01
    assert code_hash(bytes(changed)) != base
    note_off, note_size = _section_range(bytes(data), TKINFO_SECTION)
    noted = bytearray(data)
    noted[note_off + note_size - 8] ^= 0x01
    assert code_hash(bytes(noted)) == base


def test_raw_sha256_is_plain_sha256():
    assert raw_sha256(b"abc") == hashlib.sha256(b"abc").hexdigest()


def test_not_an_elf_is_a_clear_error():
    with pytest.raises(CubinError, match="not a valid cubin") as info:
        code_hash(b"this is not an ELF file")
    assert isinstance(info.value, CiqError)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_same_code_same_hash_on_every_arch(arch, tmp_path):
    """On sm_80 a load segment spans the tkinfo note, so its size follows the command line."""
    ptxas = _ptxas("13.0")
    ptx = EXAMPLES / "stencil" / f"stencil.{arch}.ptx"
    outs = {}
    for name, flags in {"plain": [], "o3": ["-O3"], "o2": ["-O2", "--fmad=true"], "o1": ["-O1"]}.items():
        out = tmp_path / f"{name}.cubin"
        subprocess.run([str(ptxas), f"-arch={arch}", *flags, "-o", str(out), str(ptx)], check=True)
        outs[name] = code_hash(out.read_bytes())
    assert outs["plain"] == outs["o3"] == outs["o2"]
    assert outs["o1"] != outs["plain"]


_NAMES = {
    "e_type": {2: "ET_EXEC", 1: "ET_REL"},
    "e_machine": {190: "EM_CUDA"},
    "e_version": {1: "EV_CURRENT"},
    "sh_type": {
        0: "SHT_NULL",
        1: "SHT_PROGBITS",
        2: "SHT_SYMTAB",
        3: "SHT_STRTAB",
        4: "SHT_RELA",
        7: "SHT_NOTE",
        8: "SHT_NOBITS",
        9: "SHT_REL",
    },
    "p_type": {0: "PT_NULL", 1: "PT_LOAD", 6: "PT_PHDR"},
}


def _code_hash_from_the_docs(data: bytes) -> str:
    """docs/acf.md's recipe for code_sha256, with struct alone (64-bit little-endian ELF)."""
    import struct

    h = hashlib.sha256()

    def field(value: object, kind: str | None = None) -> None:
        if kind is not None:
            value = _NAMES[kind].get(value, value)
        d = value if isinstance(value, bytes) else str(value).encode()
        h.update(struct.pack("<Q", len(d)) + d)

    ident = data[:16]
    (
        e_type,
        e_machine,
        e_version,
        e_entry,
        e_phoff,
        e_shoff,
        e_flags,
        e_ehsize,
        e_phentsize,
        e_phnum,
        e_shentsize,
        e_shnum,
        e_shstrndx,
    ) = struct.unpack_from("<HHIQQQIHHHHHH", data, 16)
    field(ident)
    field(e_type, "e_type")
    field(e_machine, "e_machine")
    field(e_version, "e_version")
    for v in (e_entry, e_flags, e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx):
        field(v)
    shdrs = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    strtab = shdrs[e_shstrndx]
    for name_off, sh_type, flags, addr, offset, size, link, info, align, entsize in shdrs:
        start = strtab[4] + name_off
        name = data[start : data.index(b"\0", start)].decode()
        if name == ".note.nv.tkinfo":
            field("(tkinfo removed)")
            continue
        field(name)
        field(sh_type, "sh_type")
        for v in (flags, addr, size, link, info, align, entsize):
            field(v)
        field(b"" if sh_type == 8 else data[offset : offset + size])
    for i in range(e_phnum):
        p_type, p_flags, _off, vaddr, paddr, _filesz, _memsz, align = struct.unpack_from(
            "<IIQQQQQQ", data, e_phoff + i * e_phentsize
        )
        field(p_type, "p_type")
        for v in (p_flags, vaddr, paddr, align):
            field(v)
    return h.hexdigest()


def test_code_hash_is_recomputable_from_the_documented_rules(compile_ptx) -> None:
    for ptx, flags in ((STENCIL, ()), (STENCIL, ("-O1", "--maxrregcount=64")), (SGEMM, ("-v",))):
        data = compile_ptx(ptx, *flags)
        assert _code_hash_from_the_docs(data) == code_hash(data)


def test_struct_walk_gives_the_pyelftools_digest(compile_ptx) -> None:
    """code_hash reads the ELF with struct alone; pyelftools (kept for other ELF files) agrees."""
    from ciq_optuna.compilers.cubin import _code_hash_pyelftools

    for flags in ((), ("-lineinfo",), ("-O0", "-lineinfo", "--maxrregcount=32")):
        data = compile_ptx(STENCIL, *flags)
        for skip_debug in (False, True):
            assert code_hash(data, skip_debug=skip_debug) == _code_hash_pyelftools(data, skip_debug=skip_debug)
    lined = compile_ptx(STENCIL, "-lineinfo")
    assert code_hash(lined) != code_hash(lined, skip_debug=True)
