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
