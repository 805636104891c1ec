"""A channel is one package under ``channels/``, one section class in the config and one row in
the registry (CONTRIBUTING.md, "Add a channel").  The lists that cannot derive from the registry
(import-linter's config, the example config, the tests) are checked here: for every channel
package, section and row, ``missing`` names each step left out.

The checker is tested on a test-only channel (tests/fakes/echo_channel.py): complete, it
passes; with steps left out, each one is named."""

from __future__ import annotations

import configparser
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from bot.app.channels import SPECS, ChannelSpec, Given
from bot.config.channels import ChannelPolicy, ChannelsConfig, HttpConfig
from tests.fakes.echo_channel import ECHO_SPEC, EchoChannel, EchoConfig

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Seen:
    """What the repository says about its channels, read once from the places they are listed."""

    root: Path  # where channels/ and tests/ are
    sections: Mapping[str, type]  # ChannelsConfig's fields: name -> section class
    rows: Mapping[str, ChannelSpec[Any]]  # the registry
    independent: frozenset[str]  # .importlinter: the channel-independence contract's modules
    forbidden: frozenset[str]  # .importlinter: what the core below the app may not import
    example: frozenset[str]  # config.example.toml's [channels.<name>] headers

    def packages(self) -> set[str]:
        """The channel packages (shared modules such as base.py, and __pycache__, are not)."""
        return {p.parent.name for p in (self.root / "channels").glob("*/__init__.py")}


def _section_steps(name: str, seen: Seen) -> list[str]:
    section = seen.sections.get(name)
    if section is None:
        return [f"no section class: add `{name}: <Name>Config` to ChannelsConfig"]
    if not issubclass(section, (ChannelPolicy, HttpConfig)):
        return [f"channels.{name}'s section class does not derive from ChannelPolicy"]
    return []


def _row_steps(name: str, seen: Seen) -> list[str]:
    row = seen.rows.get(name)
    if row is None:
        return [f"no registry row: add ChannelSpec({name!r}, ...) to bot/app/channels.py SPECS"]
    steps = []
    if seen.sections.get(name) not in (None, row.section):
        steps.append(f"the registry row names {row.section.__name__}, not the config's section")
    if row.messaging or issubclass(row.section, ChannelPolicy):
        if row.probe is None:
            steps.append("no doctor probe on its registry row (bot/app/probes.py)")
        if not row.owner_id_hint:
            steps.append("no owner_id_hint on its registry row (what `chela onboard` asks)")
    return steps


def _package_steps(name: str, seen: Seen) -> list[str]:
    pkg = seen.root / "channels" / name
    if not (pkg / "__init__.py").is_file():
        return [f"no package channels/{name}/"]
    if not (pkg / "settings.py").is_file():
        return [f"no channels/{name}/settings.py (the adapter's frozen Settings with open())"]
    return []


def _list_steps(name: str, seen: Seen) -> list[str]:
    module = f"channels.{name}"
    steps = []
    if module not in seen.independent:
        steps.append(f"{module} not in .importlinter's channel-independence contract")
    if module not in seen.forbidden:
        steps.append(f"{module} not in .importlinter's core-names-no-platform forbidden_modules")
    if name not in seen.example:
        steps.append(f"no [channels.{name}] section in config.example.toml")
    return steps


def _test_steps(name: str, seen: Seen) -> list[str]:
    steps = []
    if not (seen.root / "tests" / "e2e" / f"test_e2e_{name}.py").is_file():
        steps.append(f"no end-to-end test tests/e2e/test_e2e_{name}.py")
    section = seen.sections.get(name)
    chat = section is None or issubclass(section, ChannelPolicy)  # only the HTTP API is not
    if chat and not (seen.root / "tests" / "fakes" / f"{name}.py").is_file():
        steps.append(f"no wire fake tests/fakes/{name}.py (its platform's server on 127.0.0.1)")
    return steps


def missing(name: str, seen: Seen) -> list[str]:
    """Each step channel ``name`` still lacks, in words that say what to add where."""
    return [
        *_package_steps(name, seen),
        *_section_steps(name, seen),
        *_row_steps(name, seen),
        *_list_steps(name, seen),
        *_test_steps(name, seen),
    ]


def _lines(value: str) -> frozenset[str]:
    return frozenset(line.strip() for line in value.splitlines() if line.strip())


def read_repo(root: Path = ROOT) -> Seen:
    linter = configparser.ConfigParser()
    linter.read(root / ".importlinter", encoding="utf-8")
    example = (root / "config.example.toml").read_text(encoding="utf-8")
    return Seen(
        root=root,
        sections={n: f.annotation for n, f in ChannelsConfig.model_fields.items() if f.annotation},
        rows=SPECS,
        independent=_lines(linter["importlinter:contract:channel-independence"]["modules"]),
        forbidden=_lines(
            linter["importlinter:contract:core-names-no-platform"]["forbidden_modules"]
        ),
        example=frozenset(re.findall(r"^\[channels\.(\w+)\]", example, re.MULTILINE)),
    )


# ------------------------------------------------------------------------- the repository
def test_every_channel_has_every_step():
    seen = read_repo()
    names = seen.packages() | set(seen.sections) | set(seen.rows)
    assert names >= {"telegram", "http"}  # the tree was read
    assert {n: steps for n in sorted(names) if (steps := missing(n, seen))} == {}


def test_the_registry_follows_the_config_order():
    """The channel names, titles and targets derive from the config's sections; the registry
    has one row per section, in the same order (so every listing agrees)."""
    assert list(SPECS) == list(ChannelsConfig.model_fields)


# ------------------------------------------------------------------------- the checker itself
def _echo_tree(root: Path, *, package: bool = True, tests: bool = True) -> None:
    if package:
        (root / "channels" / "echo").mkdir(parents=True)
        (root / "channels" / "echo" / "__init__.py").write_text("")
        (root / "channels" / "echo" / "settings.py").write_text("")
    if tests:
        for rel in ("tests/e2e/test_e2e_echo.py", "tests/fakes/echo.py"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text("")


def _with_echo(seen: Seen, root: Path) -> Seen:
    """The repository as it would be with the echo channel added completely."""
    return replace(
        seen,
        root=root,
        sections={**seen.sections, "echo": EchoConfig},
        rows={**seen.rows, "echo": ECHO_SPEC},
        independent=seen.independent | {"channels.echo"},
        forbidden=seen.forbidden | {"channels.echo"},
        example=seen.example | {"echo"},
    )


def test_a_complete_test_only_channel_passes(tmp_path):
    _echo_tree(tmp_path)
    assert missing("echo", _with_echo(read_repo(), tmp_path)) == []


def test_a_bare_package_is_told_every_step(tmp_path):
    _echo_tree(tmp_path, tests=False)
    bare = replace(read_repo(), root=tmp_path)
    assert bare.packages() == {"echo"}
    assert missing("echo", bare) == [
        "no section class: add `echo: <Name>Config` to ChannelsConfig",
        "no registry row: add ChannelSpec('echo', ...) to bot/app/channels.py SPECS",
        "channels.echo not in .importlinter's channel-independence contract",
        "channels.echo not in .importlinter's core-names-no-platform forbidden_modules",
        "no [channels.echo] section in config.example.toml",
        "no end-to-end test tests/e2e/test_e2e_echo.py",
        "no wire fake tests/fakes/echo.py (its platform's server on 127.0.0.1)",
    ]


@pytest.mark.parametrize(
    ("left_out", "named"),
    [
        ({"package": False}, "no package channels/echo/"),
        ({"tests": False}, "no end-to-end test tests/e2e/test_e2e_echo.py"),
        ({"tests": False}, "no wire fake tests/fakes/echo.py"),
        ({"independent": frozenset()}, "not in .importlinter's channel-independence"),
        ({"forbidden": frozenset()}, "not in .importlinter's core-names-no-platform"),
        ({"example": frozenset()}, "no [channels.echo] section in config.example.toml"),
        ({"rows": {}}, "no registry row"),
        ({"row": replace(ECHO_SPEC, probe=None)}, "no doctor probe"),
        ({"row": replace(ECHO_SPEC, owner_id_hint="")}, "no owner_id_hint"),
        ({"row": replace(ECHO_SPEC, section=ChannelPolicy)}, "names ChannelPolicy, not"),
    ],
)
def test_each_step_left_out_is_named(tmp_path, left_out, named):
    left_out = dict(left_out)
    files = {k: left_out.pop(k) for k in ("package", "tests") if k in left_out}
    _echo_tree(tmp_path, **files)
    seen = _with_echo(read_repo(), tmp_path)
    if "row" in left_out:
        left_out = {"rows": {**seen.rows, "echo": left_out.pop("row")}}
    steps = missing("echo", replace(seen, **left_out))
    assert any(named in step for step in steps), steps


def test_a_settings_module_is_a_step(tmp_path):
    _echo_tree(tmp_path)
    (tmp_path / "channels" / "echo" / "settings.py").unlink()
    steps = missing("echo", _with_echo(read_repo(), tmp_path))
    assert steps == ["no channels/echo/settings.py (the adapter's frozen Settings with open())"]


# ------------------------------------------------------------------------- the typed hand-off
def test_the_test_only_channel_is_built_through_its_row(tmp_path):
    """The row's typed function takes the section and the secrets to the adapter's Settings,
    whose open() is the adapter the row names."""
    given = Given(
        cfg=None,  # type: ignore[arg-type]  # the echo row reads no other section
        section=EchoConfig(enabled=True, greeting="hi"),
        secrets={"token_env": "t0k"},
        media_dir=tmp_path,
    )
    channel = ECHO_SPEC.make_settings(given).open()
    assert type(channel) is ECHO_SPEC.adapter_class() is EchoChannel
    assert (channel.token, channel.greeting, channel.media_dir) == ("t0k", "hi", tmp_path)
