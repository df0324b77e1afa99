"""A bench :class:`~gradcheck.cli.bench.config.Report` as JSON-ready data and as Markdown."""

from __future__ import annotations

from dataclasses import asdict

from .config import SECTIONS, VERSION, Report, Row


def to_json(report: Report) -> dict:
    return {"version": VERSION, "quick": report.quick, "seconds": report.seconds,
            "environment": report.environment,
            "sections": [{"id": s, "title": SECTIONS[s], "notes": report.notes[s],
                          "absent": report.absent[s]} for s in report.notes],
            "rows": [asdict(r) for r in report.rows]}


def _fmt_seconds(r: Row) -> str:
    if r.extra.get("capped"):
        return f"> {r.extra['cap_seconds']:g} (cap)"
    if r.seconds is None:
        return "-"
    return f"{r.seconds:.4f}" if r.seconds < 10 else f"{r.seconds:.1f}"


def _fmt_ratio(r: Row) -> str:
    if r.ratio is None:
        if "ratio_at_least" in r.extra:
            return f"> {r.extra['ratio_at_least']:.1f}×"
        return "-"
    return f"{r.ratio:.3g}×" if r.ratio < 1000 else f"{r.ratio:,.0f}×"


def _fmt_sizes(sizes: dict) -> str:
    if "depth" in sizes:
        return f"depth {sizes['depth']}, {sizes['ops']} ops"
    if "shapes" in sizes:
        return (", ".join(f"{k} {v}" for k, v in sizes["shapes"].items())
                + f" ({sizes['n']:,} elements)")
    if "cases" in sizes:
        return f"{sizes['cases']} case" + ("s" if sizes["cases"] != 1 else "")
    if "chain" in sizes:
        return f"n = {sizes['n']:,}, {sizes['ops']} ops ({sizes['chain']})"
    return f"n = {sizes['n']:,}"


def _fmt_met(r: Row, quick: bool) -> str:
    if r.target is None:
        return "-"
    if r.met is None:
        return "not assessed (quick sizes)" if quick else "-"
    return "yes" if r.met else "no"


def cell(text: str) -> str:
    """``text`` as one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def environment_line(env: dict) -> str:
    """Python, CPUs and the libraries' versions, as a report's first line says them."""
    return (f"Python {env.get('python')}, {env.get('cpus')} CPUs, NumPy {env.get('numpy')}, "
            f"SymPy {env.get('sympy')}, torch {env.get('torch')}")


def _row_line(r: Row, quick: bool) -> str:
    name = r.name
    if r.extra.get("large"):
        name += " (large formula)"
    if r.extra.get("agrees") is False:
        name += " (gradients DISAGREE)"
    if r.extra.get("error"):
        name += f" ({r.extra['status'].upper()}: {r.extra['error']})"
    if "added_seconds" in r.extra:   # (opchecks: what the check switched off costs)
        most, check = r.extra["most"], ", ".join(r.extra["skip_checks"])
        name += (f" ({check} adds {r.extra['added_seconds']:+.2f} s in all, "
                 f"{1000 * r.extra['added_mean']:+.0f} ms per case run on average, "
                 f"median {1000 * r.extra['added_median']:+.0f} ms, at most "
                 f"{1000 * most['seconds']:+.0f} ms: {most['case']})")
    if r.extra.get("peak_bytes") is not None:
        name += (f": {r.extra['peak_bytes'] / 2**20:.1f} MiB over "
                 f"{r.extra['input_bytes'] / 2**20:.1f} MiB of input")
    return "| " + " | ".join(cell(c) for c in (
        name, _fmt_sizes(r.sizes), _fmt_seconds(r), r.runs, _fmt_ratio(r),
        r.verified, r.target or "-", _fmt_met(r, quick))) + " |"


def _section(report: Report, section: str) -> list[str]:
    out = [f"## {SECTIONS[section]}", ""]
    out += [f"- {n}" for n in report.notes[section]]
    for a in report.absent[section]:
        out.append(f"- **absent**: {a['name']}: {cell(a['reason'])}")
    rows = report.section(section)
    if rows:
        out += ["", "| workload | size | seconds | runs | ratio | verified | target "
                "| target met |", "|---|---|---|---|---|---|---|---|"]
        out += [_row_line(r, report.quick) for r in rows]
    out.append("")
    return out


def markdown(report: Report) -> str:
    env = report.environment
    out = ["# gradcheck bench" + (" (quick: reduced sizes)" if report.quick else ""), "",
           environment_line(env)
           + (f", JAX {env['jax']}" if "jax" in env else "")
           + (f"; load average {env['load_average_start'][0]} at the start, "
              f"{env['load_average_end'][0]} at the end"
              if "load_average_start" in env and "load_average_end" in env else "")
           + f". Total {report.seconds:.0f} s.", ""]
    for section in report.notes:
        out += _section(report, section)
    return "\n".join(out)
