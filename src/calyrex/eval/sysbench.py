"""SysBench (github.com/PKU-Baichuan-MLSystemLab/SysBench): system-message following over turns.

Data: ``datas/system_benchmark_eval_datas.json``, a list of sessions with ``system_id``,
``system_prompt``, ``messages`` (system, then user / reference-assistant pairs),
``prompt_infos`` (per user message: ``alignment`` and ``criteria`` {id: {criteria_id,
criteria_content, criteria_type}}) and ``rounds_related``.

Generation is multi-turn on the model's own history (the benchmark's default, not the
reference answers). Each turn's reply is judged against that turn's criteria with the
benchmark's own judge prompt (:func:`judge_prompt`, same wording as the official
``get_eval_pattern``); the judge returns a yes (是) / no (否) verdict per criterion.

Metrics (Qin et al. 2024): ``CSR`` constraints satisfied / constraints; ``ISR`` turns with
every constraint satisfied / turns; ``SSR`` the mean number of consecutive satisfied turns
from the first (the official ``cal_continuous_avg``); ``ISR_turn{k}`` per turn (plotted) and
``ISR_align`` / ``ISR_misalign``.

Role mapping: the session's system prompt is the system message; user and assistant turns keep
their roles. Responses format: ``system_id`` and ``responses`` (one reply per user turn), or the
official inference output's ``infer_results`` messages.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from typing import Any

from .bench import Benchmark, Context, Item, Row, batches, curve
from .data import DataFormatError, read_rows, require
from .generate import Skip
from .judge import JudgeUnavailable

FIELDS = ("system_id", "system_prompt", "messages", "prompt_infos")
YES, NO = "是", "否"


def load_sysbench(data: str | None, limit: int | None = None) -> list[Item]:
    if not data:
        raise FileNotFoundError(
            "SysBench data: pass --data sysbench=datas/system_benchmark_eval_datas.json "
            "(from github.com/PKU-Baichuan-MLSystemLab/SysBench)"
        )
    rows = read_rows(data)
    require(rows, FIELDS, data)
    for row in rows:
        users = [m["content"] for m in row["messages"] if m["role"] == "user"]
        if row["messages"][0]["role"] != "system" or any(
            u not in row["prompt_infos"] for u in users
        ):
            raise DataFormatError(
                f"{data}: session {row['system_id']} must start with a system message and have "
                "prompt_infos for every user message"
            )
    rows = rows[:limit] if limit else rows
    return [{**r, "id": str(r["system_id"])} for r in rows]


def user_turns(item: Item) -> list[str]:
    return [m["content"] for m in item["messages"] if m["role"] == "user"]


def criteria_lines(criteria: dict[str, Any]) -> str:
    return "\n".join(
        f"{c['criteria_id']}. {c['criteria_content']} | {c['criteria_type']}"
        for c in criteria.values()
    )


def judge_prompt(
    system: str, history: list[dict[str, str]], user: str, answer: str, criteria: dict
) -> str:
    """The official SysBench judge prompt for one turn (wording of ``get_eval_pattern``)."""
    text = (
        "\n# 背景与目标\n你现在是一个大模型结果评估专家。以下，你将会面对一个大模型system prompt遵循能力评估任务。\n"
        "我将会给出你对应的system prompt、历史对话、当前轮次的问题、和当前轮次的回答\n需要你准确判断当前轮次的回答是否合格。\n"
        "为了让你的评判足够准确，我还将会给出评判细则，需要你准确判断并告知评判细则当中每一条约束的遵循情况。\n\n"
        f"# 对话信息\n## system prompt\n<system prompt>\n{system}\n</system prompt>\n\n## 历史对话轮次\n\n"
    )
    for k in range(len(history) // 2):
        u, a = history[2 * k], history[2 * k + 1]
        text += (
            f"\n<round-{k + 1}>\n<role:>\n{u['role']}\n</role>\n<content>\n{u['content']}\n</content>\n"
            f"<role:>{a['role']}</role>\n<content>\n{a['content']}\n</content>\n</round-{k + 1}>\n\n"
        )
    text += (
        f"\n## 当前待评估的对话轮次\n<role:>\nuser\n</role>\n<content>\n{user}\n</content>\n\n"
        f"<role:>\nassistant\n</role>\n<content>\n{answer}\n</content>\n\n"
        f"# 评判细则\n<评判细则>\n{criteria_lines(criteria)}\n</评判细则>\n"
    )
    return text + (
        "\n请你认真阅读上述system prompt设定与历史对话轮次，并严格以评判细则为评判标准，针对评判细则当中的逐条要求，判断当前对话轮次的回答是否遵循。\n"
        "请以json格式回答，包含两个字段：评判理由、评判结果（评判结果为一个dict，dict的key评判细则的序号，value为对应的评判结果（是/否））\n"
        '输出格式如下：\n\'\'\'json\n{\n  "评判理由": "……",\n  "评判结果": {\n    1: "……",\n    ……\n  }\n}\n\'\'\'\n\n'
    )


def parse_verdicts(text: str, criteria: dict[str, Any]) -> dict[str, bool]:
    """{criterion id: satisfied} from the judge's reply; JudgeUnavailable if malformed."""
    block = re.search(r"\{.*\}", text, flags=re.DOTALL)
    obj = None
    for parse in (json.loads, ast.literal_eval):
        try:
            obj = parse(block.group(0)) if block else None
            break
        except (ValueError, SyntaxError):
            continue
    results = obj.get("评判结果") if isinstance(obj, dict) else None
    if not isinstance(results, dict):
        raise JudgeUnavailable(f"SysBench judge reply has no 评判结果 dict: {text[:200]!r}")
    verdicts = {str(k): v for k, v in results.items()}
    wanted = {str(c["criteria_id"]) for c in criteria.values()}
    if set(verdicts) != wanted or not all(v in (YES, NO) for v in verdicts.values()):
        raise JudgeUnavailable(
            f"SysBench judge verdicts {verdicts} do not cover criteria {sorted(wanted)}"
        )
    return {k: v == YES for k, v in verdicts.items()}


def row_responses(row: Row) -> list[str | None]:
    if "responses" in row:
        return row["responses"]
    return [m["content"] for m in row["infer_results"] if m["role"] == "assistant"]


class SysBench(Benchmark):
    name = "sysbench"
    needs_judge = True
    source = "github.com/PKU-Baichuan-MLSystemLab/SysBench (datas/system_benchmark_eval_datas.json)"

    def load(self, data: str | None, ctx: Context) -> list[Item]:
        return load_sysbench(data, ctx.config.limit)

    def row_id(self, row: Row) -> str:
        return str(row["system_id"])

    def generate(self, items: list[Item], ctx: Context) -> Iterator[Row]:
        for chunk in batches(items, ctx.config.batch_size):
            histories = [[item["messages"][0]] for item in chunk]  # the system message
            replies: list[list[str | None]] = [[] for _ in chunk]
            for turn in range(max(len(user_turns(it)) for it in chunk)):
                live = [
                    i
                    for i, it in enumerate(chunk)
                    if turn < len(user_turns(it)) and None not in replies[i]
                ]
                for i in live:
                    histories[i].append({"role": "user", "content": user_turns(chunk[i])[turn]})
                outs = ctx.generator.chat([histories[i] for i in live]) if live else []
                for i, out in zip(live, outs, strict=True):
                    text = None if isinstance(out, Skip) else out
                    replies[i].append(text)  # a skipped turn ends the session (no history to go on)
                    histories[i].append({"role": "assistant", "content": text or ""})
            for item, rep in zip(chunk, replies, strict=True):
                yield {"system_id": item["system_id"], "responses": rep}

    def judge_session(
        self, item: Item, replies: list[str | None], judge: Any
    ) -> list[dict[str, bool] | None]:
        system = item["messages"][0]["content"]
        history: list[dict[str, str]] = []
        out: list[dict[str, bool] | None] = []
        for user, answer in zip(user_turns(item), replies, strict=False):
            if answer is None:
                out.append(None)
                break
            criteria = item["prompt_infos"][user]["criteria"]
            reply = judge(judge_prompt(system, history, user, answer, criteria))
            out.append(parse_verdicts(reply, criteria))
            history += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
        return out

    def score(self, items: list[Item], rows: list[Row], ctx: Context) -> dict[str, Any]:
        if ctx.judge is None:
            raise JudgeUnavailable(
                "SysBench needs a judge: pass --judge (an OpenAI-compatible URL or hf:MODEL)"
            )
        require(rows, ("system_id",), "sysbench responses")
        by_id = {str(r["system_id"]): r for r in rows}
        sessions, missing = [], []
        for item in items:
            row = by_id.get(item["id"])
            if row is None:
                missing.append(item["id"])
                continue
            sessions.append((item, self.judge_session(item, row_responses(row), ctx.judge)))
        return {**session_metrics(sessions), "missing": missing}


def session_metrics(sessions: list[tuple[Item, list[dict[str, bool] | None]]]) -> dict[str, Any]:
    """CSR, ISR, SSR and per-turn ISR over judged sessions (turns not run count as failed)."""
    constraints: list[bool] = []
    turns: list[bool] = []
    by_turn: dict[int, list[bool]] = {}
    by_align: dict[str, list[bool]] = {"align": [], "misalign": []}
    stable: list[int] = []
    skipped_turns = 0
    for item, verdicts in sessions:
        run = 0
        users = user_turns(item)
        for k, user in enumerate(users):
            v = verdicts[k] if k < len(verdicts) else None
            skipped_turns += v is None
            ok = v is not None and all(v.values())
            constraints += (
                list(v.values()) if v else [False] * len(item["prompt_infos"][user]["criteria"])
            )
            turns.append(ok)
            by_turn.setdefault(k + 1, []).append(ok)
            by_align.setdefault(item["prompt_infos"][user].get("alignment", "align"), []).append(ok)
            run = run + 1 if ok and run == k else run
        stable.append(run)
    mean = lambda v: sum(v) / len(v) if v else None  # noqa: E731
    metrics = {
        "CSR": mean(constraints),
        "ISR": mean(turns),
        "SSR": mean(stable),
        "n_sessions": len(sessions),
    }
    metrics |= {f"ISR_turn{k}": mean(v) for k, v in sorted(by_turn.items())}
    metrics |= {f"ISR_{a}": mean(v) for a, v in by_align.items() if v}
    turns_x = sorted(by_turn)
    plot = curve(turns_x, [mean(by_turn[k]) for k in turns_x], "turn", "ISR")
    return {
        "metrics": metrics,
        "skipped_turns": skipped_turns,
        "curves": {"sysbench_isr_per_turn": plot},
    }
