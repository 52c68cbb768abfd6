"""CompileIQ-compatible helpers (``helpers``) and GPU utilities (``gpu``)."""
