"""CompileIQ-compatible search spaces: the DSL (``base``) and the compiler spaces (``compilers``)."""
