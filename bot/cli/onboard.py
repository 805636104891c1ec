"""``chela onboard``: ask a few questions (or take flags), write ``config.toml`` and the
workspace, check that the model answers, and say what to do next.

The questions are asked with prompt_toolkit (line editing, defaults pre-filled); with
``--non-interactive`` every answer comes from a flag or its default.  The generated TOML
is validated with the same parser ``chela check`` and ``chela run`` use before it is
written, so onboarding can never leave a config the daemon refuses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tomllib
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from bot.cli.answers import (
    CHANNELS,
    ID_HINTS,
    TOKEN_VARS,
    Answers,
    answers_from_file,
)
from bot.app.channels import SPECS
from bot.config import ConfigError, parse_config
from bot.config.providers import key_var
from bot.cli.validate import model_errors, model_problem

__all__ = ["Answers"]


def default_config_path() -> Path:
    env = os.environ.get("CHELA_CONFIG")
    return Path(env).expanduser() if env else Path("~/.chela/config.toml").expanduser()


def _v(value) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string or list is valid TOML


def render(a: Answers) -> str:
    """The config as TOML text, with short comments."""
    out = [
        "# Chela configuration, written by `chela onboard`. Every key is explained in",
        "# config.example.toml (`chela init --write-examples DIR` writes a copy).",
        "# Secrets never go here: each *_env key names an environment variable.",
        "",
        "[agent]",
        f"workspace = {_v(a.workspace)}",
        f"state_dir = {_v(a.state_dir)}",
        f"model = {_v(a.model)}",
    ]
    out.append(
        f"api_base = {_v(a.api_base)}"
        + ("   # a local OpenAI-compatible server" if a.api_base else "")
    )
    out.append(
        f"api_key_env = {_v(a.api_key_env)}"
        + ("   # the variable holding the key" if a.api_key_env else "")
    )
    out.append(f"timezone = {_v(a.timezone)}   # IANA zone; empty = this machine's")
    for name in CHANNELS:
        if name not in a.channels:
            continue
        out += ["", f"[channels.{name}]", "enabled = true"]
        for key, env in a.tokens.get(name, {}).items():
            out.append(f"{key} = {_v(env)}")
        for st in SPECS[name].settings:
            value = a.setting(name, st.key)
            if value or st.always:
                out.append(f"{st.key} = {_v(value)}")
        if name != "http":
            ids = a.owners.get(name, [])
            out.append(f"allow_from = {_v(ids)}   # the owner's ids; everyone else must be paired")
    return "\n".join(out) + "\n"


def validate(text: str, path: Path) -> None:
    """Raise ConfigError when the text is not a config Chela accepts, or names a model
    string ``chela check`` refuses (checked before anything is written)."""
    cfg = parse_config(tomllib.loads(text), path)
    problems = model_errors(cfg)
    if problems:
        raise ConfigError("; ".join(problems))


# ------------------------------------------------------------------------------ flags
def _channels_from(flags: list[str] | None) -> list[str]:
    """``--channel a --channel b,c`` → the named channels in order, once each."""
    chans: list[str] = []
    for item in flags or []:
        for part in item.split(","):
            name = part.strip().lower()
            if name and name not in chans:
                if name not in CHANNELS:
                    raise ConfigError(
                        f"--channel {name}: unknown channel (choose from {', '.join(CHANNELS)})"
                    )
                chans.append(name)
    return chans


def _owners_from(flags: list[str] | None, channels: list[str]) -> dict[str, list[str]]:
    """``--owner CHANNEL:ID`` (repeatable) → channel -> ids, each on an enabled channel."""
    owners: dict[str, list[str]] = {}
    for item in flags or []:
        name, sep, ident = item.partition(":")
        name = name.strip().lower()
        if not sep or name not in ID_HINTS or not ident.strip():
            raise ConfigError(f"--owner {item!r}: use CHANNEL:ID, e.g. --owner telegram:123456789")
        owners.setdefault(name, []).append(ident.strip())
        if name not in channels:
            raise ConfigError(
                f"--owner {item!r}: channel {name} is not enabled (add --channel {name})"
            )
    return owners


def from_args(args, base: Answers | None = None) -> Answers:
    """The answers the flags give, over ``base`` (an existing config's, when re-running)."""
    a = base or Answers()
    a.model = args.model or a.model
    a.api_base = args.api_base or a.api_base
    if args.api_key_env is not None:
        a.api_key_env = args.api_key_env
    elif base is None or args.model or args.api_base:
        a.api_key_env = key_var(a.model, a.api_base)
    a.workspace = args.workspace or a.workspace
    a.state_dir = args.state_dir or a.state_dir
    a.timezone = args.timezone or a.timezone
    if base is None or args.channel:
        a.channels = _channels_from(args.channel)
    chans = a.channels
    for name in chans:
        if name in TOKEN_VARS:  # --<channel>-<key>: --slack-bot-token-env is bot_token_env
            had = a.tokens.get(name, {})
            a.tokens[name] = {
                k: getattr(args, f"{name}_{k}", None) or had.get(k) or d
                for k, d in TOKEN_VARS[name].items()
            }
    if base is None or args.owner:
        a.owners = _owners_from(args.owner, chans)
    for name in SPECS:  # the channels may still be picked by the questions
        _settings_from(args, a, name, enabled=name in chans)
    return a


def _settings_from(args, a: Answers, name: str, *, enabled: bool) -> None:
    """A channel's descriptor settings from their flags (over ``a``'s); one an enabled
    channel needs and does not have is an error naming the flag."""
    for st in SPECS[name].settings:
        value = getattr(args, st.flag, None) or a.setting(name, st.key)
        a.settings.setdefault(name, {})[st.key] = value
        if enabled and st.needed and not value:
            flag = "--" + st.flag.replace("_", "-")
            raise ConfigError(f"--channel {name} needs {flag} ({st.needed})")


# ------------------------------------------------------------------------ interactive
def _q(text: str, default: str = "", refuse: Callable[[str], str] | None = None) -> str:
    """One question, answered by a line.  ``refuse`` says why an answer is refused ("" to
    take it); a refused answer is said so and asked again on an empty line (a new session
    each time: nothing of the refused text is left to type over)."""
    from prompt_toolkit import PromptSession

    while True:
        s: PromptSession = PromptSession()
        answer = s.prompt(f"{text}: ", default=default).strip()
        why = refuse(answer) if refuse is not None else ""
        if not why:
            return answer
        print(f"  {why}")
        default = ""


def _replace(path: Path) -> bool:
    """Whether to replace an existing config: a line, y or n, like every other question."""
    answer = _q(
        f"{path} exists. Replace it? Its answers become the suggestions (y/n)",
        refuse=lambda t: "" if t.lower() in ("y", "yes", "n", "no") else "answer y or n",
    )
    return answer.lower() in ("y", "yes")


def _model_refusal(answer: str, a: Answers) -> str:
    """Why the model answer (empty: the suggestion) cannot be routed, "" when it can."""
    model = answer or a.model
    problem = model_problem(model, a.api_base)
    return f"{model!r}: {problem}" if problem else ""


def _ask_model(a: Answers, key_given: bool) -> None:
    before = (a.model, a.api_base)
    a.model = (
        _q(
            "Model (any litellm model string, e.g. openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest)",
            a.model,
            refuse=lambda t: _model_refusal(t, a),
        )
        or a.model
    )
    a.api_base = _q(
        "Local OpenAI-compatible server URL (empty to use the provider's own API)", a.api_base
    )
    if not key_given and (a.model, a.api_base) != before:
        a.api_key_env = key_var(a.model, a.api_base)
    a.api_key_env = _q(
        "Name of the environment variable holding the API key (empty for none)", a.api_key_env
    )


def _ask_channel(a: Answers, name: str) -> None:
    if name in TOKEN_VARS:
        had = a.tokens.get(name, {})
        a.tokens[name] = {
            k: _q(
                f"{name}: environment variable for {k.removesuffix('_env').replace('_', ' ')}",
                had.get(k, d),
            )
            or d
            for k, d in TOKEN_VARS[name].items()
        }
    for st in SPECS[name].settings:
        if st.question:
            a.settings.setdefault(name, {})[st.key] = _q(
                f"{name}: {st.question}", a.setting(name, st.key)
            )
            for value, note in st.notes:  # a choice with a risk is told at once
                if a.setting(name, st.key) == value:
                    print(f"  {note}")
    if name in ID_HINTS:
        ident = _q(
            f"{name}: {ID_HINTS[name]} (empty: message the bot and approve the pairing code)",
            ",".join(a.owners.get(name, [])),
            refuse=lambda t: (
                "an id, not a @username (the pairing reply shows your id)"
                if t.startswith("@")
                else ""
            ),
        )
        a.owners[name] = [i.strip() for i in ident.split(",") if i.strip()]


def ask(a: Answers, path: Path, key_given: bool = False) -> Answers:
    print(f"Setting up Chela. The answers go to {path}; Enter keeps the suggestion.\n")
    _ask_model(a, key_given)
    picked = _q(
        f"Channels to enable, comma separated ({', '.join(CHANNELS)}; "
        "empty for none: `chela chat` always works)",
        ",".join(a.channels),
        refuse=lambda t: (
            ""
            if all(n.strip().lower() in CHANNELS for n in t.split(",") if n.strip())
            else f"choose from: {', '.join(CHANNELS)}"
        ),
    )
    a.channels = [n.strip().lower() for n in picked.split(",") if n.strip()]
    for name in a.channels:
        _ask_channel(a, name)
    a.workspace = (
        _q("Workspace directory (your assistant's Markdown files)", a.workspace) or a.workspace
    )
    return a


# ------------------------------------------------------------------------------ parser
def add_parser(sub) -> None:
    sp = sub.add_parser(
        "onboard", help="set up: write config.toml and the workspace, check the model"
    )
    sp.add_argument(
        "--config",
        metavar="PATH",
        help="where to write the config (default: $CHELA_CONFIG, else ~/.chela/config.toml)",
    )
    sp.add_argument(
        "--non-interactive",
        action="store_true",
        help="ask nothing: take every answer from the flags",
    )
    sp.add_argument(
        "--force",
        action="store_true",
        help="with --non-interactive: replace an existing config file",
    )
    sp.add_argument(
        "--model", metavar="MODEL", help="litellm model string (default: openai/gpt-4o-mini)"
    )
    sp.add_argument(
        "--api-base",
        metavar="URL",
        help="a local OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1",
    )
    sp.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the model's API key (default: the provider's usual one; "
        "none with --api-base)",
    )
    _add_channel_flags(sp)
    sp.add_argument(
        "--workspace", metavar="DIR", help="workspace directory (default ~/.chela/workspace)"
    )
    sp.add_argument("--state-dir", metavar="DIR", help="state directory (default ~/.chela)")
    sp.add_argument("--timezone", metavar="ZONE", help="IANA time zone (default: this machine's)")
    sp.add_argument(
        "--skip-model-check", action="store_true", help="do not send the one-token test request"
    )
    sp.set_defaults(func=run)


def _add_channel_flags(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--channel",
        action="append",
        metavar="NAME",
        help=f"enable a channel: {', '.join(CHANNELS[:-1])} or {CHANNELS[-1]} "
        "(repeat, or comma separated)",
    )
    for name, spec in SPECS.items():  # each channel's secrets and settings, from its row
        for key, env in TOKEN_VARS.get(name, {}).items():
            what = key.removesuffix("_env").replace("_", " ")
            sp.add_argument(
                f"--{name}-{key.replace('_', '-')}",
                metavar="VAR",
                help=f"variable with the {spec.title} {what} (default {env})",
            )
        for st in spec.settings:
            flag = "--" + st.flag.replace("_", "-")
            sp.add_argument(flag, metavar=st.key.upper(), help=st.flag_help(name))
    sp.add_argument(
        "--owner",
        action="append",
        metavar="CHANNEL:ID",
        help="your own user id on a channel, e.g. telegram:123456789 (repeatable)",
    )


# ----------------------------------------------------------------------------- command
def _check_model(path: Path) -> tuple[bool, str]:
    from bot.config import load_config
    from bot.cli.doctor import check_model

    f = asyncio.run(check_model(load_config(str(path))))
    return f.level == "OK", f.line()


def _flag(path: Path) -> str:
    """`` --config PATH`` unless the commands find the config there anyway."""
    if path == Path("~/.chela/config.toml").expanduser() or os.environ.get("CHELA_CONFIG"):
        return ""
    return f" --config {path}"


def notes(a: Answers) -> list[str]:
    """What the chosen settings call for saying (a risk, the step it needs)."""
    return [
        note
        for name in a.channels
        for st in SPECS[name].settings
        for value, note in st.notes
        if a.setting(name, st.key) == value
    ]


def next_steps(a: Answers, path: Path, model_ok: bool = True) -> list[str]:
    flag = _flag(path)
    lines = [f"  {note}" for note in notes(a)]
    envs = ([a.api_key_env] if a.api_key_env else []) + [
        e for t in a.tokens.values() for e in t.values()
    ]
    unset = [e for e in envs if not os.environ.get(e)]
    if unset:
        lines.append("Set the secrets (in your shell, or an EnvironmentFile for systemd):")
        lines += [f"  export {e}=..." for e in unset]
    lines.append(f"  chela doctor{flag}    # live checks: model, channel tokens, sandbox")
    if not model_ok:
        return lines
    lines += [
        f"  chela chat{flag}      # talk to it here in the terminal",
        f"  chela run{flag}       # start the daemon with every enabled channel",
    ]
    return lines


def run(args: argparse.Namespace) -> int:
    logging.getLogger().setLevel(logging.CRITICAL)
    return run_onboard(args)


def run_onboard(args) -> int:
    path = Path(args.config).expanduser() if args.config else default_config_path()
    interactive = not args.non_interactive
    if interactive and not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(
            "chela: onboard asks questions on a terminal; in scripts use --non-interactive with flags "
            "(see `chela onboard --help`)",
            file=sys.stderr,
        )
        return 2
    try:
        if path.exists() and not interactive and not args.force:
            print(
                f"chela: {path} exists; not overwriting it (use --force to replace it)",
                file=sys.stderr,
            )
            return 1
        base = None
        if interactive and path.exists():
            if not _replace(path):
                print("Left it as it was; nothing written.")
                return 1
            base = answers_from_file(path)
        answers = from_args(args, base)
        if interactive:
            answers = ask(answers, path, key_given=args.api_key_env is not None)
        text = render(answers)
        validate(text, path)
    except ConfigError as e:
        print(f"chela: {e}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, EOFError):
        print("\nCancelled; nothing written.")
        return 130
    from bot.fs import write_private
    from bot.prompt.init import init_workspace

    write_private(path, text.encode())
    print(f"wrote {path}")
    ws = Path(os.path.expandvars(answers.workspace)).expanduser()
    created = init_workspace(ws)
    print(
        f"workspace {ws}: "
        + (f"created {len(created)} starter file(s)" if created else "already there, left as is")
    )
    ok = True
    if args.skip_model_check:
        print("model check skipped (--skip-model-check)")
    else:
        print("checking that the model answers (one short request)...", flush=True)
        ok, line = _check_model(path)
        print(line)
    if not ok:  # no "Next: chela chat" that cannot work yet
        print("\nThe config is written; fix the model, then check again:")
        print("\n".join(next_steps(answers, path, model_ok=False)))
        return 1
    print("\nNext:")
    print("\n".join(next_steps(answers, path)))
    return 0


def write_examples(dest: Path) -> list[Path]:
    """Copy the packaged config.example.toml and systemd units into ``dest`` (never overwrites)."""
    data = resources.files("bot") / "data"
    written = []
    for rel in ("config.example.toml", "systemd/chela.service", "systemd/chela.user.service"):
        target = dest / rel
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((data / rel).read_bytes())
        written.append(target)
    return written
