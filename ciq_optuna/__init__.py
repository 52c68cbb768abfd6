"""ciq-optuna: an open compiler autotuner for GPU kernels, built on Optuna."""

__version__ = "0.1.0"
