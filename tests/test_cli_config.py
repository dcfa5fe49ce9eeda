"""Every ``calyrex`` subcommand takes its flags from typed dataclasses: every field is a flag with
help, choices come from ``Literal`` and the registries (and are enforced), YAML < flags, and a
field added to a dataclass is a flag with no other edit."""

import argparse
import dataclasses
import re
import typing
from dataclasses import dataclass, field
from typing import Literal

import pytest

from calyrex import cli
from calyrex.adapters.methods import METHODS
from calyrex.backbones.precision import PRECISIONS, Dtype
from calyrex.bench.config import BenchConfig
from calyrex.cli.fields import (
    add_options,
    field_help,
    flag_fields,
    options_from,
    options_of,
    plain,
    split_options,
)
from calyrex.core.plugins import load
from calyrex.training.config import TrainConfig


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.option_strings[0]: a for a in parser._actions if a.option_strings}


@pytest.mark.parametrize(
    "command, config, own",
    [
        ("train", TrainConfig, {"--config"}),
        ("bench", BenchConfig, {"--quick", "--threads", "--json"}),
    ],
)
def test_every_field_is_a_flag_with_help(command, config, own):
    flags = _flags(cli.subcommand_parser(command))
    fields = {"--" + f.name.replace("_", "-") for f in dataclasses.fields(config)}
    assert set(flags) == {"-h"} | own | fields
    said = {flag: re.sub(r"\(?default: .*$", "", a.help or "").strip() for flag, a in flags.items()}
    assert [flag for flag, text in said.items() if len(text) < 10] == []  # more than a default
    text = cli.subcommand_parser(command).format_help()
    assert "(default: " in text


@pytest.mark.parametrize("flag, registry", [("--precision", PRECISIONS), ("--method", METHODS)])
def test_choices_are_shown_and_a_wrong_value_is_refused(flag, registry, capsys):
    assert "{" + ",".join(registry) + "}" in cli.subcommand_parser("train").format_help()
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--model", "m", "--data", "d", "--out", "o", flag, "nonsense"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: invalid choice: 'nonsense'" in err
    assert all(repr(name) in err for name in registry)  # the choices, in the message


def test_bench_dtype_choices_include_torch_names(capsys):
    with pytest.raises(SystemExit):
        cli.main(["bench", "--dtype", "float8"])
    assert "invalid choice: 'float8'" in capsys.readouterr().err


@pytest.fixture
def ran(monkeypatch):
    """The config ``calyrex train`` / ``calyrex bench`` would run, instead of running it."""
    seen = []
    monkeypatch.setattr("calyrex.training.run.train", seen.append)
    monkeypatch.setattr("calyrex.bench.run.run_bench", lambda cfg: seen.append(cfg) or {})
    monkeypatch.setattr("calyrex.bench.report.show", lambda results: None)
    return seen


def test_yaml_sets_defaults_and_flags_win(tmp_path, ran):
    yaml = tmp_path / "run.yaml"
    yaml.write_text(
        "model: m\ndata: d.jsonl\nout: o\nmax_steps: 2\nlr: 0.5\nbatch-size: 4\nprogress: false\n"
    )
    argv = ["train", "--config", str(yaml), "--max-steps", "3", "--progress", "--out", "p"]
    assert cli.main(argv) == 0
    (cfg,) = ran
    assert (cfg.max_steps, cfg.progress, cfg.out) == (3, True, "p")  # flags over the YAML
    assert (cfg.model, cfg.lr, cfg.batch_size) == ("m", 0.5, 4)  # the YAML over the defaults
    assert cfg.epochs == TrainConfig.epochs and cfg.seed == TrainConfig.seed  # the defaults


def test_flags_alone_need_model_data_and_out(ran, capsys):
    assert cli.main(["train", "--model", "m", "--out", "o"]) == 2
    assert "missing --data" in capsys.readouterr().err and ran == []
    assert cli.main(["train", "--model", "m", "--data", "d", "--out", "o", "--no-progress"]) == 0
    assert ran == [TrainConfig(model="m", data="d", out="o", progress=False)]


def test_list_dict_and_union_fields_parse(ran):
    argv = ["train", "--model", "m", "--out", "o", "--layers", "3", "5", "--system-pool"]
    argv += ["--data", "a.jsonl", "b.jsonl", "--block", '{"init_from_host": true}']
    assert cli.main(argv) == 0
    cfg = ran.pop()
    assert cfg.layers == [3, 5] and cfg.system_pool == [] and cfg.data == ["a.jsonl", "b.jsonl"]
    assert cfg.block == {"init_from_host": True}
    assert cli.main(["train", "--model", "m", "--out", "o", "--data", "a.jsonl"]) == 0
    assert ran.pop().data == "a.jsonl"  # one source stays a string, as in a YAML file
    argv = ["train", "--model", "m", "--out", "o", "--data", "d", "--objective", "dpo"]
    assert cli.main([*argv, "--loss-type", "sigmoid", "sft", "--loss-weights", "1", "0.5"]) == 0
    assert (ran[-1].loss_type, ran.pop().loss_weights) == (["sigmoid", "sft"], [1.0, 0.5])
    with pytest.raises(SystemExit):
        cli.main(["train", "--model", "m", "--out", "o", "--data", "d", "--layers", "x"])
    for not_an_object in ("[1, 2]", "{not json"):
        with pytest.raises(SystemExit):
            cli.main(
                ["train", "--model", "m", "--out", "o", "--data", "d", "--block", not_an_object]
            )


def test_bench_flags_and_keywords_build_the_same_config(ran):
    argv = ["bench", "--quick", "--sections", "train", "inference", "--scaling-lengths", "64"]
    assert cli.main([*argv, "128", "--train-warmup", "2", "--no-quick"]) == 0
    assert cli.main([*argv, "128", "--train-warmup", "2"]) == 0
    from calyrex.bench.command import bench

    assert bench(quick=True, sections=["train", "inference"], scaling_lengths=[64, 128],
                 train_warmup=2, device=None) == 0  # fmt: skip
    expected = BenchConfig(
        preset="quick", sections=["train", "inference"], scaling_lengths=[64, 128], train_warmup=2
    )
    assert ran == [dataclasses.replace(expected, preset=None), expected, expected]


@dataclass
class Throwaway:
    count: int = 1
    """How many."""
    scale: float | None = None
    """How big."""
    name: str = field(default="x", metadata={"choices": {"x": 0, "y": 1}})
    """Which one."""
    mode: Literal["fast", "slow"] = "fast"
    """How fast."""
    on: bool = True
    """Whether on."""
    sizes: list[int] = field(default_factory=lambda: [1, 2])
    """Some sizes."""
    pair: tuple[int, int] = (0, 0)
    """Two numbers."""
    weights: tuple[float, ...] = ()
    """Any number of weights."""
    percent: int = 5
    """A share in %."""


@dataclass
class Wider(Throwaway):
    added: str = "a"
    """A field added later."""
    count: int = 1
    """How many, as the subclass says."""


@options_from(Wider)
def throwaway_command(**options):
    """A subcommand over :class:`Wider`."""
    return len(options)


def test_a_new_field_is_a_flag_with_no_other_edit(monkeypatch, capsys):
    monkeypatch.setitem(cli.COMMANDS, "throwaway", f"{__name__}:throwaway_command")
    parser = cli.subcommand_parser("throwaway")
    flags = _flags(parser)
    assert set(flags) == {"-h"} | {"--" + f.name for f in dataclasses.fields(Wider)}
    assert flags["--added"].help == "A field added later. (default: a)"
    assert flags["--count"].help == "How many, as the subclass says. (default: 1)"  # overridden
    assert flags["--percent"].help == "A share in %%. (default: 5)"  # the base class's docstring
    assert flags["--scale"].help == "How big."  # None: no default shown
    assert flags["--on"].help == "Whether on. (default: on)"  # a switch's default in words
    assert flags["--mode"].choices == ("fast", "slow") and flags["--name"].choices == ["x", "y"]
    assert "A share in %" in parser.format_help()
    args = vars(parser.parse_args([]))
    assert set(args) == {"_fn"}  # no flag given: no field in the options
    given = ["--added", "b", "--no-on", "--sizes", "4", "--pair", "7", "8", "--weights", "0.5"]
    given += ["--scale", "2.5", "--mode", "slow", "--name", "y"]
    args = vars(parser.parse_args(given))
    del args["_fn"]
    assert Wider(**args) == Wider(
        added="b",
        on=False,
        sizes=[4],
        pair=(7, 8),
        weights=(0.5,),
        scale=2.5,
        mode="slow",
        name="y",
    )
    assert cli.main(["throwaway", "--count", "3", "--pair", "1", "2"]) == 2  # two options given
    for wrong in (["--mode", "medium"], ["--pair", "1"], ["--count", "1.5"]):
        with pytest.raises(SystemExit):
            parser.parse_args(wrong)


def test_a_field_with_no_command_line_form_fails_loudly():
    @dataclass
    class Odd:
        nested: Throwaway | None = None

    with pytest.raises(TypeError, match="no command-line form"):
        add_options(argparse.ArgumentParser(), Odd)


def test_eval_help_explains_every_flag_and_lists_the_suites():
    """``calyrex eval --help``: each flag has its own help, the suites and dtypes are listed
    from their registries (a suite added to SUITES appears with no other edit)."""
    from calyrex.eval import SUITES

    parser = cli.subcommand_parser("eval")
    said = {
        f: re.sub(r"\(?default: .*$", "", a.help or "").strip() for f, a in _flags(parser).items()
    }
    assert [flag for flag, text in said.items() if len(text) < 10] == []
    text = " ".join(parser.format_help().split())
    assert all(name in text for name in SUITES)
    assert "{" + ",".join(typing.get_args(Dtype)) + "}" in text  # the values --dtype takes


def test_every_subcommand_explains_every_option():
    """Issue 39: each flag of each subcommand has its own help text (not only its default),
    and the flags with a fixed set of values list them."""
    from calyrex.cli import commands, subcommand_parser

    bare, choices = [], {}
    for name in commands():
        parser = subcommand_parser(name)
        for action in parser._actions:
            if action.dest == "help":
                continue
            text = (action.help or "").split(" (default:")[0]
            if not text or text.startswith("default:"):
                bare.append(f"{name} {action.dest}")
            if action.choices:
                choices[f"{name} {action.dest}"] = list(action.choices)
    assert bare == []
    assert choices["study which"] == ["real", "ruleworld"]
    assert choices["serve developer_role"] == ["reject", "system", "user"]
    assert choices["mix access"] == ["default", "fewer-granted", "every-outcome"]
    assert choices["eval dtype"] == ["auto", "float32", "bfloat16", "float16"]
    suite = subcommand_parser("eval")._option_string_actions["--suite"].help
    assert all(name in suite for name in ("sys_ifeval", "tensortrust", "mix_access"))


# the flags that are a subcommand's own parameters, not dataclass fields: a file the fields are
# read from, run-time switches of the benchmark, the server's binding
OWN = {
    "train": {"--config"},
    "bench": {"--quick", "--threads", "--json"},
    "serve": {"--model", "--adapter", "--host", "--port", "--system-prompt",
              "--served-model-name", "--dtype", "--device", "--shutdown-grace", "--api-key"},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(cli.commands()))
def test_every_subcommand_takes_its_options_from_dataclasses(name):
    """Issue 39: library and entry-point subcommands alike: every flag is a field of one of the
    dataclasses the function is marked with (a few listed parameters apart), with help."""
    configs = options_of(load(cli.commands()[name]))
    assert configs, f"calyrex {name}: no @options_from"
    fields = {"--" + f.name.replace("_", "-"): (c, f) for c in configs for f in flag_fields(c)}
    flags = set(_flags(cli.subcommand_parser(name))) - {"-h"}
    assert flags - set(fields) == OWN.get(name, set())
    assert set(fields) <= flags
    bare = [flag for flag, (c, f) in fields.items() if len(field_help(c, f)) < 10]
    assert bare == [], f"calyrex {name}: fields without help"


def test_literal_choices_are_shown_and_enforced(capsys):
    """A field annotated ``Literal[...]`` lists its values in --help and the parser refuses any
    other (mix --kind, mix --access, ruleworld-corpus --kind, eval/analyze --dtype, …)."""
    seen = []
    for name, target in cli.commands().items():
        parser = cli.subcommand_parser(name)
        for config in options_of(load(target)):
            hints = typing.get_type_hints(config if isinstance(config, type) else type(config))
            for f in flag_fields(config):
                kind = hints[f.name]
                if typing.get_origin(kind) is not Literal:
                    continue
                flag = "--" + f.name.replace("_", "-")
                assert list(_flags(parser)[flag].choices) == list(typing.get_args(kind))
                with pytest.raises(SystemExit) as exit_:
                    parser.parse_args([flag, "no-such-value"])
                assert exit_.value.code == 2
                assert (
                    f"argument {flag}: invalid choice: 'no-such-value'" in capsys.readouterr().err
                )
                seen.append(f"{name} {flag}")
    assert {"mix --kind", "mix --access", "ruleworld-corpus --kind", "eval --dtype"} <= set(seen)


@dataclass
class HfStyle:
    """Written for transformers' ``HfArgumentParser``: help in ``metadata``."""

    rank: int = field(default=8, metadata={"help": "The LoRA rank."})
    mode: Literal["a", "b"] = field(default="a", metadata={"help": "Which mode."})
    both: str = field(default="x", metadata={"help": "Not shown."})
    """The docstring, shown."""


@options_from(HfStyle)
def hf_style_command(**options):
    """A subcommand over an HF-style dataclass."""
    return HfStyle(**options).rank


def test_hf_metadata_help_is_read_and_hf_parses_the_same(monkeypatch):
    """HF's ``field(metadata={"help": ...})`` is a flag's help where a field has no docstring
    (the docstring wins where both exist); the same dataclass parses as HfArgumentParser does."""
    from transformers import HfArgumentParser

    monkeypatch.setitem(cli.COMMANDS, "hf-style", f"{__name__}:hf_style_command")
    flags = _flags(cli.subcommand_parser("hf-style"))
    assert flags["--rank"].help == "The LoRA rank. (default: 8)"
    assert flags["--mode"].help == "Which mode. (default: a)" and flags["--mode"].choices
    assert flags["--both"].help == "The docstring, shown. (default: x)"
    argv = ["--rank", "4", "--mode", "b"]
    (hf,) = HfArgumentParser(HfStyle).parse_args_into_dataclasses(argv)
    given = vars(cli.subcommand_parser("hf-style").parse_args(argv))
    del given["_fn"]
    assert HfStyle(**given) == hf == HfStyle(rank=4, mode="b")
    assert cli.main(["hf-style", *argv]) == 4


def test_split_options_sorts_flags_by_dataclass():
    from calyrex.eval.bench import EvalConfig
    from calyrex.eval.command import EvalOptions

    options = {"suite": "ifeval", "data": ["x"], "limit": 3, "seed": 1}
    assert split_options(options, EvalOptions, EvalConfig) == [
        {"suite": "ifeval", "data": ["x"]},  # EvalConfig.data is no flag: --data is EvalOptions'
        {"limit": 3, "seed": 1},
    ]
    with pytest.raises(TypeError, match="unexpected option 'nonsense'"):
        split_options({"nonsense": 1}, EvalOptions, EvalConfig)


def test_eval_flags_fill_eval_config(tmp_path, monkeypatch):
    """calyrex eval reuses the runners' EvalConfig: its flags land there, --data parsed."""
    from calyrex.eval.bench import EvalConfig

    seen = []

    def evaluate_model(names, out, config, *args):
        seen.append((names, config))
        return {"suites": {}}

    monkeypatch.setattr("calyrex.eval.runner.evaluate_model", evaluate_model)
    argv = ["eval", "--suite", "ifeval", "--responses", "r.jsonl", "--out", str(tmp_path)]
    assert cli.main([*argv, "--data", "d.jsonl", "--limit", "3", "--shots", "2", "4"]) == 0
    assert seen == [(["ifeval"], EvalConfig(data={"ifeval": "d.jsonl"}, limit=3, shots=[2, 4]))]


def test_study_recipe_flags_override_the_preset(tmp_path, monkeypatch):
    """calyrex study reuses StudyConfig: a recipe flag sets that field over the chosen preset;
    the RuleWorld study has no such recipe and refuses one."""
    from calyrex.research.study import command
    from calyrex.research.study.config import QUICK

    seen = []
    monkeypatch.setattr(command, "run_study", lambda cfg, out, *a, **k: seen.append(cfg) or {})
    argv = ["study", "real", "--quick", "--out", str(tmp_path), "--steps", "3", "--seeds", "4"]
    assert cli.main(argv) == 0
    assert seen == [dataclasses.replace(QUICK, steps=3, seeds=(4,))]
    assert cli.main(["study", "ruleworld", "--quick", "--out", str(tmp_path), "--lr", "1"]) == 2


def test_a_field_without_default_is_a_required_flag(capsys):
    """analyze's --model/--out come from AnalyzeOptions' fields without defaults; they are
    parameters too, so Python callers keep passing them positionally."""
    with pytest.raises(SystemExit):
        cli.subcommand_parser("analyze").parse_args(["--model", "m"])
    assert "the following arguments are required: --out" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # train's --config may supply them: not required there
        cli.subcommand_parser("train").parse_args(["--nonsense"])
    assert "required" not in capsys.readouterr().err


def test_top_level_help_gives_each_command_a_whole_sentence_and_its_wing(capsys):
    """``calyrex --help``: every command's line is its docstring's first sentence, whole (not a
    first line cut where the text wraps) and without reST markup; the commands are listed by
    wing, the library's apart from the research wing's entry points."""
    from calyrex.cli.fields import summary

    for name, target in cli.commands().items():
        line = summary(load(target))
        assert line.endswith("."), f"calyrex {name}: {line!r} is cut mid-sentence"
        assert "``" not in line and "\n" not in line
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    wings = {x.split(":")[0]: x.split(":")[1].split(", ") for x in text.splitlines() if ": " in x}
    library, research = (set(map(str.strip, wings[w])) for w in ("library", "research"))
    assert {"eval", "serve", "train"} <= library and not {"study", "mix"} & library
    assert {"study", "mix", "reproduce"} <= research and not {"eval", "train"} & research
    assert "deltas vs --baseline) and" in " ".join(text.split())  # the report line, whole


def test_a_summary_is_the_first_sentence_past_abbreviations():
    from calyrex.cli.fields import summary

    def command():
        """Score replies, e.g. a model's, i.e. one per item, vs a reference. Then more.

        A second paragraph.
        """

    assert summary(command) == "Score replies, e.g. a model's, i.e. one per item, vs a reference."


def test_plain_drops_restructuredtext_markup():
    assert plain("run as ``--cases`` (:mod:`.heldout`)") == "run as --cases (.heldout)"
    assert plain(":func:`~calyrex.eval.grant.granted` reads it") == "granted reads it"
    assert plain(":class:`calyrex.eval.bench.Context`") == "calyrex.eval.bench.Context"


@pytest.mark.parametrize("name", sorted(cli.commands()))
def test_help_reads_as_plain_text_not_restructuredtext(name):
    """Help and descriptions come from docstrings written for mkdocstrings; the terminal shows
    them without ``literal`` quotes or :role:`targets`."""
    text = cli.subcommand_parser(name).format_help()
    assert not re.search(r"``|:[a-z]+:`", text), f"calyrex {name} --help shows markup"
    assert "Args:" not in text, f"calyrex {name} --help repeats its Args: block"


def test_a_missing_file_or_a_missing_required_flag_is_one_line_and_exit_2(tmp_path, capsys):
    """A command that meets a missing file ends with its message and status 2, not a traceback;
    a parameter without a default (serve's --model) is a required flag."""
    assert cli.main(["inspect", "--adapter", str(tmp_path / "nowhere")]) == 2  # ValueError
    err = capsys.readouterr().err
    assert err.startswith("calyrex inspect: error: ") and "nowhere" in err
    assert cli.main(["train", "--config", str(tmp_path / "none.yaml")]) == 2  # FileNotFoundError
    err = capsys.readouterr().err
    assert err.startswith("calyrex train: error: ") and "none.yaml" in err
    with pytest.raises(SystemExit) as exit_:
        cli.main(["serve"])
    assert exit_.value.code == 2
    assert "the following arguments are required: --model" in capsys.readouterr().err


def test_args_block_entries_keep_their_continuation_lines():
    """A flag's help from a Google-style ``Args:`` entry: its continuation lines joined, a deeper
    line holding a colon read as continuation (not a parameter), ``name (type):`` understood."""
    from calyrex.cli.fields import param_docs

    def command(first, second):
        """Do a thing.

        Args:
            first: the first line
                continued: on a second.
            second (int): the other one.

        Returns:
            nothing: the end of the block.
        """

    assert param_docs(command) == {
        "first": "the first line continued: on a second.",
        "second": "the other one.",
    }


@dataclass
class First:
    shared: int = 1
    """Seen by both."""


@dataclass
class Second:
    shared: int = 2
    """Seen by both."""
    own: int = 3
    """Only here."""


def test_split_options_gives_a_field_both_dataclasses_hold_to_the_first():
    """A Python caller's option that two dataclasses both hold fills the first one listed (on the
    command line such a pair cannot meet: argparse refuses the second flag)."""
    assert split_options({"shared": 5, "own": 6}, First, Second) == [{"shared": 5}, {"own": 6}]


def test_a_preset_instance_shows_its_values_as_the_defaults():
    """``@options_from(StudyOptions, FULL)``: study's --help gives the full recipe's values, not
    StudyConfig's bare defaults."""
    from calyrex.research.study.config import FULL, StudyConfig

    flags = _flags(cli.subcommand_parser("study"))
    assert FULL.mix_rows != StudyConfig.mix_rows and FULL.access != StudyConfig.access
    assert flags["--mix-rows"].help.endswith(f"(default: {FULL.mix_rows})")
    assert flags["--access"].help.endswith(f"(default: {FULL.access})")


def test_marking_a_command_wrongly_is_refused_by_name():
    """options_from takes dataclasses only; a parameter may not also be a field's flag."""
    with pytest.raises(TypeError, match="is not a dataclass"):
        options_from(dict)
    with pytest.raises(TypeError, match="'count' is both a parameter and a Throwaway field"):
        add_options(argparse.ArgumentParser(), Throwaway, taken=["count"])


def test_placements_are_printed_for_the_model_asked(capsys):
    from calyrex.core.placement import PRESETS, placement_layers

    assert cli.main(["placements", "--num-layers", "30"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(PRESETS)
    late = next(x for x in lines if x.split()[0] == "late8th")
    assert late.endswith(str(placement_layers("late8th", 30))) and "[25, 26, 27, 28, 29]" in late
