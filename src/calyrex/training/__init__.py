"""Frozen-backbone SFT for CALYREX and its parameter-matched LoRA and ParallelMLP baselines."""

from .config import TrainConfig
from .data import DataError, load_conversations
from .run import TrainResult, train

__all__ = ["DataError", "TrainConfig", "TrainResult", "load_conversations", "train"]
