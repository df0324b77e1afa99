"""What ``gradcheck run`` writes once its cases have run: the report on stdout (the
text report, or the ``--format`` document when no file takes it), GitHub Actions'
``::error`` annotations, each report file (atomically, one after the other: one that
cannot be written leaves the others written), and the Markdown report appended to
``$GITHUB_STEP_SUMMARY`` under GitHub Actions. Which streams get colour is
:func:`use_color`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["publish", "report_problem", "use_color", "is_terminal", "step_summary_file",
           "text_width"]


def use_color(choice: str, stream, environ=None) -> bool:
    """Whether ``stream`` gets colour: ``always`` and ``never`` say so; ``auto``: never
    where NO_COLOR is set to something (no-color.org), always where FORCE_COLOR is
    (force-color.org; NO_COLOR wins over it, as in pytest and CPython), else where the
    stream is a terminal."""
    environ = os.environ if environ is None else environ
    if choice in ("always", "never"):
        return choice == "always"
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR"):
        return True
    return is_terminal(stream)


def is_terminal(stream) -> bool:
    """Whether ``stream`` is a terminal (False for one without ``isatty`` or closed)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):   # no such method, or a closed stream
        return False


def report_problem(reports) -> str:
    """Why one of ``reports`` (:class:`~gradcheck.cli.settings.Report`) could not be
    written ("" when each can), checked before the run so that no report is lost at
    its end: a path that cannot be written, or two reports to the same file."""
    from ..project.confine import write_problem
    from ..base.io import output_problem
    from ..project.settings import project_root

    seen: dict[str, object] = {}
    summary, root = step_summary_file(), project_root()
    for r in reports:
        try:   # confined first: output_problem makes a probe file in the folder
            problem = (write_problem(r.path, root) or output_problem(r.path)
                       or _replaces_a_source(r.path, summary))
        except OSError as exc:   # a name the system refuses to look up (ENAMETOOLONG)
            from ..project.arguments import shown

            problem = f"--output {shown(r.path)}: {exc.strerror or exc}"
        if problem:
            if r.origin == "--output":
                return problem if problem.startswith("--output") else f"--output {problem}"
            return f"{r.origin} {r.fmt}:{problem.removeprefix('--output ')}"
        key = os.path.realpath(r.path)
        if key in seen:
            first = seen[key]
            return (f"two reports to the same file {r.path}: {first.origin} "
                    f"{first.fmt}:{first.path} and {r.origin} {r.fmt}:{r.path}")
        seen[key] = r
    return ""


# what a report never replaces: a one-character slip (junit:cases/a.toml for
# reports/a.xml) must not cost a case file, an op's source or the project's settings
SOURCES = (".py", ".toml", ".yaml", ".yml", ".cfg", ".ini")


def _replaces_a_source(path: str, summary: str) -> str:
    """Why writing a report to ``path`` would destroy what is not a report ("" when it
    would not): an existing source file, or the job summary (appended to, not
    replaced: it holds the other steps' summaries)."""
    target = Path(path)
    if summary and os.path.realpath(target) == os.path.realpath(summary):
        return (f"{path} is $GITHUB_STEP_SUMMARY, the job summary: the Markdown report is "
                "appended to it already (a report file would replace what the job's "
                "other steps wrote there)")
    if target.suffix.lower() in SOURCES and target.is_file():
        return (f"{path} exists and is a source file ({target.suffix}), not a report: a "
                "report would replace it; write reports to files of their own, e.g. "
                "under reports/")
    real = Path(os.path.realpath(target))   # a link's target is what would be replaced
    if real.suffix.lower() in SOURCES and real.is_file():
        return (f"{path} is a link to {real}, a source file ({real.suffix}), not a "
                "report: a report would replace it; write reports to files of their "
                "own, e.g. under reports/")
    return ""


class _Rendered:
    """Each format rendered once, whatever number of places it goes to."""

    def __init__(self, result, verbose: bool):
        self.result, self.verbose, self.done = result, verbose, {}
        self.width = text_width()

    def __call__(self, fmt: str, color: bool = False, quiet: bool = False) -> str:
        from ..report import render

        key = (fmt, color, quiet)
        if key not in self.done:
            self.done[key] = render(self.result, fmt, color=color, verbose=self.verbose,
                                    quiet=quiet, width=self.width)
        return self.done[key]


def text_width() -> int:
    """The most characters a line of the text report has: COLUMNS where it is set, else
    the width of the terminal stdout is, else 80 (a pipe, a file, a CI log), as
    :func:`shutil.get_terminal_size` reads them; a report file is given the same."""
    import shutil

    return shutil.get_terminal_size((80, 24)).columns


def publish(args, result) -> list[str]:
    """Write ``result``'s reports (see the module's docstring); why each report that
    could not be written was not (empty when all were)."""
    from ..project.confine import write_problem
    from ..project.settings import project_root
    from ..report.text import one_line

    rendered = _Rendered(result, args.verbose)
    # stdout is the --format document when no file takes it, else the text report
    fmt = "text" if args.output else args.format
    text = fmt == "text"
    sys.stdout.write(rendered(fmt, color=text and use_color(args.color, sys.stdout),
                              quiet=text and args.quiet))
    # keep a JSON/JUnit/Markdown document on stdout whole: the runner reads workflow
    # commands (and these lines) from stderr too
    aside = sys.stdout if text else sys.stderr
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from ..report.annotations import github_annotations

        for line in github_annotations(result):
            print(line, file=aside)
    unwritten = []
    sys.stdout.flush()   # before a report that goes to /dev/stdout, after the text
    root = project_root()
    for r in args.reports:
        # judged again: a link may have been put there while the cases ran
        moved = write_problem(r.path, root)
        if moved:
            unwritten.append(f"the {r.fmt} report was not written: {one_line(moved)}")
            continue
        try:
            _write(r.path, rendered(r.fmt))
        except OSError as exc:   # checked before the run, yet a disk fills (/dev/full)
            unwritten.append(f"cannot write the {r.fmt} report to {one_line(r.path)}: "
                             f"{exc.strerror or exc}")
            continue
        print(f"report written to {one_line(r.path)} ({r.fmt})", file=aside)
    sys.stdout.flush()   # what stdout holds comes before anything appended after it
    summary = step_summary_file() if args.step_summary else ""
    if summary and not _is_stdout(summary):
        _append_step_summary(summary, rendered("markdown"))
    return unwritten


def _write(path: str, text: str) -> None:
    """A report file; one that is this process's stdout (``/dev/stdout``, or the
    file stdout is redirected to) through stdout itself: a second open file of it
    would write at an offset of its own, over or under the lines stdout writes."""
    from ..base.io import write_atomic

    if _is_stdout(path):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_atomic(path, text)


def step_summary_file() -> str:
    """The file of GitHub Actions' job summary where this runs under it ("" else)."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return ""
    return os.environ.get("GITHUB_STEP_SUMMARY", "")


def _is_stdout(path: str) -> bool:
    """Whether stdout is the file ``path`` already: the recipe of earlier versions,
    ``gradcheck run --format markdown >> "$GITHUB_STEP_SUMMARY"``, which would otherwise
    put the summary there twice."""
    try:
        ours, theirs = os.fstat(sys.stdout.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):   # (io.UnsupportedOperation too)
        return False
    return (ours.st_dev, ours.st_ino) == (theirs.st_dev, theirs.st_ino)


def _append_step_summary(path: str, markdown: str) -> None:
    """Append ``markdown`` to the job summary: appended, never replaced, since the
    job's other steps write there too. A summary that cannot be written is a warning:
    the run's verdict is the exit code, not its summary page."""
    from ..report.text import one_line

    try:
        with open(Path(path), "a", encoding="utf-8") as f:
            # a blank line before ours, so that it starts a Markdown block of its own
            f.write(("\n" if f.tell() else "") + markdown.rstrip("\n") + "\n")
    except OSError as exc:
        print(f"gradcheck: warning: cannot append the summary to $GITHUB_STEP_SUMMARY "
              f"({one_line(path)}): {exc.strerror or exc}", file=sys.stderr)
