"""CALYREX: cross-attention layers that anchor a frozen decoder LLM to its system prompt."""

from .adapter_io import AdapterError
from .chat import ChatTemplateError, SystemPromptTruncatedError, encode_chat
from .config import CalyrexConfig
from .hf import UnsupportedModelError
from .loading import load_adapter, load_model, save_adapter
from .markers import SpanMarkers, detect_system_mask, span_markers
from .methods import METHODS, accept_system_mask, adapt, is_calyrex
from .model import AlreadyWrappedError, CalyrexModel, count_trainable, is_adapter_param
from .placement import PRESETS, placement_layers
from .version import __version__
from .wrap import wrap

__all__ = [
    "__version__",
    "AdapterError",
    "AlreadyWrappedError",
    "CalyrexConfig",
    "CalyrexModel",
    "METHODS",
    "accept_system_mask",
    "adapt",
    "ChatTemplateError",
    "PRESETS",
    "SpanMarkers",
    "SystemPromptTruncatedError",
    "UnsupportedModelError",
    "count_trainable",
    "detect_system_mask",
    "encode_chat",
    "is_adapter_param",
    "is_calyrex",
    "load_adapter",
    "load_model",
    "placement_layers",
    "save_adapter",
    "span_markers",
    "wrap",
]
