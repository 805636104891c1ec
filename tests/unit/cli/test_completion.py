"""`chela completion bash|zsh`: the script completes subcommands and their options."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from bot.cli import main


def _script(shell: str, capsys) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


@pytest.mark.skipif(not shutil.which("bash"), reason="no bash")
@pytest.mark.parametrize(
    ("words", "want"),
    [
        (["chela", "che"], ["check"]),
        (["chela", "--config", "x.toml", "ch"], ["chat", "check"]),
        (["chela", "logs", "--l"], ["--level", "--lines"]),
        (["chela", "completion", ""], ["--help", "bash", "zsh"]),
    ],
)
def test_bash_completes_commands_and_options(capsys, words, want):
    script = _script("bash", capsys)
    quoted = " ".join(f'"{w}"' for w in words)
    probe = f'{script}\nCOMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _chela; echo "${{COMPREPLY[@]}}"'
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    assert sorted(out.stdout.split()) == want


def test_zsh_uses_the_same_completion_through_bashcompinit(capsys):
    script = _script("zsh", capsys)
    assert "bashcompinit" in script and "complete -o default -F _chela chela" in script
    if shutil.which("zsh"):
        subprocess.run(["zsh", "-n", "-c", script], check=True)
