"""CALYREX: cross-attention layers that anchor a frozen decoder LLM to its system prompt."""

from .adapters.loading import load_adapter, load_model, save_adapter
from .adapters.methods import METHODS, accept_system_mask, adapt, is_calyrex
from .core.adapter_io import AdapterError
from .core.config import CalyrexConfig
from .core.hf import UnsupportedModelError
from .core.model import AlreadyWrappedError, CalyrexModel, count_trainable, is_adapter_param
from .core.placement import PRESETS, placement_layers
from .core.version import __version__
from .core.wrap import wrap
from .span.chat import ChatTemplateError, SystemPromptTruncatedError, encode_chat
from .span.markers import SpanMarkers, detect_system_mask, span_markers

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
