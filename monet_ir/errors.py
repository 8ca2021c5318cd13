"""Turning expected failures into one-line messages and a non-zero exit status.

Command-line tools run their work through `run_reporting_errors`: bad input (a malformed ONNX
file, an unsupported op, IR that does not verify or parse, a wrong pass option, an invalid target
description) prints one line per problem on stderr, prefixed by the tool name, and exits 1.
So does a problem of the user's environment or input size, wherever it surfaces
(`environment_problem`): a full disk or quota, a read-only or forbidden folder, too many open
files, an I/O error (an `OSError` of those kinds), memory exhausted (`MemoryError`), input nested
deeper than Python's recursion limit (`RecursionError`). Anything else is a bug in MONET: one
line naming the input file, where it happened (the ONNX node, the op) and the exception, and
exit status 2; `MONET_DEBUG=1` adds the traceback.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any


class MonetError(Exception):
    """Bad input or an impossible configuration, detected by MONET: a user's mistake, not a bug.

    Every floor's error for bad input derives from this class (`targets.TargetError`,
    `OnnxImportError`, `CostError`, `MappingError`, `ScheduleError`, `InterpreterError`,
    `BindingError`, `ExploreError`, `UsageError`), so the error net below catches them all
    without importing the floors above it. A subclass may set `problems`, one line each.
    """


class UsageError(MonetError):
    """A command-line option with a value the tool cannot use."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP received (`terminations_interrupt`): raised like Ctrl-C's
    KeyboardInterrupt, so that `finally` blocks stop worker processes and remove temporary files."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextmanager
def terminations_interrupt() -> Iterator[None]:
    """Inside the block (in the main thread), SIGTERM and SIGHUP raise `Terminated`, where the
    default would end the process at once without cleaning up; a signal set to be ignored
    (`nohup`) or handled by someone else is left as it is."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) == signal.SIG_DFL:
            previous[number] = signal.signal(number, interrupt)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`; did you mean 'x'?` for the closest of `choices` (difflib, else a case-insensitive match),
    or nothing: the tail of a one-line error about a misspelled name."""
    import difflib

    choices = [c for c in choices if isinstance(c, str)]
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not close:
        close = [c for c in choices if c.lower() == word.lower()]
    return f"; did you mean '{close[0]}'?" if close else ""


class InternalError(Exception):
    """An unexpected failure (a bug in MONET), with where it happened: `where` names the file,
    node or op being processed; `error` is the original exception (its traceback is kept)."""

    def __init__(self, where: str, error: BaseException):
        self.where = where
        self.error = error
        super().__init__(f"{where}: {type(error).__name__}: {_first_line(error)}")


def _first_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[0].strip() if lines else "(no message)"


@contextmanager
def internal_errors_at(where: str) -> Iterator[None]:
    """Label an unexpected exception raised inside the block with `where` (an `InternalError`);
    input errors and already-labelled failures pass through unchanged."""
    try:
        yield
    except (InternalError, KeyboardInterrupt):
        raise
    except expected_errors():
        raise
    except Exception as e:  # noqa: BLE001  (a bug: keep it, say where)
        raise InternalError(where, e) from e


def expected_errors() -> tuple[type[BaseException], ...]:
    from xdsl.utils.exceptions import DiagnosticException, ParseError, PassFailedException, VerifyException

    kinds: list[type[BaseException]] = [
        MonetError, DiagnosticException, ParseError, VerifyException, PassFailedException,
    ]
    for name in ("PassPipelineParseError", "ArgSpecParseError"):
        import xdsl.utils.exceptions as xdsl_errors

        if hasattr(xdsl_errors, name):
            kinds.append(getattr(xdsl_errors, name))
    return tuple(kinds)


MAX_MESSAGE_CHARS = 1000
MAX_MESSAGE_LINES = 100


def one_line_messages(error: BaseException) -> list[str]:
    """One printable line per problem; control characters a malformed file put in a name
    (a carriage return in an op type) are shown escaped so a problem never spans lines. A line
    is cut at `MAX_MESSAGE_CHARS` characters and at most `MAX_MESSAGE_LINES` lines are given
    (then one saying how many more): what a message quotes from a file is bounded."""
    lines = _messages(error)
    shown = [_printable(line) for line in lines[:MAX_MESSAGE_LINES]]
    if len(lines) > MAX_MESSAGE_LINES:
        shown.append(f"... and {len(lines) - MAX_MESSAGE_LINES} more problems")
    return shown


def _printable(line: str) -> str:
    if len(line) > MAX_MESSAGE_CHARS:
        line = line[:MAX_MESSAGE_CHARS] + f"... ({len(line) - MAX_MESSAGE_CHARS:,} more characters)"
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in line)


def _messages(error: BaseException) -> list[str]:
    problems = getattr(error, "problems", None)
    if problems:
        return list(problems)
    text = str(error).strip()
    from xdsl.utils.exceptions import ParseError

    if isinstance(error, ParseError):
        # xDSL renders the offending line and a caret below the message; keep the message
        lines = [line for line in text.splitlines() if line.strip()]
        location = lines[0] if lines else ""
        message = lines[-1].strip() if lines else text
        return [f"{location} {message}".strip()]
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return [type(error).__name__]
    if lines[0].rstrip().endswith(":") and len(lines) > 1:
        # xDSL's spec errors put the reason on the last line, under a caret
        return [f"{lines[0].rstrip()} {lines[-1].strip()} in '{lines[-3].strip() if len(lines) >= 3 else ''}'"]
    return [lines[0]]


XDSL_USAGE_ERRORS = ("Unrecognized", "Unknown target", "file extension", "Incompatible types", "Malformed",
                     "pass argument", "Unknown", "not a valid", "expected", "invalid")


def run_reporting_errors(tool: str, work: Callable[[], Any], source: str | Callable[[], str] = "") -> int:
    """Run a tool's work: 0 when it succeeds, 1 (one line per problem) on bad input or an
    environment problem, 2 (one line) on a bug, 128 + the signal's number when interrupted
    (SIGINT, SIGTERM, SIGHUP: see `terminations_interrupt`); `source` (or a function giving it,
    once known) names the input file for bugs raised outside any labelled place."""
    try:
        with terminations_interrupt():
            work()
    except expected_errors() as e:
        for line in one_line_messages(e):
            print(f"{tool}: error: {line}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:  # Ctrl-C (SIGINT), SIGTERM, SIGHUP: the shell's status of that signal
        return 128 + (e.signum if isinstance(e, Terminated) else 2)
    except Exception as e:  # noqa: BLE001
        if _reader_went_away(e):
            return 141
        problem = environment_problem(e)
        if problem:
            print(f"{tool}: error: {_printable(problem)}", file=sys.stderr)
            return 1
        # xDSL reports unknown formats, passes and bad pass options as ValueError
        if isinstance(e, ValueError) and any(marker in str(e) for marker in XDSL_USAGE_ERRORS):
            print(f"{tool}: error: {one_line_messages(e)[0]}", file=sys.stderr)
            return 1
        return _report_internal_error(tool, e, source() if callable(source) else source)
    return 0


# errors of the machine or of what the user asked for, not of MONET's code (errno: what to say)
ENVIRONMENT_ERRNOS = {
    errno.ENOSPC: "no space left on the device (the disk is full)",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EMFILE: "too many open files (raise `ulimit -n`)",
    errno.ENFILE: "too many open files in the system",
    errno.EIO: "input/output error (the disk or the network file system)",
    errno.EFBIG: "file too large (a file size limit, `ulimit -f`, or the file system's)",
    errno.ENOMEM: "out of memory",
    errno.ENAMETOOLONG: "file name too long",
    errno.ENOTDIR: "a path component is not a folder",
    errno.ENOENT: "no such file or folder",
}


def environment_problem(error: BaseException) -> str:
    """One line for an error of the user's environment or input size (see the module
    docstring), or an empty string when `error` is something else."""
    where = f" (in {error.where})" if isinstance(error, InternalError) else ""
    cause = error.error if isinstance(error, InternalError) else error
    if isinstance(cause, MemoryError):
        return f"out of memory{where}: the input is too large for this machine's memory"
    if isinstance(cause, RecursionError):
        return f"the input is nested too deeply for MONET (Python's recursion limit){where}"
    if isinstance(cause, OSError) and cause.errno in ENVIRONMENT_ERRNOS:
        name = cause.filename if cause.filename is not None else ""
        return f"{name}{': ' if name else ''}{ENVIRONMENT_ERRNOS[cause.errno]}{where}"
    return ""


def _reader_went_away(error: Exception) -> bool:
    """Whether the error is our output's reader closing the pipe (`monet targets | head`): not a
    bug, and nothing is lost. Standard output is pointed at /dev/null so the interpreter's last
    flush does not fail again; the status is a shell's for a program stopped by SIGPIPE."""
    cause = error.error if isinstance(error, InternalError) else error
    if not isinstance(cause, BrokenPipeError):
        return False
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return True


def _report_internal_error(tool: str, error: Exception, source: str) -> int:
    if os.environ.get("MONET_DEBUG"):
        import traceback

        traceback.print_exception(error.error if isinstance(error, InternalError) else error)
    if isinstance(error, InternalError):
        text = str(error)
    else:
        text = f"{source or 'input'}: {type(error).__name__}: {_first_line(error)}"
    print(f"{tool}: internal error: {_printable(text)} (a bug in MONET; MONET_DEBUG=1 shows the traceback)",
          file=sys.stderr)
    return 2
