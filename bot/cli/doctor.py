"""``chela doctor``: the static checks of ``chela check`` plus live ones, each a line
``OK``/``WARN``/``FAIL`` with what to do about it.

The problems ``chela check`` and ``chela run`` share live in :mod:`bot.cli.validate`;
doctor shows the same ones as FAIL/WARN lines.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from bot.cli.common import add_common, load
from bot.cli.validate import (
    key_problems,
    model_errors,
    tool_warnings,
    validate,
)
from bot.cli.validate import secret_problems as config_problems
from bot.config import Config, config_warnings
from bot.app.channels import CONFIGURED, SPECS
from channels.util import parse_listen

TIMEOUT = 10.0
CHANNELS = CONFIGURED


def config_errors(cfg: Config) -> list[str]:
    """The errors ``chela check`` and ``chela run`` share (kept for old callers)."""
    return validate(cfg).errors


@dataclass
class Finding:
    level: str  # OK | WARN | FAIL
    subject: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.level:<4}  {self.subject}: {self.detail}"
        return text + (f" -- fix: {self.fix}" if self.fix and self.level != "OK" else "")


# ------------------------------------------------------------------------------ static
def static_findings(cfg: Config) -> list[Finding]:
    out = [Finding("OK", "config", str(cfg.source) if cfg.source else "no config file; defaults")]
    if cfg.source is None:
        out[0] = Finding(
            "WARN",
            "config",
            "no config file found; running on defaults",
            "create one with `chela onboard`",
        )
    ws = cfg.agent.workspace
    out.append(
        Finding("OK", "workspace", str(ws))
        if ws.is_dir()
        else Finding(
            "WARN",
            "workspace",
            f"{ws} does not exist",
            "run `chela init` (or `chela run` creates it)",
        )
    )
    out += [Finding("FAIL", "config", problem, fix) for _, problem, fix in config_problems(cfg)]
    out += [
        Finding("FAIL", "model", e, "use a litellm model string: provider/model")
        for e in model_errors(cfg)
    ]
    out += [
        Finding("FAIL" if level == "error" else "WARN", "model key", line)
        for level, line in key_problems(cfg)
    ]
    out += model_path_findings(cfg)
    out += [
        Finding("WARN", "config", w, "only if this is not what you meant")
        for w in config_warnings(cfg) + tool_warnings(cfg)
    ]
    out += state_findings(cfg)
    ex = cfg.tools.exec
    if "exec" in cfg.tools.enabled or "exec" in cfg.tools.guest:
        if ex.sandbox == "on":
            from bot.agent.tools.sandbox import probe

            s = probe()
            out.append(
                Finding("OK", "exec sandbox", s.detail)
                if s.ok
                else Finding("FAIL", "exec sandbox", f"not available: {s.detail}", s.fix)
            )
        else:
            out.append(
                Finding(
                    "WARN",
                    "exec sandbox",
                    "off: commands run unconfined",
                    'set tools.exec.sandbox = "on"',
                )
            )
    if "web_search" in cfg.tools.enabled or "web_search" in cfg.tools.guest:
        from bot.agent.tools.web import search_provider

        provider = search_provider(cfg.tools.web)
        out.append(
            Finding("OK", "web search", f"provider {provider}")
            if provider
            else Finding(
                "WARN",
                "web search",
                f"no provider can work with search_provider = {cfg.tools.web.search_provider!r}; "
                "web_search is not offered",
                "set the provider's key variable (tools.web.*_api_key_env) or tools.web.searxng_url",
            )
        )
    return out


def model_path_findings(cfg: Config) -> list[Finding]:
    """One line per configured model naming the path that serves it."""
    from bot.model.paths import model_paths

    return [
        Finding("OK", "model path", f"{key} = {model}: {path.label}")
        for key, model, path in model_paths(cfg)
    ]


async def check_mcp(cfg: Config) -> list[Finding]:
    """Connect to each configured MCP server once, as `chela mcp list` does."""
    from bot.mcp.client import SDK_MISSING, McpManager, default_log_dir

    mgr = McpManager(cfg.mcp.servers, log_dir=default_log_dir(cfg))
    if not mgr.available:
        return [Finding("FAIL", "mcp", SDK_MISSING, "pip install 'chela[mcp]'")]
    mgr.start()
    try:
        await mgr.settled()
    finally:
        statuses = [
            (s.name, s.state, s.error, len(s.tools)) for s in mgr.statuses()
        ]  # before stop() marks them stopped
        await mgr.stop()
    return [
        Finding("OK", f"mcp {name}", f"connected, {n} tool(s)")
        if state == "connected"
        else Finding(
            "FAIL",
            f"mcp {name}",
            error or state,
            f"see `chela mcp test {name}` and the server log under {default_log_dir(cfg)}",
        )
        for name, state, error, n in statuses
    ]


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None


def state_findings(cfg: Config) -> list[Finding]:
    sd = cfg.agent.state_dir
    mode = _mode(sd)
    if mode is None:
        return [
            Finding(
                "WARN",
                "state dir",
                f"{sd} does not exist yet",
                "it is created (0700) on the first run",
            )
        ]
    out = []
    if mode & 0o077:
        out.append(
            Finding(
                "FAIL",
                "state dir",
                f"{sd} is mode {mode:04o}, readable by others",
                f"chmod 700 {sd}",
            )
        )
    else:
        out.append(Finding("OK", "state dir", f"{sd} is private ({mode:04o})"))
    for f in (cfg.db_path, cfg.http_token_path):
        m = _mode(f)
        if m is None:
            continue
        if m & 0o077:
            out.append(
                Finding(
                    "FAIL",
                    "state file",
                    f"{f} is mode {m:04o}, readable by others",
                    f"chmod 600 {f}",
                )
            )
        else:
            out.append(Finding("OK", "state file", f"{f} is private ({m:04o})"))
    return out


# -------------------------------------------------------------------------------- live
async def check_model(cfg: Config) -> Finding:
    from bot.model import LLMClient, LLMError

    key = cfg.secret(cfg.agent.api_key_env) or ("sk-local" if cfg.agent.api_base else "")
    client = LLMClient(
        cfg.agent.model,
        api_base=cfg.agent.api_base,
        api_key=key,
        timeout=min(cfg.agent.llm_timeout_seconds, 30),
        max_retries=0,
        extra={"max_tokens": 1},
    )
    where = cfg.agent.model + (f" via {cfg.agent.api_base}" if cfg.agent.api_base else "")
    t0 = time.monotonic()
    try:
        await client.complete([{"role": "user", "content": "Reply with one word: ok"}])
    except LLMError as e:
        if cfg.agent.api_base and e.reason == "connection failed":  # a wrong URL, not a hiccup
            return Finding(
                "FAIL",
                "model",
                f"{where}: {cfg.agent.api_base} is not reachable (connection failed)",
                "check agent.api_base (host, port, /v1) and that the server is running",
            )
        fix = (
            f"check agent.model, agent.api_base and the key in ${cfg.agent.api_key_env}"
            if cfg.agent.api_key_env
            else "check agent.model and agent.api_base, or set agent.api_key_env to the variable holding the key"
        )
        return Finding("FAIL", "model", f"{where}: {e}", fix)
    return Finding("OK", "model", f"{where} answered in {(time.monotonic() - t0) * 1000:.0f} ms")


async def check_channel(
    cfg: Config, name: str, account: str = "default", label: str = ""
) -> Finding:
    """The channel account's probe (``label``: how it is named, ``telegram:work``)."""
    import aiohttp

    spec = SPECS.get(name)
    if spec is None or spec.probe is None:
        raise ValueError(name)
    subject = f"channel {label or name}"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as s:
            got = await spec.probe(s, cfg, spec.account_section(cfg, account), account)
    except (TimeoutError, aiohttp.ClientError, OSError) as e:
        return Finding(
            "FAIL",
            subject,
            f"cannot reach the server ({type(e).__name__}: {e})",
            f"check channels.{name}.api_base and the network",
        )
    # a risk the channel carries even when it works is said on the same line, as a warning
    level = "FAIL" if not got.ok else "WARN" if got.warning else "OK"
    detail = f"{got.detail}; {got.warning}" if got.warning else got.detail
    return Finding(level, subject, detail, got.fix)


def check_http_port(cfg: Config, daemon: dict | None) -> Finding:
    listen = cfg.channels.http.listen
    host, port = parse_listen(listen)
    if daemon and daemon.get("http") == listen:
        return Finding(
            "OK", "http port", f"{listen} is held by this Chela daemon (pid {daemon.get('pid')})"
        )
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        fam, _, _, _, addr = infos[0]
        with socket.socket(fam, socket.SOCK_STREAM) as sock:
            sock.bind(addr)
    except OSError as e:
        return Finding(
            "FAIL",
            "http port",
            f"{listen} is not free ({e.strerror or e})",
            "stop what holds it, or change channels.http.listen",
        )
    return Finding("OK", "http port", f"{listen} is free")


async def doctor(cfg: Config, *, live: bool = True) -> list[Finding]:
    from bot.app.channels import enabled_accounts, labels
    from bot.app.lock import running_daemon
    from channels.base import account_key

    out = static_findings(cfg)
    if not live:
        return out
    broken = {key for key, _, _ in config_problems(cfg)}  # telegram, or telegram:work
    rows = [(n, a, account_key(n, a)) for n, a in enabled_accounts(cfg) if SPECS[n].probe]
    named = labels(key for _, _, key in rows)
    probes = [check_channel(cfg, n, a, named[key]) for n, a, key in rows if key not in broken]
    model_failed = any(f.level == "FAIL" and f.subject == "model" for f in out)
    model_live = [] if model_failed else [check_model(cfg)]  # one FAIL line per bad model
    out += await asyncio.gather(*model_live, *probes)
    if cfg.mcp.servers:
        out += await check_mcp(cfg)
    if cfg.mail:  # each [[mail]] account: log in, count the folder
        from bot.triggers.mail import mail_checks

        out += [Finding("OK" if ok else "FAIL", s, d) for ok, s, d in await mail_checks(cfg)]
    if cfg.channels.http.enabled:
        out.append(check_http_port(cfg, running_daemon(cfg.agent.state_dir)))
    if cfg.tools.browser.enabled:  # Chromium found, its version, a page load the proxy refuses
        from bot.agent.tools.browser.probe import probe

        ok, detail = await probe(cfg.tools.browser)
        out.append(Finding("OK" if ok else "FAIL", "browser", detail))
    return out


def run_doctor(cfg: Config) -> int:
    findings = asyncio.run(doctor(cfg))
    for f in findings:
        print(f.line(), flush=True)
    fails = sum(f.level == "FAIL" for f in findings)
    warns = sum(f.level == "WARN" for f in findings)
    print(f"{len(findings)} checks: {fails} failed, {warns} warning(s)")
    return 1 if fails else 0


def add_parser(sub) -> None:
    add_common(
        sub.add_parser(
            "doctor",
            help="check the config plus live checks: model, channel tokens, sandbox, "
            "permissions, HTTP port",
        )
    ).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = load(args)
    logging.getLogger().setLevel(logging.CRITICAL)  # findings only; litellm's own chatter stays out
    return run_doctor(cfg)
