"""The fast lane (issue 29): the common command lines read without argparse, as argparse
reads them; everything else is left to argparse."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_proxy import cli
from acp_proxy.errors import UsageError
from acp_proxy.shell.fast_lane import DEFAULTS, read_options

#: tokens the forms are made of: the lane's options, other options, values, and the
#: values argparse reads differently (a leading ``-``, empty, an abbreviation)
TOKENS = [
    "--config",
    "--log-level",
    "--log-file",
    "--config=a.toml",
    "--config=x=y",
    "--log-level=info",
    "--log-level=debug",
    "--log-level=",
    "--log-file=p.log",
    "--log-file=",
    "info",
    "warning",
    "bogus",
    "a.toml",
    "x=y",
    "c d.toml",
    "-",
    "-x",
    "-1",
    "",
    "--log-l",
    "--conf",
    "--trace",
    "--sandbox",
    "--help",
    "-h",
]


def _argparse(opts: list[str]) -> dict[str, object]:
    args, extra = cli._parser().parse_known_args(opts)
    assert extra == []
    return vars(args)


def test_the_defaults_are_the_parsers() -> None:
    """Every option of the parser, with argparse's default: a new option must be added."""
    assert _argparse([]) == DEFAULTS


@pytest.mark.parametrize(
    "opts",
    [
        [],
        ["--log-level", "info"],
        ["--log-level=debug"],
        ["--config", "a.toml"],
        ["--config=a.toml", "--log-level", "error"],
        ["--log-file", "p.log", "--log-level=warning"],
        ["--log-level", "info", "--log-level", "debug"],
        ["--config", "x=y"],
        ["--config=x=y"],
        ["--config", "c d.toml"],
    ],
)
def test_the_lane_reads_the_common_forms_as_argparse(opts: list[str]) -> None:
    """Each common form is read here, to the same options as argparse's."""
    lane = read_options(opts)
    assert lane is not None
    assert vars(lane) == _argparse(opts)


@pytest.mark.parametrize(
    "opts",
    [
        ["--log-l", "info"],  # an abbreviation
        ["--log-level", "bogus"],
        ["--log-level="],
        ["--log-file", "-x"],
        ["--log-file="],
        ["--config"],
        ["--help"],
        ["--version"],
        ["--trace", "t.jsonl"],
        ["--sandbox"],
        ["python", "agent.py"],  # the agent command without --
    ],
)
def test_anything_else_is_left_to_argparse(opts: list[str]) -> None:
    """A form the lane does not read exactly gives ``None``: argparse reads it (and
    answers its errors and help)."""
    assert read_options(opts) is None


@given(st.lists(st.sampled_from(TOKENS), max_size=6))
def test_whatever_the_lane_accepts_argparse_reads_the_same(opts: list[str]) -> None:
    """On any command line the lane reads, argparse gives the same options and no error."""
    lane = read_options(opts)
    if lane is not None:
        assert vars(lane) == _argparse(opts)


def test_a_log_level_argparse_refuses_is_still_refused() -> None:
    """``--log-level bogus`` goes to argparse, whose error is exit status 2."""
    with pytest.raises(UsageError, match="invalid choice"):
        cli._parser().parse_known_args(["--log-level", "bogus"])
    assert cli.main(["--log-level", "bogus", "--", "true"]) == 2


def test_version_alone_prints_what_argparse_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """``--version`` is answered without the parser, with the parser's line."""
    assert cli.main(["--version"]) == 0
    fast = capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        cli._parser().parse_args(["--version"])
    assert stop.value.code == 0
    assert fast == capsys.readouterr().out == f"acp-proxy {cli.__version__}\n"


@pytest.mark.parametrize("opts", [["--audit", "a.jsonl"], ["--a", "a.jsonl"], ["--log-l", "info"]])
def test_an_abbreviated_option_is_refused_not_read_as_the_option(opts: list[str]) -> None:
    """argparse's prefix matching is off: ``--audit`` is not ``--audit-log`` (a saved
    editor command line must not change meaning when an option is added)."""
    assert read_options(opts) is None  # not a form of the fast lane: argparse decides
    with pytest.raises(UsageError, match="unrecognized arguments"):
        cli._parser().parse_args(opts)
