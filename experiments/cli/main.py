"""The ``evenhand`` command's parser and entry point: each command group lives in its own module of
this package and adds its subcommands here, in the order ``evenhand --help`` lists them."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evenhand import __version__

from . import (cache, decide, demo, figures, irt, organism, plan, power, probe, report, run, runs, score, serve,
               show, studies, suite, table)
from . import audit  # after common's users: importing it first would enter common.py mid-cycle


def build_parser() -> argparse.ArgumentParser:
    """The full ``evenhand`` argument parser (every command, flag and default)."""
    p = argparse.ArgumentParser(prog="evenhand", description="Measure asymmetric demographic bias in LLM decisions.")
    p.add_argument("--version", action="version", version=f"evenhand {__version__}")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_FILE",
                   help="import a module or .py file that registers interventions, metrics or decision engines of "
                        "your own before the command runs (repeatable; see docs/INTERVENTIONS.md, docs/METRICS.md, "
                        "docs/ARCHITECTURE.md)")
    sub = p.add_subparsers(dest="command", required=True)
    suite.register(sub)
    score.register_score(sub)
    studies.register_compare(sub)
    power.register(sub)
    irt.register(sub)
    score.register_simulate(sub)
    run.register(sub)
    plan.register(sub)
    decide.register(sub)
    serve.register(sub)
    cache.register(sub)
    organism.register(sub)
    figures.register(sub)
    report.register(sub)
    runs.register(sub)
    show.register(sub)
    table.register(sub)
    studies.register_modes_bbq_interventions(sub)
    probe.register(sub)
    demo.register(sub)
    audit.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one ``evenhand`` command. Expected faults (bad input or config, a missing or damaged model, a full
    disk, an unwritable path, a file that is not UTF-8) print one line ``evenhand: error: ...`` naming the
    file and what to do, and return 2; no traceback. Any other exception is a fault of EvenHand's (or a plugin's):
    one line names it and the file its full traceback was written to (:func:`_internal`), return 1."""
    args = build_parser().parse_args(argv)
    import warnings
    warnings.formatwarning = one_line_warning
    from evenhand.models.loading import ModelLoadError  # deferred: keeps the CLI's start fast
    from evenhand.runs.rundir import RunError  # deferred: keeps the CLI's start fast
    from evenhand.rows.schema import RowError  # deferred: keeps the CLI's start fast
    from evenhand.suite.content import ContentError  # deferred: keeps the CLI's start fast
    try:
        if args.plugin:
            from interventions.registry import load_plugin
            for plugin in args.plugin:
                try:
                    load_plugin(plugin)
                except ImportError as exc:
                    raise ValueError(f"--plugin {plugin}: {exc}") from exc
        return args.fn(args)
    except (RowError, ContentError, RunError, ModelLoadError, KeyError, UnicodeDecodeError, ValueError,
            FileNotFoundError, BrokenPipeError, OSError) as exc:
        if isinstance(exc, BrokenPipeError):
            return 0
        return _fail(_message(exc, args))
    except KeyboardInterrupt:
        print("evenhand: interrupted; the same command resumes a run where it stopped", file=sys.stderr)
        import gc  # deferred: only on Ctrl-C
        gc.freeze()  # the interpreter's last collection skips what exists now: exit within 2 s of Ctrl-C (it took
        return 130   # 2.6 s on a loaded machine with torch imported); every file is written whole already
    except Exception as exc:  # noqa: BLE001 - a bug: one line, and the traceback kept where it can be sent
        return _internal(exc, argv if argv is not None else sys.argv[1:])


def entry(argv: list[str] | None = None) -> int:
    """The ``evenhand`` command: :func:`main`, except that after Ctrl-C (status 130) the process ends at once with
    ``os._exit``, its output flushed: every file is already written whole (the stages and caches write atomically;
    a response cache's torn last line is cut off on the next open), and the interpreter's teardown (joining worker
    threads, unloading torch) took 2.6 s on a loaded machine."""
    import os
    rc = main(argv)
    if rc == 130:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(130)
    return rc


def _internal(exc: BaseException, argv: list[str]) -> int:
    """An unexpected exception: its full traceback (with the command line and the version) written to a new
    file ``evenhand-error-*.txt`` in the temporary directory, and one line naming the exception and that file."""
    import tempfile
    import traceback
    text = (f"evenhand {__version__}\ncommand: evenhand {' '.join(argv)}\n\n"
            + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    try:
        fd, path = tempfile.mkstemp(prefix="evenhand-error-", suffix=".txt")
        with open(fd, "w", encoding="utf-8") as f:
            f.write(text)
        where = f"the full traceback is in {path}"
    except OSError as err:
        where = f"the traceback could not be written ({err.strerror})"
    first = str(exc).splitlines()[0] if str(exc) else ""
    print(f"evenhand: internal error: {type(exc).__name__}: {first}; {where} (please attach it to a bug report)",
          file=sys.stderr)
    return 1


def one_line_warning(message, category, filename, lineno, line=None) -> str:
    """A warning as the CLI prints it: one line naming its category (``evenhand: warning (UserWarning): ...``),
    without the source file and line a Python warning shows."""
    text = " ".join(str(message).split())
    return f"evenhand: warning ({category.__name__}): {text}\n"


def _input_files(args: argparse.Namespace) -> list[str]:
    """The existing files a command was given (to name one that is not UTF-8)."""
    found = []
    for value in vars(args).values():
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and v and Path(v).is_file():
                found.append(v)
    return found


def _message(exc: BaseException, args: argparse.Namespace) -> str:
    """The one line printed for an expected fault."""
    from evenhand.support.messages import (NotWritableError, os_error_message,  # deferred: keeps the CLI's start fast
                                   unicode_error_message)
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    if isinstance(exc, UnicodeDecodeError):
        return unicode_error_message(exc, _input_files(args))
    if isinstance(exc, OSError):
        return _no_missing_flag(os_error_message(exc) if not isinstance(exc, NotWritableError) else str(exc), args)
    return str(exc)


def _no_missing_flag(message: str, args: argparse.Namespace) -> str:
    """``message`` without the hint "another --out" when the command has no --out (`report` writes into the run
    directory it reads: there the hint is to copy the run somewhere writable)."""
    if hasattr(args, "out") or "--out" not in message:
        return message
    where = "copy the run directory somewhere you can write and run the command on the copy"
    return (message.replace("choose a location you can write (e.g. another --out)", where)
            .replace("choose a location you can write, e.g. another --out", where)
            .replace("choose a writable location (e.g. another --out)", where))


def _fail(message: str) -> int:
    """Print ``evenhand: error: MESSAGE`` on one line of stderr; the exit code 2."""
    print(f"evenhand: error: {message}", file=sys.stderr)
    return 2
