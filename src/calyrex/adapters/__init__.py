"""Adapters built on the core: the methods registry (CALYREX, LoRA, ParallelMLP), their
parameter matching, and ``load_model`` / ``load_adapter`` / ``save_adapter``."""
