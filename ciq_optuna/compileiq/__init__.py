"""The CompileIQ-compatible API, built on the product: ``ciq``, ``types``, ``results``,
``search_spaces`` and ``utils`` mirror CompileIQ's modules, so ``from compileiq import ciq``
becomes ``from ciq_optuna.compileiq import ciq`` (see docs/compileiq.md)."""
