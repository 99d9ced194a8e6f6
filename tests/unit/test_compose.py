"""docker-compose.yml as written: the invariants that can be checked without a Docker engine.

Each check reads the compose file, deploy/Dockerfile, .env.example and the docs' (README.md,
docs/) "Distributed setup" and "Runbook" sections and returns the problems it finds. The
repository's files must have none, and every check must report the fault it exists for
(`test_each_check_catches_its_fault`). `COGMILL_TEST_COMPOSE_DIR=<dir>` runs the checks on
another copy of those files (e.g. an old commit's), so a reviewer can see what they catch there.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest.mock import patch
from urllib.parse import urlsplit

import click
import pytest
import typer
import yaml
from pydantic import ValidationError

from core.settings import Settings

ROOT = Path(os.environ.get("COGMILL_TEST_COMPOSE_DIR") or Path(__file__).resolve().parents[2])
DOCKERFILE = "deploy/Dockerfile"
# Compose interpolation: `$$` is a literal `$`; ${VAR}, ${VAR:-default}, ${VAR:?error}, $VAR.
INTERPOLATION = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_]\w*)(?P<op>:?[-?+])?(?P<arg>[^}]*)\}"
    r"|(?P<bare>[A-Za-z_]\w*))"
)
# COGMILL_AUTH is a mode (required, ...), not a credential.
SECRET_NAME = re.compile(r"PASSWORD|SECRET|API_KEY|TOKEN$|(?<!^COGMILL_)AUTH", re.IGNORECASE)
URL_CREDENTIALS = re.compile(r"[a-z][a-z0-9+.-]*://(?P<user>[^:@/\s]*):(?P<password>[^@/\s]+)@")
# Settings every process needs to work as one distributed deployment.
DISTRIBUTED_SETTINGS = (
    "COGMILL_HOME",
    "COGMILL_BROKER_URL",
    "COGMILL_RESULT_BACKEND",
    "COGMILL_REDIS_URL",
    "COGMILL_NEO4J_URI",
)
REDIS_URL_SETTINGS = ("COGMILL_BROKER_URL", "COGMILL_RESULT_BACKEND", "COGMILL_REDIS_URL")
FLOWER_DEFAULT_PORT = 5555


@dataclass
class Stack:
    """The deployment files as read from disk."""

    compose: dict[str, Any]
    env_example: dict[str, str]
    dockerfile: str
    readme: str

    @property
    def services(self) -> dict[str, dict[str, Any]]:
        return self.compose.get("services") or {}

    def cogmill_services(self) -> dict[str, dict[str, Any]]:
        """The services that run the cogmill image (built from deploy/Dockerfile)."""
        return {
            name: service
            for name, service in self.services.items()
            if isinstance(service.get("build"), dict)
            and service["build"].get("dockerfile") == DOCKERFILE
        }


def read_env_file(text: str) -> dict[str, str]:
    """KEY=value lines of a dotenv file (comments and blank lines skipped)."""
    pairs = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            pairs[key.strip()] = value.strip().strip("'\"")
    return pairs


def documentation(root: Path) -> str:
    """README.md and every page of docs/, each closed by an empty heading so that no section
    runs into the next page: the checks find a section wherever the docs keep it."""
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    return "".join(page.read_text(encoding="utf-8") + "\n## \n" for page in pages)


def load_stack(root: Path = ROOT) -> Stack:
    return Stack(
        compose=yaml.safe_load((root / "docker-compose.yml").read_text(encoding="utf-8")),
        env_example=read_env_file((root / ".env.example").read_text(encoding="utf-8")),
        dockerfile=(root / DOCKERFILE).read_text(encoding="utf-8"),
        readme=documentation(root),
    )


# -- reading the compose file --------------------------------------------------------------------


def strings(node: object) -> Iterator[str]:
    """Every string value in a parsed YAML tree (compose interpolates values, not keys)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)


def variables(text: str) -> set[str]:
    return {
        m.group("braced") or m.group("bare")
        for m in INTERPOLATION.finditer(text)
        if not m.group("escaped")
    }


def interpolate(text: str, env: dict[str, str]) -> str:
    """The value compose would use with these variables (only the syntax the file uses)."""

    def one(m: re.Match[str]) -> str:
        if m.group("escaped"):
            return "$"
        name = m.group("braced") or m.group("bare")
        if name in env and (env[name] or ":" not in (m.group("op") or "")):
            return env[name]
        if (m.group("op") or "").endswith("-"):
            return m.group("arg")
        return ""

    return INTERPOLATION.sub(one, text)


def literal_part(text: str) -> str:
    """The text with every interpolation removed."""
    return INTERPOLATION.sub(lambda m: "$" if m.group("escaped") else "", text)


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # the `- KEY=value` form
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def command(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command") or []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(part) for part in cmd]


def healthcheck_command(service: dict[str, Any]) -> list[str]:
    test = (service.get("healthcheck") or {}).get("test") or []
    if isinstance(test, str):
        return ["CMD-SHELL", test]
    return [str(part) for part in test]


def published_ports(service: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(host ip, host port, container port) of each published port."""
    found = []
    for spec in service.get("ports") or []:
        if isinstance(spec, dict):
            found.append(
                (str(spec.get("host_ip", "")), str(spec.get("published", "")), int(spec["target"]))
            )
            continue
        parts = str(spec).split("/")[0].split(":")
        host_ip = parts[0] if len(parts) == 3 else ""
        host_port = parts[-2] if len(parts) >= 2 else ""
        found.append((host_ip, host_port, int(parts[-1])))
    return found


def flower_services(stack: Stack) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in stack.services.items() if "flower" in command(s)}


def is_worker(service: dict[str, Any]) -> bool:
    return command(service)[:2] == ["cogmill", "worker"]


# -- the command lines: parsed by the real CLIs --------------------------------------------------


# Typer 0.29 carries its own copy of Click: its commands and errors are not Click's classes,
# so commands are walked by duck typing and both kinds of error are caught.
CLI_ERRORS = (click.ClickException, typer.exceptions.TyperException)


def cogmill_cli() -> Any:
    from api.cli import app

    return typer.main.get_command(app)


def celery_cli() -> Any:
    from celery.bin.celery import celery

    return celery


def parse_command_line(group: Any, args: list[str]) -> Any:
    """Parse (not run) a command line down to its leaf command; raises CLI_ERRORS."""
    ctx = group.make_context(group.name or "cli", list(args))
    while hasattr(ctx.command, "resolve_command"):  # a group: descend into the subcommand
        with warnings.catch_warnings():  # Click 8.2 deprecates protected_args
            warnings.simplefilter("ignore", DeprecationWarning)
            protected = getattr(ctx, "_protected_args", None)
            rest = [*(ctx.protected_args if protected is None else protected), *ctx.args]
        if not rest:
            raise click.UsageError(f"{ctx.command_path}: no command given")
        name, sub, rest = ctx.command.resolve_command(ctx, rest)
        assert sub is not None and name is not None
        ctx = sub.make_context(name, rest, parent=ctx)
    return ctx


def flower_options(args: list[str]) -> dict[str, str]:
    """Flower's own options (`--port=5555`), checked against the options Flower defines."""
    from flower.options import options

    found = {}
    for arg in args:
        if not arg.startswith("--"):
            continue
        name, _, value = arg[2:].partition("=")
        if name.replace("_", "-") not in options._options:
            raise click.NoSuchOption(f"--{name}")
        found[name.replace("-", "_")] = value
    return found


def check_command_line(args: list[str]) -> tuple[Any, str | None]:
    """The parsed command line, or None and the reason it does not run."""
    if not args:
        return None, "no command"
    try:
        if args[0] == "cogmill":
            return parse_command_line(cogmill_cli(), args[1:]), None
        if args[0] == "celery":
            ctx = parse_command_line(celery_cli(), args[1:])
            if ctx.info_name == "flower":
                flower_options(list(ctx.params.get("tornado_argv", ())))
            app_module = ctx.find_root().params.get("app")
            if app_module:
                import importlib

                from celery import Celery

                module = importlib.import_module(str(app_module))
                if not isinstance(getattr(module, "app", None), Celery):
                    return None, f"-A {app_module}: the module has no Celery `app`"
            return ctx, None
    except CLI_ERRORS as error:
        message = getattr(error, "format_message", None)
        return None, (message() if message else str(error)) or type(error).__name__
    return None, f"{args[0]!r} is neither `cogmill` nor `celery`"


def listening_port(ctx: Any) -> int | None:
    """The TCP port a parsed server command listens on."""
    if ctx.command_path.endswith("serve"):
        return int(ctx.params["port"])
    if ctx.info_name == "flower":
        port = flower_options(list(ctx.params.get("tornado_argv", ()))).get("port")
        return int(port) if port else FLOWER_DEFAULT_PORT
    return None


# -- the checks ----------------------------------------------------------------------------------


def check_cli_commands(stack: Stack) -> list[str]:
    """Every cogmill service's command (and its CLI healthcheck) parses in the real CLI."""
    problems = []
    for name, service in stack.cogmill_services().items():
        _, error = check_command_line(command(service))
        if error:
            problems.append(f"{name}: command {command(service)} does not parse: {error}")
        health = healthcheck_command(service)
        if health[:1] == ["CMD-SHELL"] and health[1:]:
            shell = shlex.split(health[1])
            if shell[:1] in (["cogmill"], ["celery"]):
                _, error = check_command_line(shell)
                if error:
                    problems.append(f"{name}: healthcheck {health[1]!r} does not parse: {error}")
    return problems


def check_variables_documented(stack: Stack) -> list[str]:
    """Every ${VAR} the compose file interpolates is set in .env.example."""
    used = set().union(*(variables(s) for s in strings(stack.compose)))
    return [
        f"${{{var}}} is used in docker-compose.yml but not set in .env.example"
        for var in sorted(used - set(stack.env_example))
    ]


def check_settings_real(stack: Stack) -> list[str]:
    """Every COGMILL_* set (compose, .env.example) is a Settings field with a valid value."""
    fields = {f"COGMILL_{name.upper()}" for name in Settings.model_fields}
    problems = [
        f".env.example sets {key}, which is no cogmill setting"
        for key in stack.env_example
        if key.startswith("COGMILL_") and key not in fields
    ]
    for name, service in stack.cogmill_services().items():
        env = {k: v for k, v in stack.env_example.items() if k.startswith("COGMILL_")}
        env.update(environment(service))  # compose: `environment` wins over `env_file`
        unknown = sorted(k for k in env if k.startswith("COGMILL_") and k not in fields)
        problems += [f"{name}: {key} is no cogmill setting" for key in unknown]
        values = {k: interpolate(v, stack.env_example) for k, v in env.items() if k in fields}
        try:  # read as the container reads them: from its environment (lists as JSON, ...)
            with patch.dict(os.environ, values, clear=True):
                Settings(_env_file=None)  # type: ignore[call-arg]
        except ValidationError as error:
            problems.append(f"{name}: its settings do not validate: {error}")
    return problems


def check_distributed_settings(stack: Stack) -> list[str]:
    """Every cogmill process sees the same stores, and its home is on a named volume."""
    problems = []
    services = stack.cogmill_services()
    named = set(stack.compose.get("volumes") or {})
    reference: dict[str, str] | None = None
    for name, service in services.items():
        env = environment(service)
        missing = [key for key in DISTRIBUTED_SETTINGS if not env.get(key)]
        if not env.get("COGMILL_QDRANT_URL") and env.get("COGMILL_VECTOR_STORE") != "neo4j":
            missing.append("COGMILL_QDRANT_URL (or COGMILL_VECTOR_STORE=neo4j)")
        if missing:
            problems.append(f"{name}: environment lacks {', '.join(missing)}")
        shared = {k: v for k, v in env.items() if k.startswith("COGMILL_")}
        if reference is None:
            reference = shared
        elif shared != reference:
            problems.append(
                f"{name}: its COGMILL_* environment differs from the other cogmill services' "
                "(merge the shared block with `<<:` instead of replacing it)"
            )
        home = env.get("COGMILL_HOME", "")
        mounts = [str(m).split(":") for m in service.get("volumes") or []]
        if not any(len(m) >= 2 and m[0] in named and m[1] == home for m in mounts):
            problems.append(f"{name}: COGMILL_HOME {home!r} is not a named volume's mount")
    return problems


def check_healthchecks(stack: Stack) -> list[str]:
    """Every (long-running) service has a healthcheck; depends_on waits only on those."""
    problems = []
    for name, service in stack.services.items():
        health = service.get("healthcheck") or {}
        test = healthcheck_command(service)
        if health.get("disable") or not test or test[0] == "NONE" or not any(test[1:]):
            problems.append(f"{name}: no healthcheck")
        depends = service.get("depends_on") or {}
        for other, condition in depends.items() if isinstance(depends, dict) else []:
            if (condition or {}).get("condition") == "service_healthy" and not healthcheck_command(
                stack.services.get(other, {})
            ):
                problems.append(f"{name}: waits for {other} to be healthy; it has no healthcheck")
    return problems


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", text)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def shell_steps(instructions: list[tuple[str, str]]) -> list[list[str]]:
    """The simple commands of every RUN (split at && ; |)."""
    steps = []
    for keyword, rest in instructions:
        if keyword == "RUN":
            for part in re.split(r"&&|\|\||;|\|", rest):
                if part.strip():
                    steps.append(shlex.split(part))
    return steps


def check_volumes_writable(stack: Stack) -> list[str]:
    """The image runs as a dedicated non-root user that owns every named-volume mount path."""
    instructions = dockerfile_instructions(stack.dockerfile)
    users = [rest.split(":")[0] for keyword, rest in instructions if keyword == "USER"]
    user = users[-1] if users else "root"
    if user in ("root", "0"):
        return [f"{DOCKERFILE} runs as root"]
    problems = []
    if user in ("nobody", "65534"):
        problems.append(f"{DOCKERFILE} runs as nobody, which must own nothing; add a user")
    steps = shell_steps(instructions)
    created = {s[-1] for s in steps if s and s[0] in ("useradd", "adduser")}
    if user not in created and user not in ("nobody", "65534"):
        problems.append(f"{DOCKERFILE}: USER {user} is never created (useradd)")
    made = {arg for s in steps if s[:1] == ["mkdir"] for arg in s[1:]}
    owned: dict[str, str] = {}
    for s in steps:
        if s[:1] == ["chown"]:
            args = [a for a in s[1:] if not a.startswith("-")]
            owned.update({path: args[0].split(":")[0] for path in args[1:]})
    named = set(stack.compose.get("volumes") or {})
    for name, service in stack.cogmill_services().items():
        for mount in service.get("volumes") or []:
            source, _, target = str(mount).partition(":")
            target = target.split(":")[0]
            if source not in named:
                continue
            if target not in made or owned.get(target) != user:
                problems.append(
                    f"{name}: volume {source} is mounted on {target}, which {DOCKERFILE} does "
                    f"not create owned by {user}: a fresh named volume stays root-owned and "
                    f"{user} cannot write it (RUN mkdir -p {target} && chown {user} {target})"
                )
    return problems


def check_ports(stack: Stack) -> list[str]:
    """Published ports are the ports the commands listen on, with healthchecks on them too."""
    problems = []
    for name, service in stack.services.items():
        ctx, _ = check_command_line(command(service))
        port = listening_port(ctx) if ctx is not None else None
        ports = published_ports(service)
        if ports and port is None:
            problems.append(f"{name}: publishes {ports} but runs no server of ours on them")
        for _, _, container_port in ports:
            if port is not None and container_port != port:
                problems.append(f"{name}: publishes port {container_port}; it listens on {port}")
        serving = ctx is not None and ctx.command_path.endswith("serve")
        if serving and ports and ctx.params["host"] not in ("0.0.0.0", "::"):
            problems.append(
                f"{name}: serve --host {ctx.params['host']} is unreachable from outside the "
                "container; listen on 0.0.0.0"
            )
        health = " ".join(healthcheck_command(service))
        for checked in re.findall(r"(?:127\.0\.0\.1|localhost):(\d+)", health):
            if port is not None and int(checked) != port:
                problems.append(f"{name}: healthcheck probes port {checked}; it listens on {port}")
    # Flower shows task arguments and can revoke tasks: never on a public interface by default.
    for name, service in flower_services(stack).items():
        ports = published_ports(service)
        if ports and not service.get("profiles"):
            problems.append(f"{name}: published by a plain `docker compose up`; use a profile")
        for host_ip, _, _ in ports:
            if host_ip not in ("127.0.0.1", "::1"):
                problems.append(f"{name}: published on all interfaces; bind it to 127.0.0.1")
    return problems


def is_interpolated_secret(value: str) -> bool:
    """A value made of ${VAR}s, with at most a user name and separator as literal text."""
    return bool(variables(value)) and re.fullmatch(r"[\w.-]*[/:]?", literal_part(value)) is not None


def check_secrets_from_env(stack: Stack) -> list[str]:
    """No literal password in compose; .env.example's secrets are placeholders."""
    problems = []
    for name, service in stack.services.items():
        for key, value in environment(service).items():
            if SECRET_NAME.search(key) and not is_interpolated_secret(value):
                problems.append(f"{name}: {key} is a literal {value!r}; take it from .env")
        args = command(service)
        for flag, value in zip(args, args[1:], strict=False):
            secret_flag = flag.lstrip("-").lower() in ("requirepass", "masterauth", "password")
            if secret_flag and not is_interpolated_secret(value):
                problems.append(f"{name}: {flag} is a literal; take it from .env")
        for arg in args:
            flag, sep, value = arg.partition("=")
            if sep and SECRET_NAME.search(flag) and not is_interpolated_secret(value):
                problems.append(f"{name}: {flag} is a literal; take it from .env")
    for text in strings(stack.compose):
        for m in URL_CREDENTIALS.finditer(text):
            if not re.fullmatch(r"\$\{\w+\}", m.group("password")):
                problems.append(f"the URL {m.group(0)!r} carries a literal password")
    for key, value in stack.env_example.items():
        if SECRET_NAME.search(key) and "change-me" not in value:
            problems.append(
                f".env.example: {key}={value!r} is not an obvious placeholder; use change-me-..."
            )
    return problems


def check_redis_auth(stack: Stack) -> list[str]:
    """Redis requires a password, every cogmill Redis URL carries it, the healthcheck logs in."""
    redis = stack.services.get("redis") or {}
    args = command(redis)
    password = next((v for f, v in zip(args, args[1:], strict=False) if f == "--requirepass"), "")
    if not variables(password):
        return ["redis: no --requirepass ${...} from .env"]
    problems = []
    var = sorted(variables(password))[0]
    health = " ".join(healthcheck_command(redis))
    logs_in = var in variables(environment(redis).get("REDISCLI_AUTH", ""))
    if not (logs_in or " -a " in health or "--pass" in health):
        problems.append("redis: the healthcheck does not log in (set REDISCLI_AUTH or -a)")
    for name, service in stack.cogmill_services().items():
        env = environment(service)
        for key in REDIS_URL_SETTINGS:
            url = urlsplit(env.get(key, ""))
            if url.hostname == "redis" and var not in variables(url.password or ""):
                problems.append(f"{name}: {key} {url.geturl()!r} does not carry ${{{var}}}")
    return problems


def check_redis_durability(stack: Stack) -> list[str]:
    """Redis keeps an AOF, and the docs say which fsync policy compose runs."""
    args = command(stack.services.get("redis") or {})
    option = dict(zip(args, args[1:], strict=False))
    problems = []
    if option.get("--appendonly") != "yes":
        problems.append("redis: --appendonly yes is missing (a restart would lose the queues)")
    fsync = option.get("--appendfsync", "everysec")  # Redis' default
    if f"appendfsync {fsync}" not in readme_section(stack.readme, "Distributed setup"):
        problems.append(f"the docs' Distributed setup does not say Redis runs appendfsync {fsync}")
    return problems


def check_neo4j_auth(stack: Stack) -> list[str]:
    """Neo4j has a password from .env, and cogmill logs in with the same user and password."""
    neo4j = environment(stack.services.get("neo4j") or {})
    auth = neo4j.get("NEO4J_AUTH", "none")
    user, sep, password = auth.partition("/")
    if auth.lower() == "none" or not sep or not variables(password):
        return [f"neo4j: NEO4J_AUTH is {auth!r}; use <user>/${{NEO4J_PASSWORD}} from .env"]
    problems = []
    for name, service in stack.cogmill_services().items():
        env = environment(service)
        if env.get("COGMILL_NEO4J_USER", "neo4j") != user:
            problems.append(f"{name}: COGMILL_NEO4J_USER is not {user!r}")
        if variables(env.get("COGMILL_NEO4J_PASSWORD", "")) != variables(password):
            problems.append(f"{name}: COGMILL_NEO4J_PASSWORD is not {password}")
    return problems


def check_flower(stack: Stack) -> list[str]:
    """Flower asks for a login and has no unauthenticated API."""
    flowers = flower_services(stack)
    if not flowers:
        return []
    problems = []
    if "FLOWER_UNAUTHENTICATED_API" in stack.env_example:
        problems.append(".env.example sets FLOWER_UNAUTHENTICATED_API")
    for name, service in flowers.items():
        env = environment(service)
        args = command(service)
        if "FLOWER_UNAUTHENTICATED_API" in env or any("unauthenticated" in a for a in args):
            problems.append(f"{name}: FLOWER_UNAUTHENTICATED_API opens Flower's API to anyone")
        auth_args = [a for a in args if a.lstrip("-").replace("_", "-").startswith("basic-auth")]
        if not env.get("FLOWER_BASIC_AUTH") and not auth_args:
            problems.append(f"{name}: no basic auth (FLOWER_BASIC_AUTH from .env)")
    return problems


def readme_section(readme: str, title: str) -> str:
    """Every section of the docs with this title, one after the other."""
    found = re.finditer(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    return "".join(match.group(1) for match in found)


# Where a shell line's command ends: a redirection, a pipe, a background or list operator.
SHELL_OPERATORS = re.compile(r"^(\d?>>?|&|\||;|&&|\|\||\d?>&\d)")


def command_words(line: str) -> list[str]:
    """A shell line's command and arguments, without what follows them (`> log 2>&1 &`)."""
    words = shlex.split(line, comments=True)
    end = next((i for i, w in enumerate(words) if SHELL_OPERATORS.match(w)), len(words))
    return words[:end]


def check_readme_workers(stack: Stack) -> list[str]:
    """The docs' worker command lines are the compose workers' (queues and concurrency)."""
    compose_workers = {}
    for service in stack.services.values():
        ctx, _ = check_command_line(command(service))
        if ctx is not None and is_worker(service):
            compose_workers[ctx.params["queues"]] = ctx.params["concurrency"]
    problems = []
    section = readme_section(stack.readme, "Distributed setup")
    for line in re.findall(r"^(cogmill worker .*)$", section, re.M):
        ctx, error = check_command_line(command_words(line))
        if ctx is None:
            problems.append(f"docs: {line!r} does not parse: {error}")
            continue
        queues, concurrency = ctx.params["queues"], ctx.params["concurrency"]
        if compose_workers.get(queues, concurrency) != concurrency:
            problems.append(
                f"the docs run the {queues} worker with --concurrency {concurrency}, "
                f"docker-compose.yml with {compose_workers[queues]}"
            )
    return problems


# Options of `docker compose` itself (before the subcommand) that take a value.
COMPOSE_GLOBAL_VALUE_FLAGS = frozenset(
    {"--profile", "-f", "--file", "-p", "--project-name", "--env-file", "--project-directory"}
)
COMPOSE_VALUE_FLAGS = {"--tail", "--scale", "--profile", "-f", "--file", "-n", "--index"}


def runbook_commands(readme: str) -> list[str]:
    """The `cogmill ...`, `celery ...` and `docker compose ...` commands the Runbook gives."""
    section = readme_section(readme, "Runbook")
    spans = [re.sub(r"\s+", " ", s).strip() for s in re.findall(r"`([^`]+)`", section)]
    return [span for span in spans if re.match(r"(cogmill|celery|docker compose) ", span)]


def check_runbook_commands(stack: Stack) -> list[str]:
    """Every command the Runbook gives exists: CLI commands and options, compose services."""
    commands = runbook_commands(stack.readme)
    if not commands:
        return ["the docs have no Runbook section with commands"]
    problems = []
    for line in commands:
        args = shlex.split(line)
        if args[:2] == ["docker", "compose"]:
            args = args[2:]
            while args and args[0].startswith("-"):  # compose's own options, e.g. --profile
                args = args[2:] if args[0] in COMPOSE_GLOBAL_VALUE_FLAGS else args[1:]
            sub, rest = args[0], args[1:]
            names: list[str] = []
            skip = False
            for arg in rest:
                if skip or arg.startswith("-"):
                    skip = arg in COMPOSE_VALUE_FLAGS
                    continue
                names.append(arg.split("=")[0])
                if sub in ("exec", "run", "cp"):
                    break
            if sub == "cp":
                names = [n.split(":")[0] for n in rest if ":" in n]
            unknown = [n for n in names if n not in stack.services]
            if unknown:
                problems.append(f"Runbook: {line!r} names no compose service {unknown}")
            if sub in ("exec", "run") and names:
                args = rest[rest.index(names[0]) + 1 :]
            else:
                continue
        if args[:1] in (["cogmill"], ["celery"]):
            _, error = check_command_line(args)
            if error:
                problems.append(f"Runbook: {line!r} does not parse: {error}")
    return problems


CHECKS: dict[str, Callable[[Stack], list[str]]] = {
    "cli commands": check_cli_commands,
    "variables documented": check_variables_documented,
    "settings real": check_settings_real,
    "distributed settings": check_distributed_settings,
    "healthchecks": check_healthchecks,
    "volumes writable": check_volumes_writable,
    "ports": check_ports,
    "secrets from env": check_secrets_from_env,
    "redis auth": check_redis_auth,
    "redis durability": check_redis_durability,
    "neo4j auth": check_neo4j_auth,
    "flower": check_flower,
    "readme workers": check_readme_workers,
    "runbook commands": check_runbook_commands,
}


@pytest.fixture(scope="module")
def stack() -> Stack:
    return load_stack()


@pytest.mark.slow
@pytest.mark.parametrize("check", list(CHECKS), ids=list(CHECKS))
def test_compose_holds(stack: Stack, check: str) -> None:
    problems = CHECKS[check](copy.deepcopy(stack))
    assert not problems, "\n".join(problems)


# -- each check catches its fault ----------------------------------------------------------------


def _service(stack: Stack, name: str) -> dict[str, Any]:
    return stack.services[name]


def _set_command(name: str, args: list[str]) -> Callable[[Stack], None]:
    def mutate(stack: Stack) -> None:
        _service(stack, name)["command"] = args

    return mutate


def _set_env(name: str, key: str, value: str | None) -> Callable[[Stack], None]:
    def mutate(stack: Stack) -> None:
        env = dict(environment(_service(stack, name)))
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
        _service(stack, name)["environment"] = env

    return mutate


def _drop_healthcheck(stack: Stack) -> None:
    _service(stack, "worker-llm").pop("healthcheck", None)


def _run_as_nobody(stack: Stack) -> None:
    stack.dockerfile = re.sub(r"^USER .*$", "USER nobody", stack.dockerfile, flags=re.M)


def _chown_elsewhere(stack: Stack) -> None:
    stack.dockerfile = stack.dockerfile.replace("chown cogmill:cogmill /var/lib/cogmill", "true")


def _undocumented_variable(stack: Stack) -> None:
    del stack.env_example["NEO4J_PASSWORD"]


def _flower_published(stack: Stack) -> None:
    flower = _service(stack, "flower")
    flower.pop("profiles", None)
    flower["ports"] = ["5555:5555"]


FAULTS: dict[str, list[Callable[[Stack], None]]] = {
    "cli commands": [
        _set_command("worker-llm", ["cogmill", "worker", "--queue", "llm"]),
        _set_command("api", ["cogmill", "serve", "--port", "99999"]),
        _set_command("flower", ["celery", "-A", "workers.celery_app", "flower", "--prot=5555"]),
    ],
    "variables documented": [_undocumented_variable],
    "settings real": [
        _set_env("api", "COGMILL_NEO4J_PASSWRD", "x"),
        _set_env("worker-llm", "COGMILL_BATCH_SIZE", "many"),
    ],
    "distributed settings": [
        lambda s: _service(s, "flower").__setitem__(
            "environment", {"COGMILL_BROKER_URL": "redis://redis:6379/0"}
        ),
        _set_env("worker-ingest", "COGMILL_HOME", "/tmp/cogmill"),
    ],
    "healthchecks": [_drop_healthcheck],
    "volumes writable": [_run_as_nobody, _chown_elsewhere],
    "ports": [
        lambda s: _service(s, "api").__setitem__("ports", ["8000:8080"]),
        _set_command("api", ["cogmill", "serve", "--port", "8000"]),  # host 127.0.0.1
        _flower_published,
    ],
    "secrets from env": [
        _set_env("neo4j", "NEO4J_AUTH", "neo4j/hunter22"),
        _set_env("api", "COGMILL_REDIS_URL", "redis://:hunter22@redis:6379/0"),
        lambda s: s.env_example.__setitem__("COGMILL_LLM_API_KEY", ""),
    ],
    "redis auth": [
        _set_env("worker-llm", "COGMILL_BROKER_URL", "redis://redis:6379/0"),
        _set_command("redis", ["redis-server", "--appendonly", "yes"]),
    ],
    "redis durability": [
        _set_command("redis", ["redis-server", "--requirepass", "${REDIS_PASSWORD}"]),
        lambda s: setattr(s, "readme", s.readme.replace("appendfsync everysec", "AOF")),
    ],
    "neo4j auth": [
        _set_env("neo4j", "NEO4J_AUTH", "none"),
        _set_env("api", "COGMILL_NEO4J_PASSWORD", "${OTHER_PASSWORD}"),
    ],
    "flower": [
        _set_env("flower", "FLOWER_UNAUTHENTICATED_API", "true"),
        _set_env("flower", "FLOWER_BASIC_AUTH", None),
    ],
    "readme workers": [
        _set_command("worker-llm", ["cogmill", "worker", "--queues", "llm", "--concurrency", "3"])
    ],
    "runbook commands": [
        lambda s: setattr(s, "readme", s.readme.replace("cognify DATASET --all", "cognify --all")),
        lambda s: setattr(s, "readme", s.readme.replace("jobs cancel", "jobs kill")),
        lambda s: setattr(s, "readme", s.readme.replace("restart\n  worker-llm", "restart llm")),
        lambda s: setattr(s, "readme", s.readme.replace("## Runbook", "## Operations")),
    ],
}


def test_every_check_has_faults() -> None:
    assert set(FAULTS) == set(CHECKS)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("check", "fault"),
    [(check, i) for check, faults in FAULTS.items() for i in range(len(faults))],
    ids=[f"{check}-{i}" for check, faults in FAULTS.items() for i in range(len(faults))],
)
def test_each_check_catches_its_fault(stack: Stack, check: str, fault: int) -> None:
    broken = copy.deepcopy(stack)
    FAULTS[check][fault](broken)
    assert CHECKS[check](broken), f"{check} did not notice fault {fault}"
