"""``chela completion bash|zsh``: a shell completion script for the subcommands and their
options, generated from the parser itself (so it never lags behind a new option)."""

from __future__ import annotations

import argparse

_BASH = """# chela completion for bash: eval "$(chela completion bash)" (e.g. in ~/.bashrc)
_chela() {
    local cur="${COMP_WORDS[COMP_CWORD]}" cmd="" w skip=""
    for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
        if [ -n "$skip" ]; then skip=""; continue; fi
        case "$w" in --config) skip=1 ;; -*) ;; *) cmd="$w"; break ;; esac
    done
    local words
    case "$cmd" in
%(cases)s
        *) words="%(top)s" ;;
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _chela chela
"""

_ZSH_HEAD = """# chela completion for zsh: eval "$(chela completion zsh)" (e.g. in ~/.zshrc)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
"""


def add_parser(sub) -> None:
    sp = sub.add_parser("completion", help="print a shell completion script (bash or zsh)")
    sp.add_argument("shell", choices=["bash", "zsh"], help="the shell to complete for")
    sp.set_defaults(func=run)


def _options(p: argparse.ArgumentParser) -> list[str]:
    return [o for a in p._actions for o in a.option_strings if o.startswith("--")]


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    cases = []
    for name, sp in sub.choices.items():
        words = [
            *(c for a in sp._actions if a.choices and not a.option_strings for c in a.choices),
            *_options(sp),
        ]
        cases.append(f'        {name}) words="{" ".join(str(w) for w in words)}" ;;')
    top = " ".join([*sub.choices, *_options(parser)])
    bash = _BASH % {"cases": "\n".join(cases), "top": top}
    return bash if shell == "bash" else _ZSH_HEAD + bash


def run(args: argparse.Namespace) -> int:
    print(script(args.parser, args.shell), end="")
    return 0
