"""The ``calyrex`` lm-eval model: loads base + adapter from paths, runs local JSONL tasks
offline, and hands the model the same system span as ``encode_chat`` in both the generation and
the log-likelihood paths."""

import json

import pytest
import torch

import calyrex
from calyrex.backbones.tiny import tiny_model, tiny_tokenizer

SYSTEM = "Always answer in capital letters."
QUESTIONS = ["Hello! How are you today?", "Please sort these numbers: 3 1 2."]

GEN_TASK = """task: calyrex_local_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["<|im_end|>"]
  max_gen_toks: 3
  do_sample: false
metric_list:
  - metric: exact_match
"""
MC_TASK = """task: calyrex_local_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{label}}}}"
metric_list:
  - metric: acc
"""


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A tiny base model + tokenizer on disk and a CAL adapter with random weights for it."""
    root = tmp_path_factory.mktemp("lm")
    tok = tiny_tokenizer("chatml")
    base = tiny_model("qwen2")
    base.save_pretrained(root / "base")
    tok.save_pretrained(root / "base")
    wrapped = calyrex.wrap(
        tiny_model("qwen2"), calyrex.CalyrexConfig(placement="late_half"), tokenizer=tok
    )
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in wrapped.named_parameters():
            if calyrex.is_adapter_param(name):
                p.copy_(torch.randn(p.shape, generator=g) * 0.3 + (1.0 if "norm" in name else 0.0))
    wrapped.save_adapter(root / "adapter")
    rows = [
        {"question": q, "answer": "OK", "choices": ["yes", "no"], "label": 0} for q in QUESTIONS
    ]
    (root / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "tasks").mkdir()
    (root / "tasks" / "gen.yaml").write_text(GEN_TASK.format(data=root / "data.jsonl"))
    (root / "tasks" / "mc.yaml").write_text(MC_TASK.format(data=root / "data.jsonl"))
    return root, tok


def _spans(mask, ids):
    """(positions, token ids) of the span of each row."""
    return [
        (torch.nonzero(m).flatten().tolist(), i[m.bool()].tolist())
        for m, i in zip(mask, ids, strict=True)
    ]


def test_local_tasks_offline_receive_the_encode_chat_span(saved, monkeypatch):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from calyrex.eval.lm import CalyrexLM

    root, tok = saved
    lm = CalyrexLM(
        pretrained=str(root / "base"),
        adapter=str(root / "adapter"),
        device="cpu",
        dtype="float32",
        batch_size=2,
    )
    model = lm.model
    assert isinstance(model, calyrex.CalyrexModel)
    seen = {"call": [], "generate": []}

    def on_call(m, args, kwargs):
        """The log-likelihood path's prompt calls (each context once, left-padded; its calls
        with a cache teacher-force continuations, and so do generate's steps)."""
        if args or "cache" in kwargs or "past_key_values" in kwargs:
            return
        ids, mask = kwargs["input_ids"], kwargs["system_mask"]
        first = kwargs["attention_mask"].long().argmax(1)  # left padding: where each row starts
        for b in range(ids.shape[0]):  # unpadded, so positions compare with encode_chat's
            seen["call"].append((ids[b : b + 1, first[b] :], mask[b : b + 1, first[b] :]))

    model.register_forward_pre_hook(on_call, with_kwargs=True)
    original = model.generate

    def spy(*args, **kwargs):
        seen["generate"].append((kwargs["input_ids"], kwargs["system_mask"]))
        return original(*args, **kwargs)

    monkeypatch.setattr(model, "generate", spy)
    out = lm_eval.simple_evaluate(
        model=lm,
        tasks=["calyrex_local_gen", "calyrex_local_mc"],
        task_manager=TaskManager(include_path=str(root / "tasks")),
        apply_chat_template=True,
        system_instruction=SYSTEM,
    )
    assert set(out["results"]) == {"calyrex_local_gen", "calyrex_local_mc"}
    assert 0.0 <= out["results"]["calyrex_local_mc"]["acc,none"] <= 1.0
    convs = [
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}] for q in QUESTIONS
    ]
    expected = set()
    for conv in convs:
        batch = calyrex.encode_chat(tok, [conv], add_generation_prompt=True)
        expected |= {
            (tuple(p), tuple(i)) for p, i in _spans(batch["system_mask"], batch["input_ids"])
        }
    assert seen["generate"] and seen["call"]
    for path in ("generate", "call"):
        got = set()
        for ids, mask in seen[path]:
            assert mask.any(dim=1).all(), f"{path}: a row without system span"
            got |= {(tuple(p), tuple(i)) for p, i in _spans(mask, ids)}
        # left padding (generation) shifts positions; compare token ids, and positions on the
        # log-likelihood path (its rows recorded without their padding)
        assert {i for _, i in got} == {i for _, i in expected}, path
        if path == "call":
            assert got == expected


def test_without_chat_template_there_is_no_span_and_the_base_model_is_reproduced(saved):
    from calyrex.eval.lm import CalyrexLM

    root, _ = saved
    cal = CalyrexLM(
        pretrained=str(root / "base"), adapter=str(root / "adapter"), device="cpu", dtype="float32"
    )
    base = CalyrexLM(pretrained=str(root / "base"), device="cpu", dtype="float32")
    reqs = [("Hello! How are you", " today?")]
    from lm_eval.api.instance import Instance

    insts = [Instance("loglikelihood", {}, r, 0) for r in reqs]
    assert cal.loglikelihood(insts) == base.loglikelihood(insts)


def test_lm_eval_path_and_encode_chat_give_the_same_replies(saved):
    """The same conversations through lm-eval (render → ids → model) and through the
    ``encode_chat`` runners (``Generator``) give the same greedy replies from one CAL model,
    including a system prompt the input_ids-only fallback alone would not see the same way."""
    from lm_eval.api.instance import Instance

    from calyrex.eval.generate import Generator
    from calyrex.eval.lm import CalyrexLM

    root, tok = saved
    lm = CalyrexLM(
        pretrained=str(root / "base"), adapter=str(root / "adapter"), device="cpu", dtype="float32"
    )
    convs = [
        [{"role": "system", "content": s}, {"role": "user", "content": q}]
        for s in (SYSTEM, "\n  Never reveal the secret word.  ")
        for q in QUESTIONS
    ] + [[{"role": "user", "content": QUESTIONS[0]}]]
    args = {"until": ["<|im_end|>"], "max_gen_toks": 6, "do_sample": False}
    reqs = [Instance("generate_until", {}, (lm.apply_chat_template(c), args), 0) for c in convs]
    via_lm_eval = lm.generate_until(reqs)
    tok = lm.tokenizer  # as loaded from disk: the tokenizer both paths must share
    via_encode_chat = Generator(lm.model, tok, max_new_tokens=6, batch_size=2).chat(convs)
    assert via_lm_eval == [r.split("<|im_end|>")[0] for r in via_encode_chat]
    base = Generator(calyrex.backbones.tiny.tiny_model("qwen2"), tok, max_new_tokens=6).chat(convs)
    assert base != via_encode_chat  # the span reached the CAL blocks
