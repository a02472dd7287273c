"""The ``robot-rl`` commands the docs show, checked against the code (issue 50 item 5): every command line of
docs/*.md and README.md (code blocks and inline code) and of the comments in configs/ names a verb that exists (a
``data`` command, a graph of ``launch``), and its ``key=value`` overrides compose with
:func:`robot_rl.core.composed_config.load_config` (a key renamed or removed in the code fails here). Lines shown as bad
input (followed by ``robot-rl: error:``) are left out; placeholders (``...``, ``<run>``) are not composed."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from robot_rl.cli.main import DATA_COMMANDS, VERBS, _data_key
from robot_rl.core.composed_config import group_options, load_config
from robot_rl.core.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", *sorted((ROOT / "configs").rglob("*.yaml"))]
COMMAND = re.compile(r"(?:^|\$ )(robot-rl [a-z].*)$")  # a command line of a code block (or a shell prompt)
INLINE = re.compile(r"`(robot-rl [a-z][^`]*)`")  # inline code
PLACEHOLDERS = ("...", "<", ">", "{", "$")


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, command) of every ``robot-rl`` command in ``path``: a code block's lines (a line ending in ``\\``
    continued), inline code spans, and in a YAML file its comments' inline code."""
    lines, found, fenced = path.read_text().splitlines(), [], path.suffix != ".md"
    index = 0
    while index < len(lines):
        line, number = lines[index], index + 1
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced and path.suffix == ".md":
            command = COMMAND.search(line.strip())
            if command:
                text = command.group(1)
                while text.endswith("\\") and index + 1 < len(lines):
                    index += 1
                    text = text[:-1] + " " + lines[index].strip()
                following = lines[index + 1].strip() if index + 1 < len(lines) else ""
                if not following.startswith("robot-rl: error:"):  # an example of bad input, shown failing
                    found.append((number, text))
        if not fenced or path.suffix != ".md":
            found += [(number, span) for span in INLINE.findall(line)]
        index += 1
    return found


def problem(command: str) -> str | None:
    """Why the command line ``command`` does not match the code (None: it does)."""
    try:
        tokens = shlex.split(command, comments=True)
    except ValueError as error:
        return f"not a shell line ({error})"
    tokens = tokens[: tokens.index("--ros-args")] if "--ros-args" in tokens else tokens
    tokens = [token.replace("=~/", "=/home/user/") for token in tokens]  # bash expands a tilde after key=
    verb, rest = tokens[1], tokens[2:]
    if verb not in VERBS:
        return f"no verb {verb!r}"
    prefix = []
    if verb in ("data", "launch") and rest and "=" not in rest[0] and not rest[0].startswith("-"):
        name, rest = rest[0], rest[1:]
        if any(p in name for p in PLACEHOLDERS):  # robot-rl launch <graph> key=value ...: a pattern, not a command
            return None
        known = DATA_COMMANDS if verb == "data" else group_options("graph")
        unknown = [each for each in name.split("|") if each not in known]  # sim_train|real_train: either
        if unknown:
            return f"no {'data command' if verb == 'data' else 'graph'} {unknown[0]!r}"
        prefix = [f"graph={name.split('|')[0]}"] if verb == "launch" else []
    overrides = [
        _data_key(token) if verb == "data" else token
        for token in rest
        if "=" in token and not any(p in token for p in PLACEHOLDERS) and not token.startswith("-")
    ]
    try:
        load_config([*prefix, *overrides])
    except ConfigError as error:
        return str(error)
    return None


def documented_commands() -> list[tuple[str, str]]:
    return [(f"{path.relative_to(ROOT)}:{number}", command) for path in SOURCES for number, command in code_lines(path)]


def test_the_docs_show_commands():
    commands = documented_commands()
    assert len(commands) > 100  # the parser finds them (docs/*.md, README.md and configs/ held ~150)
    assert {command.split()[1] for _, command in commands} >= {"train", "launch", "data", "eval", "collect"}


def test_every_documented_command_names_a_verb_and_keys_that_exist():
    commands = documented_commands()
    # each distinct command composed once: 150 lines, 98 distinct (2026-11-30)
    why = {command: problem(command) for command in {command for _, command in commands}}
    stale = [f"{where}: {command}\n    -> {why[command]}" for where, command in commands if why[command]]
    assert not stale, "commands in the docs that the code does not take:\n" + "\n".join(stale)


@pytest.mark.parametrize(
    "command, why",
    [
        ("robot-rl train train.env_stepz=100", "train.env_stepz"),  # a key renamed in the code, not in the docs
        ("robot-rl launch collect_demos +graph.with_sim=true", "graph.with_sim"),  # configs/graph/collect_demos.yaml
        ("robot-rl trian task=reach", "no verb"),
        ("robot-rl launch sim_trian task=reach", "no graph"),
        ("robot-rl data shwo store=x.zarr", "no data command"),
        ("robot-rl train task=reach_it", "reach_it"),
        ("robot-rl launch sim_train|real_trian fleet.robots=[a,b]", "no graph 'real_trian'"),
    ],
)
def test_a_stale_command_is_caught(command, why):
    assert why in (problem(command) or "")


def test_bad_input_examples_and_placeholders_are_not_composed(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```\n$ robot-rl collect task=stack_blocks\nrobot-rl: error: task='stack_blocks' ...\n"
        "robot-rl data merge inputs=[<run>/a.zarr] out=...\n```\nand `robot-rl eval eval.episodes=5`\n"
    )
    assert code_lines(page) == [
        (4, "robot-rl data merge inputs=[<run>/a.zarr] out=..."),
        (6, "robot-rl eval eval.episodes=5"),
    ]
    assert problem("robot-rl data merge inputs=[<run>/a.zarr] out=...") is None
    assert problem("robot-rl launch <graph> key=value ...") is None and problem("robot-rl data ...") is None
    assert problem("robot-rl data import format=lerobot in=~/x out=y.zarr") is None  # the shell's tilde


@pytest.mark.parametrize("group", ["graph", "agent"])
def test_the_help_and_configuration_md_list_every_option_of_a_group(group, capsys):
    """Issue 73 item 7: ``cell`` was missing from the graph lists of ``robot-rl --help``, ``launch --help`` and
    docs/configuration.md, and configuration.md's agent list lacked ``open_loop`` and ``sac_lagrangian``."""
    from robot_rl.cli.main import main

    options = set(group_options(group))
    row = next(
        line
        for line in (ROOT / "docs" / "configuration.md").read_text().splitlines()
        if line.startswith(f"| `{group}` |")
    )
    assert set(re.findall(r"`([a-z_]+)`", row.split("|")[2])) == options, row
    if group == "graph":
        for argv in (["--help"], ["launch", "--help"]):
            main(argv)
            text = " ".join(capsys.readouterr().out.split())
            listed = re.search(r"configs/graph: ([a-z_, ]+)\)", text)
            assert listed and set(listed.group(1).replace(" ", "").split(",")) == options, (argv, text[:500])


def test_a_mistyped_key_is_answered_with_the_key_it_is_most_like(capsys):
    """Issue 73 item 7: a mistyped key got no "did you mean"."""
    with pytest.raises(ConfigError) as refused:
        load_config(["task=reach", "task.succes_radius=0.1"])
    assert "did you mean task.success_radius?" in str(refused.value)
    with pytest.raises(ConfigError) as refused:
        load_config(["zzz.qqq=1"])
    assert "did you mean" not in str(refused.value)
