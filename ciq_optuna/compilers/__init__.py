"""Compiler adapters: locate ptxas/nvcc, run them with a timeout, parse ``-v``, hash the cubin."""

from ciq_optuna.compilers.base import (
    COMPILERS,
    Compiler,
    CompileResult,
    Nvcc,
    Ptxas,
    compiler_for_source,
    first_error_line,
    get_compiler,
    render_options_file,
    xptxas_arg,
)
from ciq_optuna.compilers.cubin import code_hash, raw_sha256
from ciq_optuna.compilers.locate import CompilerInfo, CompilerNotFoundError, find_compiler, list_compilers
from ciq_optuna.compilers.process import CommandNotFoundError, ProcessResult, run_command
from ciq_optuna.compilers.ptxas_output import FunctionStats, PtxasReport, parse_ptxas_output

__all__ = [
    "COMPILERS",
    "CommandNotFoundError",
    "CompileResult",
    "Compiler",
    "CompilerInfo",
    "CompilerNotFoundError",
    "FunctionStats",
    "Nvcc",
    "ProcessResult",
    "Ptxas",
    "PtxasReport",
    "code_hash",
    "compiler_for_source",
    "find_compiler",
    "first_error_line",
    "get_compiler",
    "list_compilers",
    "parse_ptxas_output",
    "raw_sha256",
    "render_options_file",
    "run_command",
    "xptxas_arg",
]
