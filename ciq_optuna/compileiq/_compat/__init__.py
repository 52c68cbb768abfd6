"""Machinery behind the CompileIQ-compatible API (``ciq_optuna.compileiq.ciq``, ``types``, ``results``)."""
