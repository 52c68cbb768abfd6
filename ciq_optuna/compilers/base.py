"""The compiler adapter interface and the two adapters, ptxas (.ptx) and nvcc (.cu).

An adapter knows one thing: how to turn (source, arch, flags) into a command line and the
command's output into a :class:`CompileResult`. Which flags exist and what they mean is data
(``spaces/*.toml``); a new CUDA release needs a new space file, not a new adapter.

A compile never raises for a compiler failure: errors, crashes and timeouts come back as
``ok=False`` with a one-line ``error``, so one bad trial cannot stop a search. Only problems the
user must fix (missing compiler, missing input, unsupported input type) raise :class:`CiqError`.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ciq_optuna.compilers.cubin import CubinError, code_hash, raw_sha256
from ciq_optuna.compilers.cubin_info import CubinInfo, read_cubin_info
from ciq_optuna.compilers.locate import CompilerInfo, find_compiler
from ciq_optuna.compilers.process import run_command
from ciq_optuna.compilers.ptxas_output import FunctionStats, PtxasReport, parse_ptxas_output
from ciq_optuna.errors import CiqError

#: Default compile timeout in seconds.
DEFAULT_TIMEOUT = 120.0

_ERROR_LINE_RE = re.compile(r"\berror\b", re.IGNORECASE)
_FATAL_LINE_RE = re.compile(r"\bfatal\b", re.IGNORECASE)
_ARCH_RE = re.compile(r"^sm_\d+[af]?$")


@dataclass
class CompileResult:
    """Outcome of one compile.

    ``functions`` maps every function ptxas reported (entries and non-inlined device
    functions) to its resources; ``compile_time`` is the wall-clock time of the compiler
    process in seconds; ``code_hash`` identifies the code (tkinfo note removed), ``raw_sha256``
    the file as written; ``cubin_info`` what the cubin itself holds (entries, registers). On
    failure ``ok`` is False, ``error`` is one line and the cubin fields are None. A ``-v``
    report that disagrees with the cubin (another entry function, architecture or register
    count) is a failure: its numbers cannot be trusted.
    """

    ok: bool
    command: list[str]
    compiler: CompilerInfo
    error: str | None = None
    returncode: int | None = None
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    report: PtxasReport = field(default_factory=PtxasReport)
    cubin_path: Path | None = None
    cubin: bytes | None = None
    code_hash: str | None = None
    raw_sha256: str | None = None
    compile_time: float = 0.0
    cubin_info: CubinInfo | None = None

    @property
    def functions(self) -> dict[str, FunctionStats]:
        """Every function in the ptxas report, by (mangled) name."""
        return self.report.functions

    @property
    def entries(self) -> dict[str, FunctionStats]:
        """Entry functions (kernels) only."""
        return self.report.entries

    @property
    def warnings(self) -> list[str]:
        """ptxas warnings (e.g. spills with --warn-on-spills, ignored options)."""
        return self.report.warnings

    @property
    def parsed(self) -> dict[str, list[str]]:
        """The fields ptxas reported, by entry function: what was measured (missing = not measured)."""
        return {name: f.parsed_fields() for name, f in self.entries.items()}

    def unexpected_line(self) -> str:
        """The first output line the ``-v`` parser did not understand, quoted, for a one-line reason."""
        return self.report.unexpected_line()


def first_error_line(text: str) -> str | None:
    """The compiler's first error line (else its first fatal line), whitespace collapsed."""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    for rx in (_ERROR_LINE_RE, _FATAL_LINE_RE):
        for line in lines:
            if rx.search(line):
                return line
    return None


def _failure_message(name: str, returncode: int, timed_out: bool, timeout: float, text: str) -> str:
    if timed_out:
        return f"{name} timed out after {timeout:g} s"
    if returncode < 0:
        try:
            signame = signal.Signals(-returncode).name
        except ValueError:
            signame = "unknown"
        return f"{name} killed by signal {-returncode} ({signame})"
    line = first_error_line(text)
    if line:
        return line
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return f"{name} exited with status {returncode}" + (f": {lines[-1]}" if lines else "")


def render_options_file(flags: Sequence[str]) -> str:
    """Text of an ``--options-file`` for ptxas or nvcc: one flag per line.

    Both compilers split the file on whitespace and take a backslash as an escape for the next
    character (``\\ `` is a space, ``\\\\`` a backslash); there are no comments, and a double
    quote cannot be written literally, so flags holding ``"`` or a line break are refused.
    Passing the file gives the same cubin, byte for byte, as passing the flags.
    """
    lines = []
    for flag in flags:
        if any(c in flag for c in '"\n\r') or not flag:
            raise CiqError(f"flag {flag!r} cannot be written to an options file (empty, quote or line break)")
        lines.append("".join("\\" + c if c in " \t\\" else c for c in flag))
    return "".join(line + "\n" for line in lines)


def xptxas_arg(flags: Sequence[str]) -> str:
    """The value of nvcc's ``-Xptxas`` for ptxas ``flags``: ``a,b,c``.

    nvcc splits the value on commas and keeps ``=``: ``-Xptxas -O1,--maxrregcount=40`` reaches
    ptxas as two flags. A comma inside a flag is escaped (``--maxntid=128\\,1\\,1``);
    flags with whitespace or a backslash are refused.
    """
    out = []
    for flag in flags:
        if not flag or "\\" in flag or any(c.isspace() for c in flag):
            raise CiqError(
                f"ptxas flag {flag!r} cannot be passed through nvcc -Xptxas (empty, space or backslash)"
            )
        out.append(flag.replace(",", "\\,"))
    return ",".join(out)


def _allowed_archs(help_text: str, option: str) -> list[str]:
    """The ``sm_*`` values listed under ``option`` in a compiler's ``--help``."""
    lines = help_text.splitlines()
    out: list[str] = []
    inside = False
    for line in lines:
        if line.startswith("--"):
            inside = line.split()[0] == option
            continue
        if inside:
            out.extend(re.findall(r"'(sm_\w+)'", line))
    return sorted(set(out), key=lambda a: (int(re.sub(r"\D", "", a)), a))


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in sorted(names)) or "none"


def report_disagreement(name: str, arch: str, report: PtxasReport, cubin: CubinInfo) -> str | None:
    """Why a ``-v`` report cannot describe this cubin (one line), or None when they agree.

    Checks the target architecture (requested, reported, in the ELF header), that the report's
    entry functions are the cubin's, and each entry's register count against ``EIATTR_REGCOUNT``.
    """
    wanted = int(re.sub(r"\D", "", arch) or 0)
    if cubin.sm is not None and cubin.sm != wanted:
        return f"{name} wrote a cubin for sm_{cubin.sm}, not the requested {arch}"
    for fn, stats in report.entries.items():
        if stats.arch is not None and stats.arch != arch:
            return f"{name} -v reported entry function '{fn}' for '{stats.arch}', not the requested {arch}"
    if set(report.entries) != set(cubin.entries):
        unknown = [f for f in report.entries.values() if f.name not in cubin.entries]
        quoted = (
            f"first unexpected output line: {unknown[0].first_line[:200]!r}"
            if unknown
            else report.unexpected_line()
        )
        return (
            f"{name} -v reported entry function(s) {_names(list(report.entries))} but the cubin holds "
            f"{_names(cubin.entries)}; {quoted}"
        )
    for fn, stats in report.entries.items():
        held = cubin.registers.get(fn)
        if stats.registers is not None and held is not None and stats.registers != held:
            return f"{name} -v reported {stats.registers} registers for '{fn}', the cubin holds {held}"
    return None


class Compiler:
    """One installed compiler. Subclasses set ``name``, ``input_suffixes`` and ``build_command``."""

    name: str = ""
    input_suffixes: tuple[str, ...] = ()
    #: Option under which ``--help`` lists the accepted ``sm_*`` architectures.
    arch_option: str = ""

    def __init__(self, info: CompilerInfo) -> None:
        self.info = info
        self._archs: list[str] | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info})"

    def build_command(
        self,
        source: Path,
        arch: str,
        flags: Sequence[str],
        *,
        output: Path,
        options_file: Path | None = None,
        verbose: bool = True,
    ) -> list[str]:
        """The argv that compiles ``source`` to the cubin ``output``."""
        raise NotImplementedError

    def supported_archs(self) -> list[str]:
        """The real architectures (``sm_*``) this compiler accepts, from its ``--help``."""
        if self._archs is None:
            res = run_command([str(self.info.path), "--help"], timeout=60)
            self._archs = _allowed_archs(res.stdout, self.arch_option)
        return self._archs

    def check_arch(self, arch: str) -> None:
        """Raise :class:`CiqError` when ``arch`` is not an architecture this compiler accepts."""
        supported = self.supported_archs()
        if not _ARCH_RE.match(arch) or (supported and arch not in supported):
            raise CiqError(
                f"unknown architecture {arch!r} for {self.info}; supported: {', '.join(supported)}"
            )

    def compile(
        self,
        source: str | Path,
        arch: str,
        flags: Sequence[str],
        *,
        output: str | Path,
        timeout: float = DEFAULT_TIMEOUT,
        options_file: str | Path | None = None,
        verbose: bool = True,
    ) -> CompileResult:
        """Compile ``source`` for ``arch`` with ``flags`` into the cubin ``output``.

        ``options_file`` is passed as ``--options-file`` before ``flags``. ``verbose=False``
        leaves out ``-v``: ptxas records ``-v`` in the cubin's tkinfo note, so a compile without
        it gives the bytes a user's plain command gives (the code hash is the same either way).
        """
        source = Path(source)
        output = Path(output)
        if not source.is_file():
            raise CiqError(f"input file not found: {source}")
        if source.suffix not in self.input_suffixes:
            raise CiqError(f"{self.name} compiles {', '.join(self.input_suffixes)} files, not {source.name}")
        if options_file is not None and not Path(options_file).is_file():
            raise CiqError(f"options file not found: {options_file}")
        output.parent.mkdir(parents=True, exist_ok=True)
        output.unlink(missing_ok=True)
        argv = self.build_command(
            source,
            arch,
            list(flags),
            output=output,
            options_file=Path(options_file) if options_file is not None else None,
            verbose=verbose,
        )
        res = run_command(argv, timeout=timeout)
        text = res.stderr + res.stdout
        result = CompileResult(
            ok=False,
            command=argv,
            compiler=self.info,
            returncode=res.returncode,
            timed_out=res.timed_out,
            stdout=res.stdout,
            stderr=res.stderr,
            report=parse_ptxas_output(text),
            compile_time=res.duration,
        )
        if not res.ok:
            result.error = _failure_message(self.name, res.returncode, res.timed_out, timeout, text)
            return result
        if not output.is_file():
            result.error = f"{self.name} exited with status 0 but wrote no {output.name}"
            return result
        data = output.read_bytes()
        try:
            digest = code_hash(data)
        except CubinError as exc:
            result.error = str(exc)
            return result
        if verbose:
            try:
                result.cubin_info = read_cubin_info(data)
            except CubinError as exc:
                result.error = str(exc)
                return result
            result.error = report_disagreement(self.name, arch, result.report, result.cubin_info)
            if result.error:
                return result
        result.ok = True
        result.code_hash = digest
        result.cubin_path = output
        result.cubin = data
        result.raw_sha256 = raw_sha256(data)
        return result


class Ptxas(Compiler):
    """``ptxas -v -arch=ARCH [--options-file F] FLAGS -o OUT IN.ptx``."""

    name = "ptxas"
    input_suffixes = (".ptx",)
    arch_option = "--gpu-name"

    def build_command(
        self,
        source: Path,
        arch: str,
        flags: Sequence[str],
        *,
        output: Path,
        options_file: Path | None = None,
        verbose: bool = True,
    ) -> list[str]:
        argv = [str(self.info.path)]
        if verbose:
            argv.append("-v")
        argv.append(f"-arch={arch}")
        if options_file is not None:
            argv += ["--options-file", str(options_file)]
        return [*argv, *flags, "-o", str(output), str(source)]


class Nvcc(Compiler):
    """``nvcc -cubin -arch=ARCH [-Xptxas -v] [--options-file F] FLAGS -o OUT IN.cu``.

    ``flags`` are nvcc flags; ptxas flags must already be wrapped (``-Xptxas`` +
    :func:`xptxas_arg`), as the nvcc space files render them. ``-v`` for ptxas is passed as its
    own ``-Xptxas -v`` so ptxas prints the resource report.
    """

    name = "nvcc"
    input_suffixes = (".cu",)
    arch_option = "--gpu-architecture"

    def build_command(
        self,
        source: Path,
        arch: str,
        flags: Sequence[str],
        *,
        output: Path,
        options_file: Path | None = None,
        verbose: bool = True,
    ) -> list[str]:
        argv = [str(self.info.path), "-cubin", f"-arch={arch}"]
        if verbose:
            argv += ["-Xptxas", "-v"]
        if options_file is not None:
            argv += ["--options-file", str(options_file)]
        return [*argv, *flags, "-o", str(output), str(source)]


COMPILERS: dict[str, type[Compiler]] = {"ptxas": Ptxas, "nvcc": Nvcc}


def get_compiler(name: str, path: str | Path | None = None, *, release: str | None = None) -> Compiler:
    """The adapter for compiler ``name`` ("ptxas" or "nvcc"), found as in
    :func:`ciq_optuna.compilers.locate.find_compiler` (explicit path, $CUDA_HOME, PATH,
    /usr/local/cuda, pip wheels), optionally of one CUDA ``release`` ("13.0")."""
    if name not in COMPILERS:
        raise CiqError(f"unknown compiler {name!r}; known: {', '.join(COMPILERS)}")
    return COMPILERS[name](find_compiler(name, path, release=release))


def compiler_for_source(
    source: str | Path, path: str | Path | None = None, *, release: str | None = None
) -> Compiler:
    """The adapter that compiles ``source`` by its suffix: ``.ptx`` -> ptxas, ``.cu`` -> nvcc."""
    suffix = Path(source).suffix
    for name, cls in COMPILERS.items():
        if suffix in cls.input_suffixes:
            return get_compiler(name, path, release=release)
    known = ", ".join(s for cls in COMPILERS.values() for s in cls.input_suffixes)
    raise CiqError(f"cannot compile {Path(source).name}: expected a {known} file")
