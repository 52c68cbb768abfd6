"""Parse the resource report that ``ptxas -v`` (or ``nvcc -Xptxas -v``) prints for every function.

The report is a sequence of lines on stderr, e.g. (ptxas 13.0, sm_80)::

    ptxas info    : 0 bytes gmem, 20 bytes cmem[3]
    ptxas info    : Compiling entry function 'stencil25_3d' for 'sm_80'
    ptxas info    : Function properties for stencil25_3d
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 56 registers, used 1 barriers, 3840 bytes smem, 380 bytes cmem[0]
    ptxas info    : Compile time = 42.965 ms

A ptxas installed under another name prints that name instead (Triton's ``ptxas-blackwell``).

Device functions that are not inlined get a ``Function properties`` block (and, with ``-c``, a
compile time) but no ``Compiling entry function`` line and no ``Used`` line. Items of the
``Used`` line are parsed one by one, so their order and presence may vary (sm_90+ omits the
parameter bank ``cmem[0]``; ``cumulative stack size``, ``smem``, ``textures``, ``surfaces``,
``samplers`` appear only when non-zero). Lines and items this module does not know are kept in
``extra``/``unparsed`` instead of failing: a new compiler release must not break a search.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PREFIX_RE = re.compile(r"^\s*ptxas(?:-\w+)?(?:\s+([^;]*?);)?\s+(info|warning|error|fatal)\s*:\s?(.*)$")
_COMPILING_RE = re.compile(r"^Compiling entry function '(.+)' for '([^']+)'$")
_PROPERTIES_RE = re.compile(r"^Function properties for (.+?)\s*$")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"^Used (\d+) registers\b(.*)$")
_COMPILE_TIME_RE = re.compile(r"^Compile time = ([0-9.]+) ms$")
_MODULE_RE = re.compile(r"^\d+ bytes gmem\b")
_FUNC_IN_MSG_RE = re.compile(r"function '([^']+)'")
_CMEM_RE = re.compile(r"^(\d+) bytes cmem\[(\d+)\]$")
_ITEM_RES = {
    "barriers": re.compile(r"^used (\d+) barriers?$"),
    "cumulative_stack": re.compile(r"^(\d+) bytes cumulative stack size$"),
    "shared_memory": re.compile(r"^(\d+) bytes smem$"),
    "local_memory": re.compile(r"^(\d+) bytes lmem$"),
    "textures": re.compile(r"^(\d+) textures?$"),
    "surfaces": re.compile(r"^(\d+) surfaces?$"),
    "samplers": re.compile(r"^(\d+) samplers?$"),
}


_MEASURED_FIELDS = (
    "registers",
    "barriers",
    "stack_frame",
    "spill_stores",
    "spill_loads",
    "cumulative_stack",
    "shared_memory",
    "textures",
    "surfaces",
    "samplers",
    "compile_time_ms",
)


@dataclass
class FunctionStats:
    """Resources of one function as ptxas reported them (bytes unless said otherwise).

    Fields a function's report did not print are None (device functions have no ``Used``
    line); items of a printed ``Used`` line that ptxas omits because they are zero are 0.
    """

    name: str
    is_entry: bool = False
    arch: str | None = None
    registers: int | None = None
    barriers: int | None = None
    stack_frame: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    cumulative_stack: int | None = None
    shared_memory: int | None = None
    local_memory: int | None = None
    constant_memory: dict[int, int] = field(default_factory=dict)
    textures: int | None = None
    surfaces: int | None = None
    samplers: int | None = None
    compile_time_ms: float | None = None
    stack_size_unknown: bool = False
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    first_line: str = ""

    def parsed_fields(self) -> list[str]:
        """Names of the resource fields ptxas printed for this function (the rest were not measured)."""
        names = [k for k in _MEASURED_FIELDS if getattr(self, k) is not None]
        if self.registers is not None:  # constant banks come with the Used line
            names.append("constant_memory")
        return names

    @property
    def spill_bytes(self) -> int | None:
        """Spill stores plus spill loads, or None when ptxas printed neither."""
        if self.spill_stores is None and self.spill_loads is None:
            return None
        return (self.spill_stores or 0) + (self.spill_loads or 0)

    def as_metrics(self) -> dict[str, float | int | bool | None]:
        """Flat, JSON-friendly dict (constant banks as ``cmem[N]``), for trial user attributes."""
        out: dict[str, float | int | bool | None] = {
            "is_entry": self.is_entry,
            "registers": self.registers,
            "barriers": self.barriers,
            "stack_frame": self.stack_frame,
            "spill_stores": self.spill_stores,
            "spill_loads": self.spill_loads,
            "spill_bytes": self.spill_bytes,
            "cumulative_stack": self.cumulative_stack,
            "shared_memory": self.shared_memory,
            "textures": self.textures,
            "surfaces": self.surfaces,
            "samplers": self.samplers,
            "compile_time_ms": self.compile_time_ms,
        }
        if self.local_memory is not None:
            out["local_memory"] = self.local_memory
        if self.stack_size_unknown:
            out["stack_size_unknown"] = True
        for bank, size in sorted(self.constant_memory.items()):
            out[f"cmem[{bank}]"] = size
        return out


@dataclass
class PtxasReport:
    """Everything one ``ptxas -v`` run printed, by function, plus module-level lines."""

    functions: dict[str, FunctionStats] = field(default_factory=dict)
    global_memory: int | None = None
    module_constant_memory: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)
    last_line: str = ""

    @property
    def entries(self) -> dict[str, FunctionStats]:
        """The entry functions (kernels) only."""
        return {n: f for n, f in self.functions.items() if f.is_entry}

    def unexpected_line(self) -> str:
        """The first line the parser did not understand, quoted (or how the output ended), for error messages."""
        if self.unparsed:
            return f"first unexpected output line: {self.unparsed[0][:200]!r}"
        if self.last_line:
            return f"no unexpected output line; the output ends with {self.last_line[:200]!r}"
        return "the compiler printed nothing"


def _parse_used(stats: FunctionStats, text: str) -> None:
    m = _USED_RE.match(text)
    assert m is not None
    stats.registers = int(m.group(1))
    stats.barriers = stats.barriers if stats.barriers is not None else 0
    for key in ("cumulative_stack", "shared_memory", "textures", "surfaces", "samplers"):
        if getattr(stats, key) is None:
            setattr(stats, key, 0)
    for item in (s.strip() for s in m.group(2).split(",")):
        if not item:
            continue
        cm = _CMEM_RE.match(item)
        if cm:
            stats.constant_memory[int(cm.group(2))] = int(cm.group(1))
            continue
        for key, rx in _ITEM_RES.items():
            im = rx.match(item)
            if im:
                setattr(stats, key, int(im.group(1)))
                break
        else:
            stats.extra.append(item)


def _parse_module(report: PtxasReport, text: str) -> None:
    for item in (s.strip() for s in text.split(",")):
        gm = re.match(r"^(\d+) bytes gmem$", item)
        cm = _CMEM_RE.match(item)
        if gm:
            report.global_memory = int(gm.group(1))
        elif cm:
            report.module_constant_memory[int(cm.group(2))] = int(cm.group(1))
        else:
            report.notes.append(item)


def parse_ptxas_output(text: str) -> PtxasReport:
    """Parse ``ptxas -v`` output (stdout and stderr together are fine) into a :class:`PtxasReport`.

    Never raises on unknown content; non-ptxas lines (nvcc's own messages) are kept in
    ``unparsed``.
    """
    report = PtxasReport()
    current: FunctionStats | None = None
    pending_msgs: list[tuple[str, str]] = []  # (kind, message) that name a function

    def get(name: str, line: str) -> FunctionStats:
        if name not in report.functions:
            report.functions[name] = FunctionStats(name=name, first_line=" ".join(line.split()))
        return report.functions[name]

    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        report.last_line = line.strip()
        pm = _PREFIX_RE.match(line)
        if pm is None:
            fm = _FRAME_RE.search(line)
            if fm and current is not None:
                current.stack_frame, current.spill_stores, current.spill_loads = map(int, fm.groups())
            else:
                report.unparsed.append(line.strip())
            continue
        location, kind, msg = pm.group(1), pm.group(2), pm.group(3).strip()
        if location:
            msg = f"{location}: {msg}"
        if kind == "info":
            if m := _COMPILING_RE.match(msg):
                current = get(m.group(1), line)
                current.is_entry, current.arch = True, m.group(2)
            elif m := _PROPERTIES_RE.match(msg):
                current = get(m.group(1), line)
            elif _USED_RE.match(msg) and current is not None:
                _parse_used(current, msg)
            elif (m := _COMPILE_TIME_RE.match(msg)) and current is not None:
                current.compile_time_ms = float(m.group(1))
            elif _MODULE_RE.match(msg):
                _parse_module(report, msg)
            elif (fm := _FRAME_RE.search(msg)) and current is not None:
                current.stack_frame, current.spill_stores, current.spill_loads = map(int, fm.groups())
            else:
                report.notes.append(msg)
                if _FUNC_IN_MSG_RE.search(msg) or re.search(r" for '[^']+'", msg):
                    pending_msgs.append(("note", msg))
        elif kind == "warning":
            report.warnings.append(msg)
            pending_msgs.append(("warning", msg))
        else:
            report.errors.append(msg)

    for kind, msg in pending_msgs:
        m = _FUNC_IN_MSG_RE.search(msg) or re.search(r" for '([^']+)'", msg)
        if m is None or m.group(1) not in report.functions:
            continue
        stats = report.functions[m.group(1)]
        if kind == "warning":
            stats.warnings.append(msg)
            if "cannot be statically determined" in msg:
                stats.stack_size_unknown = True
        else:
            stats.notes.append(msg)
    return report
