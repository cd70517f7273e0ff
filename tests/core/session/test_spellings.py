"""The command line spellings deny rules read: each program row of the table is reached."""

from __future__ import annotations

import pytest

from acp_proxy.core.session import spellings
from acp_proxy.core.session.spellings import command_variants


@pytest.mark.parametrize("shell", sorted(spellings._SHELLS))
def test_a_shell_runs_its_c_script_as_a_command_line(shell: str) -> None:
    variants = command_variants(f"/bin/{shell} -lc 'sudo  ls /root'")
    assert "sudo ls /root" in variants
    # without a -c option the script is an argument, not a command line
    assert "sudo ls /root" not in command_variants(f"{shell} 'sudo  ls /root'")


@pytest.mark.parametrize("wrapper", sorted(spellings._WRAPPERS))
def test_a_wrapper_runs_the_argv_after_its_options(wrapper: str) -> None:
    variants = command_variants(f"{wrapper} -n 5 FOO=1 /usr/bin/sudo ls")
    assert "sudo ls" in variants
    assert "/usr/bin/sudo ls" in variants


def test_a_program_of_no_row_runs_nothing_more() -> None:
    assert "sudo ls" not in command_variants("cat -c 'sudo ls'")
    assert "sudo ls" not in command_variants("xargs sudo ls")


def test_the_program_rows_are_the_shells_and_the_wrappers() -> None:
    assert set(spellings._INNER) == spellings._SHELLS | spellings._WRAPPERS
    assert not spellings._SHELLS & spellings._WRAPPERS


def test_a_line_continuation_is_read_as_the_shell_removes_it() -> None:
    """``su\\<newline>do ls`` runs ``sudo ls``: :mod:`shlex` alone reads ``su\\ndo``."""
    assert "sudo ls" in command_variants("bash -c 'su\\\ndo ls'")
    assert "sudo ls" in command_variants('bash -c "su\\\ndo ls"')
    assert "sudo ls" not in command_variants("bash -c 'su\ndo ls'")  # a newline alone cuts


def test_an_ansi_c_string_is_read_as_the_shell_decodes_it() -> None:
    """``$'su\\x64o' ls`` runs ``sudo ls``: :mod:`shlex` reads ``$su\\x64o``."""
    assert "sudo ls" in command_variants("bash -c \"$'su\\x64o' ls\"")
    assert "sudo ls" in command_variants("bash -c \"$'\\163udo' ls\"")
    assert "sudo ls" in command_variants("bash -c '$\"sudo\" ls'")
    assert "sudo ls" not in command_variants("bash -c \"$'su\\x65o' ls\"")
