"""The error table: how an exception that reaches the command line becomes one ``Error: ...`` line.

| raised | becomes |
| --- | --- |
| :class:`~persistbench.core.errors.UsageError` | a usage error (exit 2, with the command's usage) |
| :class:`~persistbench.core.errors.PersistbenchError` | its message (exit 1) |
| ``OSError`` | the path and the system's reason (a read-only or missing output, a file where a folder should be) |
| an HTTP client's connection error (httpx, requests, urllib3, huggingface_hub) | ``host:port: network unreachable (...)`` |

Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import traceback

import click

from persistbench.core.errors import (
    ForeignError,
    Interrupted,
    PersistbenchError,
    UsageError,
    debugging,
    os_error_line,
)


def network_error(e: BaseException) -> bool:
    """An HTTP client's connection error (httpx, requests, urllib3): the network, not a bug."""
    names = {c.__name__ for c in type(e).__mro__}
    return type(e).__module__.startswith(("httpx", "requests", "urllib3", "huggingface_hub")) and bool(
        names & {"ConnectError", "ConnectionError", "ConnectTimeout", "TimeoutException", "NetworkError", "ProxyError"}
    )


def host_of(e: BaseException) -> str:
    """``host:port`` of the request that failed, when the client says."""
    try:
        url = e.request.url  # httpx and requests errors carry their request
    except (AttributeError, RuntimeError):
        return "unknown host"
    host, port = getattr(url, "host", None), getattr(url, "port", None)
    if host is None:
        from urllib.parse import urlsplit

        parts = urlsplit(str(url))
        host, port = parts.hostname, parts.port
    return f"{host}:{port}" if port else str(host)


RESUMED_BY = {"infer": " with --resume", "score": " with --resume"}  # how a command goes on after Ctrl-C


def translate(e: BaseException, ctx: click.Context) -> click.ClickException | None:
    """The click exception the table gives ``e``, or None (a bug: re-raise it)."""
    if isinstance(e, (Interrupted, KeyboardInterrupt)):
        done = f"{e}; " if isinstance(e, Interrupted) else "interrupted; what was written is whole, "
        again = click.ClickException(f"{done}to go on, run the same command again{RESUMED_BY.get(ctx.info_name, '')}")
        again.exit_code = 130
        return again
    if isinstance(e, UsageError):
        return click.UsageError(str(e), ctx)
    if isinstance(e, ForeignError) and not debugging():
        return click.ClickException(f"{e} (persistbench --debug shows the traceback)")
    if isinstance(e, PersistbenchError):
        return click.ClickException(str(e))
    if isinstance(e, OSError):
        return click.ClickException(os_error_line(e))
    if network_error(e):
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return click.ClickException(f"{host_of(e)}: network unreachable ({first})")
    return None


class CommandContext(click.Context):
    """A command's context that leaves itself in the shared ``meta``, so that a usage error raised in the
    command shows the command's usage line, not the group's."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.meta[CommandContext] = self


class ErrorTable(click.Group):
    """A group whose commands' errors go through :func:`translate`."""

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = self.find(name)
        if command is not None:
            command.context_class = CommandContext
        return command

    def find(self, name: str) -> click.Command | None:
        """The command called ``name``, or None."""
        raise NotImplementedError

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.ClickException:
            raise
        except KeyboardInterrupt as e:
            raise translate(e, ctx.meta.get(CommandContext, ctx)) from None
        except Exception as e:
            if debugging() and isinstance(e, PersistbenchError):
                traceback.print_exc()
                if isinstance(e, ForeignError) and e.details:
                    click.echo(e.details, err=True)
            translated = translate(e, ctx.meta.get(CommandContext, ctx))
            if translated is None:
                raise
            raise translated from None
