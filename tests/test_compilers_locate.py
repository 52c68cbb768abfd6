"""Finding ptxas/nvcc: explicit path, CUDA_HOME, PATH, /usr/local/cuda, pip wheels; versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from ciq_optuna.compilers import locate
from ciq_optuna.compilers.locate import (
    CompilerNotFoundError,
    compiler_info,
    find_compiler,
    list_compilers,
    wheel_bin_dirs,
)
from ciq_optuna.errors import CiqError

CUDA = Path("/usr/local/cuda")
needs_cuda = pytest.mark.skipif(
    not (CUDA / "bin" / "ptxas").is_file(), reason="no CUDA toolkit in /usr/local/cuda"
)
needs_wheels = pytest.mark.skipif(
    not any((d / "ptxas").is_file() for d in wheel_bin_dirs()),
    reason="NVIDIA compiler wheels not installed (pip install 'ciq-optuna[cuda]')",
)


def _fake_compiler(directory: Path, name: str, banner: str) -> Path:
    """A real executable that answers --version like an NVIDIA tool."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{name}: NVIDIA (R) test double' '{banner}'\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """No compiler anywhere: empty PATH, no CUDA_HOME, default dir and wheels pointed away."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(locate, "DEFAULT_CUDA_BIN", tmp_path / "no-cuda" / "bin")
    monkeypatch.setattr(locate, "wheel_bin_dirs", lambda: [])
    return tmp_path


@needs_cuda
@pytest.mark.parametrize("name", ["ptxas", "nvcc"])
def test_version_of_installed_toolkit(name):
    info = compiler_info(name, CUDA / "bin" / name)
    assert info.name == name and info.path == CUDA / "bin" / name
    assert info.version.startswith(info.release + ".")
    assert info.release.count(".") == 1 and int(info.release.split(".")[0]) >= 11


@needs_cuda
def test_explicit_directory_or_file(tmp_path):
    assert find_compiler("ptxas", CUDA).path == CUDA / "bin" / "ptxas"
    assert find_compiler("ptxas", CUDA / "bin").path == CUDA / "bin" / "ptxas"
    assert find_compiler("nvcc", CUDA / "bin" / "nvcc").name == "nvcc"
    with pytest.raises(CompilerNotFoundError, match="not found at"):
        find_compiler("ptxas", tmp_path)


@needs_cuda
def test_cuda_home_comes_first(isolated, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", str(CUDA))
    assert find_compiler("ptxas").path == CUDA / "bin" / "ptxas"


def test_path_then_default_dir_order(isolated, monkeypatch):
    on_path = _fake_compiler(isolated / "p", "ptxas", "Cuda compilation tools, release 12.8, V12.8.93")
    default = _fake_compiler(
        isolated / "no-cuda" / "bin", "ptxas", "Cuda compilation tools, release 12.4, V12.4.131"
    )
    monkeypatch.setenv("PATH", str(on_path.parent))
    found = list_compilers("ptxas")
    assert [(i.path, i.version, i.release) for i in found] == [
        (on_path, "12.8.93", "12.8"),
        (default, "12.4.131", "12.4"),
    ]
    assert find_compiler("ptxas").version == "12.8.93"
    assert find_compiler("ptxas", release="12.4").path == default


def test_same_compiler_twice_is_listed_once(isolated, monkeypatch):
    banner = "Cuda compilation tools, release 13.0, V13.0.88"
    a = _fake_compiler(isolated / "a", "nvcc", banner)
    b = _fake_compiler(isolated / "b", "nvcc", banner)
    monkeypatch.setenv("PATH", f"{a.parent}:{b.parent}:{a.parent}")
    assert [i.path for i in list_compilers("nvcc")] == [a]


def test_not_found_is_one_clear_line(isolated):
    with pytest.raises(CompilerNotFoundError) as info:
        find_compiler("ptxas")
    assert isinstance(info.value, CiqError)
    message = str(info.value)
    assert "\n" not in message and "ptxas not found" in message and "pip install" in message


def test_wrong_release_lists_what_exists(isolated, monkeypatch):
    found = _fake_compiler(isolated / "p", "ptxas", "Cuda compilation tools, release 12.8, V12.8.93")
    monkeypatch.setenv("PATH", str(found.parent))
    with pytest.raises(CompilerNotFoundError, match=r"no ptxas of CUDA release 13.5 found; found: 12.8.93"):
        find_compiler("ptxas", release="13.5")


def test_executable_without_version_is_skipped(isolated, monkeypatch):
    bad = _fake_compiler(isolated / "p", "ptxas", "hello")
    monkeypatch.setenv("PATH", str(bad.parent))
    assert list_compilers("ptxas") == []
    with pytest.raises(CompilerNotFoundError, match="did not print a CUDA release"):
        find_compiler("ptxas", bad)


def test_unknown_compiler_name():
    with pytest.raises(CompilerNotFoundError, match="unknown compiler 'clang'"):
        find_compiler("clang")


@needs_wheels
@pytest.mark.parametrize("name", ["ptxas", "nvcc"])
def test_pip_wheels_are_found(name):
    wheel_paths = {d / name for d in wheel_bin_dirs()}
    infos = [i for i in list_compilers(name) if i.path in wheel_paths]
    assert infos, f"{name} from the wheels not listed"
    info = infos[0]
    assert info.version.startswith(info.release + ".")
    assert find_compiler(name, release=info.release).release == info.release


def test_another_compiler_is_refused(isolated):
    nvcc = _fake_compiler(isolated / "n", "nvcc", "Cuda compilation tools, release 13.0, V13.0.88")
    with pytest.raises(CiqError, match="is not ptxas"):
        find_compiler("ptxas", nvcc)
