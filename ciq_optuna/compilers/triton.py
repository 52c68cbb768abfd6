"""The Triton front end: compile a ``@triton.jit`` kernel ahead of time, with no GPU, under ptxas controls.

A kernel is named ``path.py:kernel_name``. Its file declares, next to the kernel, how to compile
it: a module-level dict ``CIQ_OPTUNA = {"kernel_name": {...}}`` (see :class:`TritonKernel`) with
the signature of its runtime arguments, its fixed constexprs and Triton options, the meta-parameter
space to tune and the baseline configuration. It lives in the kernel's file because that is where
a Triton user already writes ``triton.Config`` lists, its values are the same Python values, and
the study's source hash covers it.

One compile is :func:`triton.compile` of an ``ASTSource`` for ``GPUTarget("cuda", capability, 32)``
(Triton's documented ahead-of-time path; no driver is touched). The candidate's ptxas controls go
in Triton's compile option ``ptx_options`` (appended after Triton's own ptxas flags); the
``ptxas -v`` report comes from Triton's own ptxas call through its knob ``dump_ptxas_log``, so the
metrics, the PTX and the cubin are exactly those of the binary Triton would load. Every compile
sets the knob ``always_compile`` and a cache directory of its own, so a trial never reads a cached
kernel. Which ptxas runs is Triton's choice for the target (its bundled ``ptxas`` below sm_90,
``ptxas-blackwell`` from sm_90; ``TRITON_PTXAS_PATH`` / ``TRITON_PTXAS_BLACKWELL_PATH`` are honoured)
unless a path is given, which is then set through the same knobs.

Isolation: with ``isolate=True`` (what tuning uses, :func:`ciq_optuna.objectives.triton.triton_compiler`)
every compile runs in a child process of its own through :func:`ciq_optuna.isolation.run_isolated`:
a compile that hangs past the timeout is killed with its process group (ptxas included), and
one that crashes Triton (an LLVM abort, a segfault) fails alone; both come back as a failed
result with a one-line error. The child imports the kernel file afresh, compiles it as
:func:`compile_kernel` does and sends back the cubin, the PTX and the ``ptxas -v`` log, so the
result is the same binary as an in-process compile, without ``compiled`` (Triton's kernel object
stays in the child). The fork server preloads :mod:`ciq_optuna.compilers.triton_preload` (Triton
and its ``triton_key()``), so a child pays for neither. Without ``isolate`` the compile runs in
this process (the GPU runtime's evaluation child does so, being isolated already): compiles are
then serialised by a lock and cannot be interrupted.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import re
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ciq_optuna.compilers.base import DEFAULT_TIMEOUT, CompileResult, Ptxas, first_error_line
from ciq_optuna.compilers.cubin import CubinError, code_hash, raw_sha256
from ciq_optuna.compilers.locate import CompilerInfo, compiler_info
from ciq_optuna.compilers.ptxas_output import parse_ptxas_output
from ciq_optuna.errors import CiqError

#: Name of the module-level dict that declares how to compile the file's kernels.
SPEC_ATTR = "CIQ_OPTUNA"
#: Triton compile options a spec may fix or tune next to the kernel's constexprs.
OPTION_NAMES = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion")

_LOCK = threading.Lock()
_PRELOAD_MODULE = "ciq_optuna.compilers.triton_preload"
_ARCH_RE = re.compile(r"^sm_(\d+)(a?)$")
_SPEC_KEYS = ("signature", "constants", "space", "baseline", "launch")


def triton_version() -> str:
    """The installed Triton's version; CiqError when Triton is not installed."""
    try:
        import triton
    except ImportError:
        raise CiqError("Triton is not installed: pip install 'ciq-optuna[triton]'") from None
    return str(triton.__version__)


def is_triton_ref(kernel: str | Path) -> bool:
    """Whether ``kernel`` names a Triton kernel (``path.py:name`` or a ``.py`` file)."""
    text = str(kernel)
    return bool(re.search(r"\.py(:[A-Za-z_]\w*)?$", text))


def parse_ref(kernel: str | Path) -> tuple[Path, str]:
    """``path.py:kernel_name`` -> (path, name); CiqError when the name is missing."""
    text = str(kernel)
    path, sep, name = text.rpartition(":")
    if not sep or not path.endswith(".py") or not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise CiqError(f"name the Triton kernel as PATH.py:KERNEL_NAME, not {text!r}")
    return Path(path), name


def capability(arch: str) -> int:
    """Triton's compute capability for an architecture (``sm_90a`` -> 90, ``sm_80`` -> 80).

    Triton compiles capability 90 and newer for the ``a`` variant (``sm_90a``), older ones
    without it, so only those spellings are accepted.
    """
    cap = _capability_number(arch)
    m = _ARCH_RE.match(arch)
    if cap >= 90 and not m.group(2):
        raise CiqError(f"Triton compiles capability {cap} as sm_{cap}a; use --arch sm_{cap}a")
    if cap < 90 and m.group(2):
        raise CiqError(f"Triton compiles capability {cap} as sm_{cap}; use --arch sm_{cap}")
    return cap


def _capability_number(arch: str) -> int:
    """The number of ``sm_<number>[suffix]`` (the suffix is not checked here)."""
    m = _ARCH_RE.match(arch)
    if not m:
        raise CiqError(f"unknown architecture {arch!r}; Triton targets look like sm_80 or sm_90a")
    return int(m.group(1))


def check_arch(info: CompilerInfo, arch: str) -> None:
    """``arch`` must be accepted by the ptxas ``info`` that compiles, spelled as Triton compiles it."""
    Ptxas(info).check_arch(arch)
    capability(arch)


def triton_ptxas(arch: str, path: str | Path | None = None) -> CompilerInfo:
    """The ptxas that compiles for ``arch``: ``path`` if given, else the one Triton picks."""
    if path is not None:
        p = Path(path)
        if p.is_dir():
            p = p / "ptxas" if (p / "ptxas").is_file() else p / "bin" / "ptxas"
        if not p.is_file():
            raise CiqError(f"ptxas not found at {path}")
        return compiler_info("ptxas", p)
    triton_version()
    from triton.backends.nvidia.compiler import get_ptxas

    try:
        tool = get_ptxas(_capability_number(arch))
    except RuntimeError as exc:
        raise CiqError(f"Triton finds no ptxas: {exc}") from None
    return compiler_info("ptxas", Path(tool.path))


@dataclass
class TritonKernel:
    """A Triton kernel and how to compile it, from the kernel file's ``CIQ_OPTUNA[name]``.

    Spec keys:
        ``signature`` (required): type of every runtime argument, as Triton writes them
            (``"*fp16"``, ``"i32"``, ``"fp32"``); ``":16"`` marks an argument divisible by 16
            (``"*fp16:16"``), as Triton specialises 16-byte-aligned pointers and multiples of 16
            when it compiles at run time.
        ``constants``: fixed constexprs and Triton options (``num_warps``...), not tuned.
        ``space``: the meta-parameters to tune: constexprs and options, as application
            parameters (a list is a choice).
        ``baseline``: the configuration compared with (default: the first value of each list).
        ``launch`` (GPU runtime only): ``launch(meta, seed) -> {"args": {name: value}, "grid":
            (x, y, z), "outputs": [names], "rtol": ..., "atol": ...}``, the runtime arguments
            (cupy arrays, numbers) for the meta-parameters ``meta``, the same inputs for the same
            ``seed`` (see :mod:`ciq_optuna.gpu.triton_runtime`).
    """

    path: Path
    name: str
    fn: Any
    signature: dict[str, str]
    attrs: dict[tuple[int, ...], list[list[Any]]]
    constants: dict[str, Any]
    space: dict[str, Any]
    baseline: dict[str, Any]
    file_sha256: str
    source_sha256: str
    constexpr_names: list[str] = field(default_factory=list)
    defaults: dict[str, Any] = field(default_factory=dict)
    launch: Any = None

    @property
    def ref(self) -> str:
        return f"{self.path}:{self.name}"

    def baseline_app(self) -> dict[str, Any]:
        """The baseline's full meta-parameters (constants included)."""
        return {**self.constants, **self.baseline}

    def split(self, app: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Meta-parameters -> (constexprs, Triton options); CiqError for an unknown name."""
        constexprs = dict(self.defaults)
        options: dict[str, Any] = {}
        for key, value in app.items():
            if key in OPTION_NAMES:
                options[key] = value
            elif key in self.constexpr_names:
                constexprs[key] = value
            else:
                raise CiqError(
                    f"{self.name}: unknown meta-parameter {key!r} (constexprs: "
                    f"{', '.join(self.constexpr_names) or 'none'}; options: {', '.join(OPTION_NAMES)})"
                )
        missing = [n for n in self.constexpr_names if n not in constexprs]
        if missing:
            raise CiqError(
                f"{self.name}: no value for constexpr(s) {', '.join(missing)} (constants or space)"
            )
        return constexprs, options


def _import_file(path: Path) -> Any:
    # one module per path and content: an edited file is imported afresh
    digest = hashlib.sha256(str(path.resolve()).encode() + b"\0" + path.read_bytes()).hexdigest()[:16]
    mod_name = f"ciq_optuna_triton_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}_{digest}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise CiqError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[mod_name]
        raise CiqError(f"importing {path} failed: {type(exc).__name__}: {_one_line(exc)}") from None
    return module


def load_kernel(kernel: str | Path) -> TritonKernel:
    """Import ``path.py:name`` and read its spec; CiqError (one line) for any mistake."""
    triton_version()
    from triton.runtime.jit import JITFunction

    path, name = parse_ref(kernel)
    if not path.is_file():
        raise CiqError(f"kernel file not found: {path}")
    module = _import_file(path)
    fn = getattr(module, name, None)
    while fn is not None and not isinstance(fn, JITFunction) and hasattr(fn, "fn"):
        fn = fn.fn  # triton.autotune / triton.heuristics wrappers
    if not isinstance(fn, JITFunction):
        found = sorted(k for k, v in vars(module).items() if isinstance(v, JITFunction) or hasattr(v, "fn"))
        what = "is not a @triton.jit function" if hasattr(module, name) else "not found"
        raise CiqError(
            f"{path}: kernel {name!r} {what} (@triton.jit functions here: {', '.join(found) or 'none'})"
        )
    specs = getattr(module, SPEC_ATTR, None)
    if not isinstance(specs, Mapping) or not isinstance(specs.get(name), Mapping):
        raise CiqError(
            f"{path}: no signature for {name!r}: declare {SPEC_ATTR} = {{{name!r}: {{'signature': {{...}}, "
            "'space': {...}}} in the file (see docs/triton.md)"
        )
    spec = dict(specs[name])
    unknown = [k for k in spec if k not in _SPEC_KEYS]
    if unknown:
        raise CiqError(
            f"{path}: {SPEC_ATTR}[{name!r}] has unknown key(s) {unknown}; known: {list(_SPEC_KEYS)}"
        )
    if not isinstance(spec.get("signature"), Mapping) or not spec["signature"]:
        raise CiqError(
            f"{path}: {SPEC_ATTR}[{name!r}] has no 'signature' (the type of each runtime argument)"
        )
    return _build_kernel(path, name, fn, spec)


def _build_kernel(path: Path, name: str, fn: Any, spec: Mapping[str, Any]) -> TritonKernel:
    params = list(fn.params)
    arg_names = [p.name for p in params]
    constexpr_names = [p.name for p in params if p.is_constexpr]
    runtime_names = [p.name for p in params if not p.is_constexpr]
    where = f"{path}: {SPEC_ATTR}[{name!r}]"
    sig_in = dict(spec["signature"])
    extra = [k for k in sig_in if k not in runtime_names]
    if extra:
        raise CiqError(
            f"{where}['signature'] names {extra}, which are not runtime arguments of {name} "
            f"({', '.join(runtime_names)}; constexprs go in 'constants' or 'space')"
        )
    missing = [n for n in runtime_names if n not in sig_in]
    if missing:
        raise CiqError(f"{where}['signature'] lacks the type of {', '.join(missing)}")
    signature: dict[str, str] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for n in arg_names:
        if n in constexpr_names:
            signature[n] = "constexpr"
            continue
        ty, _, hint = str(sig_in[n]).partition(":")
        if hint and hint != "16":
            raise CiqError(
                f"{where}['signature'][{n!r}] = {sig_in[n]!r}: only ':16' (divisible by 16) is a hint"
            )
        signature[n] = ty.strip()
        if hint:
            attrs[(arg_names.index(n),)] = [["tt.divisibility", 16]]
    constants = dict(spec.get("constants") or {})
    space = dict(spec.get("space") or {})
    defaults = {p.name: p.default for p in params if p.is_constexpr and p.default is not _empty_default()}
    kernel = TritonKernel(
        path=path.resolve(),
        name=name,
        fn=fn,
        signature=signature,
        attrs=attrs,
        constants=constants,
        space=space,
        baseline={},
        file_sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        source_sha256=hashlib.sha256(fn.src.encode()).hexdigest(),
        constexpr_names=constexpr_names,
        defaults=defaults,
        launch=spec.get("launch"),
    )
    if kernel.launch is not None and not callable(kernel.launch):
        raise CiqError(f"{where}['launch'] must be a function launch(meta, seed) -> dict")
    both = sorted(set(constants) & set(space))
    if both:
        raise CiqError(f"{where}: {both} are both constant and tuned")
    baseline = dict(spec.get("baseline") or {})
    for key, values in space.items():
        if key not in baseline:
            if not isinstance(values, (list, tuple)) or not values:
                raise CiqError(f"{where}: give a 'baseline' value for {key!r} (not a list of choices)")
            baseline[key] = values[0]
        elif isinstance(values, (list, tuple)) and baseline[key] not in values:
            raise CiqError(f"{where}['baseline'][{key!r}] = {baseline[key]!r} is not among {list(values)}")
    stray = [k for k in baseline if k not in space]
    if stray:
        raise CiqError(f"{where}['baseline'] sets {stray}, which are not in 'space'")
    kernel.baseline = baseline
    kernel.split(kernel.baseline_app())  # every name known, every constexpr given a value
    return kernel


def store_variant(kernel: TritonKernel, version: str) -> str:
    """The ``variant`` of a Triton kernel's ACF store key: Triton version, kernel name and the
    fixed meta-parameters (``constants``), so a tuning is never used for another Triton or
    another specialisation of the same file (the file's sha256 is the key's kernel hash)."""
    fixed = " ".join(f"{k}={kernel.constants[k]!r}" for k in sorted(kernel.constants))
    return f"triton {version} {kernel.name}" + (f" {fixed}" if fixed else "")


def _empty_default() -> Any:
    import inspect

    return inspect.Parameter.empty


@dataclass
class TritonCompileResult(CompileResult):
    """A :class:`CompileResult` with Triton's outputs: the PTX, the compile options, Triton's version."""

    ptx: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    dynamic_shared: int = 0
    #: Triton's ``CompiledKernel`` (launchable on a GPU through Triton's own launcher).
    compiled: Any = None


class TritonCompiler:
    """Compiles one :class:`TritonKernel` for a target with ptxas flags; the adapter interface
    of :class:`ciq_optuna.compilers.base.Compiler` (``name``, ``info``, ``check_arch``, ``compile``).

    ``name`` is "ptxas": the flags it takes are ptxas controls, passed as they are.
    ``explicit_ptxas`` sets Triton's ptxas knobs to ``info.path`` for every compile.
    ``isolate`` runs every compile in a process of its own, killed on the compile's timeout (see
    the module docstring); its results have no ``compiled``.
    """

    name = "ptxas"
    input_suffixes = (".py",)

    def __init__(
        self,
        info: CompilerInfo,
        kernel: TritonKernel,
        *,
        explicit_ptxas: bool = False,
        isolate: bool = False,
        cache_dir: Path | None = None,
    ) -> None:
        """``cache_dir``: a Triton cache that in-process compiles read and fill (a kernel compiled
        before is loaded, not compiled; no ``ptxas -v`` log then). The default compiles every
        time, which trials need for their compile metrics; the GPU runtime measure, which only
        launches, passes one so that the baseline is not compiled again for every evaluation."""
        self.info = info
        self.kernel = kernel
        self.explicit_ptxas = explicit_ptxas
        self.isolate = isolate
        self.cache_dir = cache_dir
        self.triton_version = triton_version()
        self._cache_root = Path(tempfile.mkdtemp(prefix="ciq-triton-cache-"))
        weakref.finalize(self, _rmtree, self._cache_root)
        if isolate:
            from ciq_optuna.isolation import preload

            preload(_PRELOAD_MODULE)

    def __repr__(self) -> str:
        return f"TritonCompiler({self.kernel.ref}, {self.info})"

    def check_arch(self, arch: str) -> None:
        check_arch(self.info, arch)

    def compile_options(
        self, app: Mapping[str, Any], flags: Sequence[str]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """(constexprs, Triton compile options) for meta-parameters ``app`` and ptxas ``flags``."""
        constexprs, options = self.kernel.split(app)
        options["ptx_options"] = ptx_options(flags)
        if "enable_fp_fusion" not in options:
            options["enable_fp_fusion"] = default_fp_fusion()
        return constexprs, options

    def compile(
        self,
        source: str | Path | None,
        arch: str,
        flags: Sequence[str],
        *,
        output: str | Path,
        timeout: float = DEFAULT_TIMEOUT,
        app: Mapping[str, Any] | None = None,
    ) -> TritonCompileResult:
        """Compile the kernel with meta-parameters ``app`` (default: the baseline) and ptxas ``flags``.

        A candidate Triton or ptxas rejects comes back with ``ok=False`` and a one-line error.
        """
        output = Path(output)
        cap = capability(arch)
        app = self.kernel.baseline_app() if app is None else dict(app)
        try:
            constexprs, options = self.compile_options(app, flags)
        except CiqError as exc:
            return self._failed(list(flags), str(exc), {})
        ptxas = str(self.info.path) if self.explicit_ptxas else None
        if self.isolate:
            out = self._compile_isolated(cap, constexprs, options, ptxas, timeout)
            if isinstance(out, str):
                return self._failed(list(flags), out, options)
            cubin, ptx, log, seconds, error, shared = out
            compiled = None
        else:
            compiled, log, seconds, error = compile_kernel(
                self.kernel,
                cap,
                constexprs,
                options,
                ptxas=ptxas,
                cache_root=self._cache_root,
                cache_dir=self.cache_dir,
            )
            if compiled is not None:
                cubin, ptx = bytes(compiled.asm["cubin"]), compiled.asm["ptx"]
                shared = int(getattr(compiled.metadata, "shared", 0) or 0)
        if error is not None:
            return self._failed(list(flags), error, options, seconds)
        result = TritonCompileResult(
            ok=False,
            command=["triton.compile", f"--gpu-name={arch}", *flags],
            compiler=self.info,
            returncode=0,
            stdout=log,
            report=parse_ptxas_output(log),
            compile_time=seconds,
            ptx=ptx,
            options=options,
            dynamic_shared=shared,
            compiled=compiled,
        )
        for stats in result.report.functions.values():
            if stats.is_entry:  # Triton's shared memory is dynamic: count it with the static one
                stats.shared_memory = (stats.shared_memory or 0) + result.dynamic_shared
        try:
            result.code_hash = code_hash(cubin, skip_debug=True)
        except CubinError as exc:
            result.error = str(exc)
            return result
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_bytes(cubin)
        result.ok = True
        result.cubin_path = output
        result.cubin = cubin
        result.raw_sha256 = raw_sha256(cubin)
        return result

    def _compile_isolated(
        self,
        cap: int,
        constexprs: Mapping[str, Any],
        options: Mapping[str, Any],
        ptxas: str | None,
        timeout: float,
    ) -> tuple[bytes, str, str, float, str | None, int] | str:
        """One compile in a child process: (cubin, PTX, log, seconds, error, shared), or the
        one-line reason the child gave no result (a crash, a timeout)."""
        from ciq_optuna.isolation import IsolatedFailure, run_isolated

        try:
            out = run_isolated(
                compile_in_child,
                list(sys.path),
                self.kernel.ref,
                self.kernel.file_sha256,
                cap,
                dict(constexprs),
                dict(options),
                ptxas,
                str(self._cache_root),
                timeout=timeout,
            )
        except IsolatedFailure as exc:
            return f"Triton compile {exc}"
        return out.cubin, out.ptx, out.log, out.seconds, out.error, out.shared

    def _failed(
        self, flags: list[str], error: str, options: dict[str, Any], seconds: float = 0.0
    ) -> TritonCompileResult:
        return TritonCompileResult(
            ok=False,
            command=["triton.compile", *flags],
            compiler=self.info,
            error=error,
            compile_time=seconds,
            options=options,
        )


@dataclass
class ChildCompile:
    """What an isolated compile hands back: the cubin and PTX (None when it failed), the
    ``ptxas -v`` log, the compile's seconds, its one-line error and Triton's dynamic shared memory."""

    cubin: bytes | None
    ptx: str | None
    log: str
    seconds: float
    error: str | None
    shared: int = 0


def compile_in_child(
    sys_path: list[str],
    kernel_ref: str,
    file_sha256: str,
    cap: int,
    constexprs: Mapping[str, Any],
    options: Mapping[str, Any],
    ptxas: str | None,
    cache_root: str,
) -> ChildCompile:
    """The child side of an isolated compile: import the kernel file afresh, compile it once with
    :func:`compile_kernel` and return what pickles (Triton's kernel object stays here)."""
    for entry in reversed(sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    kernel = load_kernel(kernel_ref)
    if kernel.file_sha256 != file_sha256:
        raise CiqError(f"{kernel.path} changed since this run loaded it")
    compiled, log, seconds, error = compile_kernel(
        kernel, cap, constexprs, options, ptxas=ptxas, cache_root=Path(cache_root)
    )
    if error is not None:
        return ChildCompile(None, None, log, seconds, error)
    return ChildCompile(
        cubin=bytes(compiled.asm["cubin"]),
        ptx=compiled.asm["ptx"],
        log=log,
        seconds=seconds,
        error=None,
        shared=int(getattr(compiled.metadata, "shared", 0) or 0),
    )


def ptx_options(flags: Sequence[str]) -> str:
    """Triton's ``ptx_options`` string for ptxas ``flags`` (Triton splits it on single spaces)."""
    bad = [f for f in flags if not f or any(c.isspace() for c in f)]
    if bad:
        raise CiqError(f"ptxas flags {bad} cannot pass through Triton's ptx_options (empty or whitespace)")
    return " ".join(flags)


def default_fp_fusion() -> bool:
    """Triton's default for ``enable_fp_fusion`` here (its knobs); passed explicitly so the value
    is recorded and the same at run time whatever a later Triton's default is. Triton before 3.9
    has no ``force_disable_fp_fusion`` knob."""
    from triton import knobs

    forced_off = getattr(knobs.language, "force_disable_fp_fusion", False)
    return bool(knobs.language.default_fp_fusion and not forced_off)


def compile_kernel(
    kernel: TritonKernel,
    cap: int,
    constexprs: Mapping[str, Any],
    options: Mapping[str, Any],
    *,
    ptxas: str | Path | None = None,
    cache_root: Path | None = None,
    cache_dir: Path | None = None,
) -> tuple[Any, str, float, str | None]:
    """One ``triton.compile``; returns (compiled kernel, ptxas -v log, seconds, error line).

    Uncached (a fresh cache under ``cache_root``, removed after) unless ``cache_dir`` names a
    Triton cache to read and fill, which is kept.
    """
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(kernel.fn, dict(kernel.signature), dict(constexprs), dict(kernel.attrs))
    buf = io.StringIO()
    with _LOCK, knobs.compilation.scope(), knobs.cache.scope(), knobs.nvidia.scope():
        cache = cache_dir or Path(tempfile.mkdtemp(prefix="c-", dir=cache_root))
        knobs.compilation.always_compile = cache_dir is None
        knobs.cache.dir = str(cache)
        knobs.nvidia.dump_ptxas_log = True
        if ptxas is not None:
            knobs.nvidia.ptxas = str(ptxas)
            knobs.nvidia.ptxas_blackwell = str(ptxas)
        start = time.perf_counter()
        try:
            with contextlib.redirect_stdout(buf):
                compiled = triton.compile(src, target=GPUTarget("cuda", cap, 32), options=dict(options))
        except Exception as exc:  # a candidate Triton or ptxas rejects: its trial fails
            return None, buf.getvalue(), time.perf_counter() - start, _triton_error(exc)
        finally:
            if cache_dir is None:
                _rmtree(cache)
        return compiled, buf.getvalue(), time.perf_counter() - start, None


def _triton_error(exc: BaseException) -> str:
    text = str(exc)
    if type(exc).__name__ == "PTXASError":  # "...\n`ptxas` stderr:\n<ptxas output>\nRepro command: ..."
        stderr = text.partition("`ptxas` stderr:")[2].partition("Repro command:")[0]
        return first_error_line(stderr) or "ptxas failed: " + (_last_line(stderr) or _one_line(exc))
    if type(exc).__name__ == "CompilationError":
        inner = getattr(exc, "error_message", None) or (str(exc.__cause__) if exc.__cause__ else "")
        line = getattr(getattr(exc, "node", None), "lineno", None)
        at = f" (kernel line {line})" if line else ""
        return f"Triton rejected the candidate{at}: {_last_line(inner) or _one_line(exc)}"
    return f"Triton compile failed: {type(exc).__name__}: {_one_line(exc)}"


def _last_line(text: str) -> str:
    lines = [" ".join(ln.split()) for ln in str(text).splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _one_line(exc: BaseException) -> str:
    return _last_line(str(exc)) or type(exc).__name__


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


__all__ = [
    "OPTION_NAMES",
    "SPEC_ATTR",
    "ChildCompile",
    "TritonCompileResult",
    "TritonCompiler",
    "TritonKernel",
    "capability",
    "compile_in_child",
    "compile_kernel",
    "default_fp_fusion",
    "is_triton_ref",
    "load_kernel",
    "parse_ref",
    "ptx_options",
    "store_variant",
    "triton_ptxas",
    "triton_version",
]
