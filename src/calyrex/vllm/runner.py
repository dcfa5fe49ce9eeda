"""Per-request system spans on vLLM's V1 model runner (the one vLLM's CPU build runs).

The V1 runner hands the model extra forward kwargs from ``_init_model_kwargs``. This patch adds
two when the model is a calyrex one: ``calyrex_spans`` (R, 2), each scheduled request's span
bounds computed once from its whole prompt (the runner's ``input_batch`` holds every prompt
token), and ``calyrex_query_start_loc`` (R+1,) to map flat tokens to requests. Computing the
span from the whole prompt rather than from lookback tokens keeps it right when a chunk ends
inside the system prompt, before the token that closes it.

Small and version-guarded: :func:`patch` checks the private names it relies on and fails with
the vLLM version in the message when they moved.
"""

from __future__ import annotations

from typing import Any

import torch

from .span import prompt_bounds

_PATCHED = "_calyrex_patched"


def _spans(runner: Any, markers: Any, num_reqs: int) -> torch.Tensor:
    """(R, 2) long bounds of the first ``num_reqs`` requests of the runner's batch, memoised."""
    batch = runner.input_batch
    memo: dict[str, tuple[int, int]] = getattr(runner, "_calyrex_spans", {})
    rows, kept = [], {}
    for i in range(num_reqs):
        rid = batch.req_ids[i]
        if rid not in memo:
            prompt = batch.token_ids_cpu[i, : int(batch.num_prompt_tokens[i])].tolist()
            memo[rid] = prompt_bounds(markers, prompt)
        kept[rid] = memo[rid]
        rows.append(kept[rid])
    runner._calyrex_spans = kept  # finished requests drop out
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
        if model is None or not hasattr(model, "calyrex_state"):
            return kwargs
        n = self.input_batch.num_reqs if num_reqs is None else num_reqs
        kwargs["calyrex_spans"] = _spans(self, model.calyrex_markers, n).to(self.device)
        kwargs["calyrex_query_start_loc"] = self.query_start_loc.cpu[: n + 1].to(self.device)
        return kwargs

    runner_cls._init_model_kwargs = _init_model_kwargs
    setattr(runner_cls, _PATCHED, True)
