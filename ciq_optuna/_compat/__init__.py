"""Machinery behind the CompileIQ-compatible API (``ciq_optuna.ciq``, ``types``, ``results``)."""
