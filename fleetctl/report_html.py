"""What the HTML reports share: the page shell, its CSS, badges, times and the inline SVG plot helpers.

A report is one self-contained file (see docs/report.md): CSS and any script
inline, plots drawn here as inline SVG, a Content-Security-Policy that lets
the page fetch nothing. Callers escape every text that comes from the store
(``escape`` is the one to use); the helpers here escape what they are given.
The sweep report (fleetctl/sweep/report.py) and the burn-in report
(fleetctl/burnin/report.py) are built from these pieces.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

from fleetctl.times import aware_utc

__all__ = ["BASE_CSS", "SERIES_COLOURS", "axis", "badge", "escape", "line_svg", "nice_top", "page_head", "when"]

# The look both reports share; each adds its own rules after these. At scale (thousands of rows, #25 item 17):
# names and times never wrap (``.nw``; ``.nm`` cuts a long name with an ellipsis, its title keeps it whole), and
# a table wider than its box scrolls inside ``.tscroll`` instead of being cut or squeezed.
BASE_CSS = """
:root{--crit:#d62728;--unk:#9467bd;--warn:#f0a500;--ok:#2ca02c;--none:#b8b8b8;--fg:#1d1d1f;--muted:#666;--line:#ddd}
*{box-sizing:border-box}
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);margin:0;background:#fafafa}
header{padding:16px 24px;background:#20232a;color:#eee}
header h1{margin:0 0 4px;font-size:20px}
header p{margin:2px 0;color:#bbb}
main{padding:0 24px 48px}
h2{margin:28px 0 8px;font-size:17px;border-bottom:1px solid var(--line);padding-bottom:4px}
.cards{display:flex;gap:12px;margin-top:16px;flex-wrap:wrap}
.card{background:#fff;border:1px solid var(--line);border-left:6px solid var(--none);padding:8px 14px;min-width:120px}
.card b{display:block;font-size:22px}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px;border:1px solid #0004}
table{border-collapse:collapse;background:#fff;margin:6px 0 12px}
th,td{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}
td.num{text-align:right}
td.nw,.nw{white-space:nowrap}
.nm{display:inline-block;max-width:18em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;vertical-align:top}
.tscroll{overflow-x:auto;max-width:100%}
.tscroll>table{margin:0}
.badge{display:inline-block;padding:0 6px;border-radius:3px;font-size:12px}
.muted{color:var(--muted)}
.bar{display:inline-block;height:10px;vertical-align:middle}
.plots{display:flex;gap:24px;flex-wrap:wrap}
.plot{background:#fff;border:1px solid var(--line);padding:8px;overflow-x:auto;max-width:100%}
.plot h3{margin:0 0 4px;font-size:13px}
svg text{font:10px system-ui,sans-serif}
"""

# Lines of a plot, in order: the first series (the host's own readings) blue, then the others.
SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


def when(v: Any) -> str:
    """A stored timestamp as shown on the pages: UTC, to the minute; "" for none."""
    t = aware_utc(v)
    return t.strftime("%Y-%m-%d %H:%M") if t else ""


def page_head(title: str, lines: Sequence[str], css: str) -> str:
    """The page from its doctype to the opening ``<main>``: the policy, the CSS, a header with ``title`` and ``lines``.

    ``title`` is escaped here; ``lines`` are HTML the caller has escaped already.
    """
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            # The page may fetch nothing: no script, style, font or image from anywhere but itself.
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">\n"
            "<link rel=\"icon\" href=\"data:,\">\n"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
            f"<title>{escape(title)}</title>\n<style>{css}</style></head><body>\n"
            f"<header><h1>{escape(title)}</h1>" + "".join(f"<p>{x}</p>" for x in lines) + "</header>\n<main>")  # fmt: skip


def badge(status: str) -> str:
    """A status as a coloured label; the page's CSS gives ``.st-<status>`` its colour."""
    return f'<span class="badge st-{escape(status)}">{escape(status)}</span>'


def nice_top(v: float) -> float:
    """The top of an axis: the smallest 1, 2, 2.5 or 5 times a power of ten at or above ``v``."""
    if v <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * mag:
            return float(m * mag)
    return float(10 * mag)


def axis(x0: int, y0: int, plot_h: int, width: int, top: float, unit: str) -> list[str]:
    """A y axis from 0 to ``top`` with four grid lines, its origin at (x0, y0), as SVG elements."""
    out = []
    for i in range(5):
        v = top * i / 4
        y = y0 - plot_h * i / 4
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + width}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{x0 - 4}" y="{y + 3:.1f}" text-anchor="end">{v:g}{escape(unit)}</text>')
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y0 - plot_h}" stroke="#888"/>')
    return out


def line_svg(series: Sequence[tuple[str, Sequence[tuple[float, float]]]], *, unit: str, label: str, svg_id: str = "",
             x_unit: str = "s", width: int = 420) -> str:  # fmt: skip
    """Values over time, a line per series (name, [(x, y) ...]); the first series solid, the others dashed.

    Both axes start at 0. A series of one point is drawn as a dot. The names are
    escaped; hovering a line shows its name, its range and its maximum.
    """
    drawn = [(name, sorted(pts)) for name, pts in series if pts]
    if not drawn:
        return '<p class="muted">No samples.</p>'
    top_x = nice_top(max(x for _, pts in drawn for x, _ in pts))
    top_y = nice_top(max(y for _, pts in drawn for _, y in pts) * 1.1)
    widest = max(len(f"{top_y * i / 4:g}{unit}") for i in range(5))
    x0, y0, plot_h = max(32, 8 + 6 * widest), 170, 150  # room for the y axis' widest label
    legend_h = 14 * len(drawn)
    ident = f' id="{escape(svg_id)}"' if svg_id else ""
    out = [f'<svg{ident} xmlns="http://www.w3.org/2000/svg" width="{x0 + width + 14}" height="{y0 + 30 + legend_h}" '
           f'role="img" aria-label="{escape(label)}">']  # fmt: skip
    out += axis(x0, y0, plot_h, width, top_y, unit)
    for i in range(5):
        x = x0 + width * i / 4
        out.append(f'<text x="{x:.1f}" y="{y0 + 13}" text-anchor="middle">{top_x * i / 4:g}{escape(x_unit)}</text>')
    for n, (name, pts) in enumerate(drawn):
        colour = SERIES_COLOURS[n % len(SERIES_COLOURS)]
        xy = [(x0 + width * x / top_x, y0 - plot_h * y / top_y) for x, y in pts]
        ys = [y for _, y in pts]
        tip = (f"<title>{escape(name)}: {len(pts)} samples, {pts[0][0]:g}-{pts[-1][0]:g}{escape(x_unit)}, "
               f"{min(ys):g}-{max(ys):g}{escape(unit)}</title>")  # fmt: skip
        dash = "" if n == 0 else ' stroke-dasharray="5 3"'
        if len(xy) == 1:
            out.append(f'<circle cx="{xy[0][0]:.1f}" cy="{xy[0][1]:.1f}" r="3" fill="{colour}">{tip}</circle>')
        else:
            points = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
            out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}>{tip}</polyline>')
        ly = y0 + 28 + 14 * n
        out.append(f'<line x1="{x0}" y1="{ly - 4}" x2="{x0 + 18}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"{dash}/>'
                   f'<text x="{x0 + 24}" y="{ly}">{escape(name)} (max {max(ys):g}{escape(unit)})</text>')  # fmt: skip
    out.append("</svg>")
    return "".join(out)
