"""Per-request system spans on vLLM's V1 model runner (the one vLLM's CPU build runs).

The V1 runner hands the model extra forward kwargs from ``_init_model_kwargs``. This patch adds
two when the model is a calyrex one: ``calyrex_spans`` (R, 2), each scheduled request's span
bounds as the input processor fixed them (``calyrex.vllm.inputs``; they arrive with the request
in its sampling params' ``extra_args``, and the runner keeps each request's sampling params in
``self.requests``), and ``calyrex_query_start_loc`` (R+1,) to map flat tokens to requests.
Nothing here reads a prompt's ids: the span was fixed before the request reached the engine.

Small and version-guarded: :func:`patch` checks the private names it relies on and fails with
the vLLM version in the message when they moved.
"""

from __future__ import annotations

from typing import Any

import torch

from .models import CalyrexMixin
from .span import carried_bounds

_PATCHED = "_calyrex_patched"


def request_spans(runner: Any, num_reqs: int) -> torch.Tensor:
    """(R, 2) long: the carried bounds of the first ``num_reqs`` requests of the runner's batch,
    in the batch's order (that of ``query_start_loc``)."""
    rows = []
    for rid in runner.input_batch.req_ids[:num_reqs]:
        params = runner.requests[rid].sampling_params
        rows.append(carried_bounds(params.extra_args if params is not None else None, rid))
    return torch.tensor(rows, dtype=torch.long).reshape(num_reqs, 2)


def patch(runner_cls: Any) -> None:
    """Make ``runner_cls._init_model_kwargs`` add the calyrex kwargs (idempotent)."""
    if getattr(runner_cls, _PATCHED, False):
        return
    original = getattr(runner_cls, "_init_model_kwargs", None)
    if original is None:
        import vllm

        raise RuntimeError(
            f"calyrex.vllm: vLLM {vllm.__version__}'s model runner has no _init_model_kwargs; "
            "this vLLM version is not supported (see calyrex.vllm.SUPPORTED)"
        )

    def _init_model_kwargs(self: Any, num_reqs: int | None = None) -> dict[str, Any]:
        kwargs = original(self, num_reqs)
        model = self.get_model() if hasattr(self, "model") else None
        if not isinstance(model, CalyrexMixin):
            return kwargs
        n = self.input_batch.num_reqs if num_reqs is None else num_reqs
        kwargs["calyrex_spans"] = request_spans(self, n).to(self.device)
        kwargs["calyrex_query_start_loc"] = self.query_start_loc.cpu[: n + 1].to(self.device)
        return kwargs

    runner_cls._init_model_kwargs = _init_model_kwargs
    setattr(runner_cls, _PATCHED, True)
