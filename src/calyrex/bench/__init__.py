"""Benchmarks of CALYREX against LoRA / ParallelMLP (training) and the base model (inference).

``calyrex bench`` (or ``python benchmarks/bench.py``) runs :func:`run.run_bench` and prints
tables; see the README's Performance section for what each figure means and how to reproduce.
"""
