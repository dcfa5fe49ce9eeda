"""The LoRA baseline, answering the adapter contract (:mod:`calyrex.adapters.contract`).

:class:`LoraBaseline` *is* PEFT's ``PeftModelForCausalLM`` (same module tree, same state-dict
keys, same files: ``save_pretrained`` / ``PeftModel.from_pretrained`` read and write it, and
``transformers.Trainer`` treats it as the PEFT model it is) with what the contract adds: it
takes ``system_mask`` and ignores it (LoRA has no span pathway), its adapter state comes in and
out under PEFT's file keys with mismatches refused, and after ``unload()`` it refuses to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

try:
    from peft import LoraConfig, PeftConfig, PeftModelForCausalLM
    from peft.utils import get_peft_model_state_dict, set_peft_model_state_dict
except ImportError as err:  # an optional dependency
    raise ImportError("the LoRA baseline needs PEFT: pip install 'calyrex[lora]'") from err

from ..core.adapter_io import check_state, whole, write_tensors
from ..core.model import UnloadedError


class LoraBaseline(PeftModelForCausalLM):
    """PEFT LoRA on a causal LM, with the adapter contract's calls."""

    method = "lora"
    uses_span = False  # no pathway reads the system span
    markers = None  # no fallback span markers to carry: nothing reads a span

    @classmethod
    def from_config(cls, model: nn.Module, config: Mapping[str, Any] | LoraConfig) -> LoraBaseline:
        """A fresh, trainable LoRA from a ``LoraConfig`` or the dict PEFT saved (its
        ``inference_mode`` is overridden: a loaded adapter is trainable, as every method's is)."""
        if not isinstance(config, PeftConfig):
            config = PeftConfig.from_peft_type(**dict(config))
        config.inference_mode = False
        config.base_model_name_or_path = vars(model).get("name_or_path") or None
        return cls(model, config)

    def check_loaded(self) -> None:
        if vars(self).get("unloaded", False):
            raise UnloadedError(self)

    def forward(self, *args: Any, system_mask: Any = None, **kwargs: Any) -> Any:
        self.check_loaded()
        return super().forward(*args, **kwargs)

    def generate(self, *args: Any, system_mask: Any = None, **kwargs: Any) -> Any:
        self.check_loaded()
        return super().generate(*args, **kwargs)

    def adapter_state_dict(self) -> dict[str, torch.Tensor]:
        """The LoRA tensors under PEFT's file keys (``get_peft_model_state_dict``), each whole
        (a sharded DTensor gathered: call on every rank, as for a calyrex model)."""
        self.check_loaded()
        return {k: whole(v) for k, v in get_peft_model_state_dict(self).items()}

    def load_adapter_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Inverse of :meth:`adapter_state_dict`: exactly its keys, else ``AdapterError`` and
        nothing is loaded."""
        check_state(self.adapter_state_dict(), state, "the LoRA state")
        set_peft_model_state_dict(self, dict(state))

    def save_adapter(self, directory: str, state: Mapping[str, torch.Tensor] | None = None) -> None:
        """PEFT's two files, as ``save_pretrained`` writes them (``PeftModel.from_pretrained``
        loads them too), the weights atomically; ``state``: an :meth:`adapter_state_dict`
        already gathered."""
        state = self.adapter_state_dict() if state is None else state
        write_tensors(Path(directory), state)  # weights first: the config vouches for them
        self.peft_config[self.active_adapter].save_pretrained(str(directory))

    def unload(self) -> nn.Module:
        """The HF model without the LoRA layers (PEFT's ``unload``); this wrapper is spent."""
        return self._give_back(self.base_model.unload)

    remove = unload

    def merge_and_unload(self, *args: Any, **kwargs: Any) -> nn.Module:
        """The HF model with the LoRA update merged in (PEFT's); this wrapper is spent."""
        return self._give_back(lambda: self.base_model.merge_and_unload(*args, **kwargs))

    def _give_back(self, unload: Any) -> nn.Module:
        self.check_loaded()
        base = unload()
        vars(self)["unloaded"] = True
        return base
