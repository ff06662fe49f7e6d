"""The capacity page (``/debug/ui``): /debug/capacity, pending pods and recent decisions as one
server-rendered HTML page with inline SVG, for a browser reaching the extender through the API
server's service proxy or a port-forward.

No script, no stylesheet or font from elsewhere (clusters often have no internet, and a page
served through the API server's proxy must not load anything from another origin); links are
relative, so they work under the proxy's path. At 5,000 nodes the page stays small: classes
and histograms are aggregates, nodes come a page at a time (``?page=``), and the figures a test
or a script reads are in ``data-`` attributes equal to /debug/capacity's JSON.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from html import escape
from typing import Any
from urllib.parse import urlencode

#: Device states in the order they are drawn, with their colours (colour-blind safe, Okabe-Ito).
STATES = (
    ("free", "free", "#009e73"),
    ("allocated", "allocated", "#0072b2"),
    ("inFlight", "in flight", "#e69f00"),
    ("tainted", "tainted", "#d55e00"),
)
BAR_WIDTH = 160
BAR_HEIGHT = 12

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.4em 0 .4em}
table{border-collapse:collapse}th,td{padding:2px 8px;text-align:left;vertical-align:middle}
th{border-bottom:1px solid #999}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
tr:nth-child(even) td{background:#f4f4f4}.meta{color:#555}.legend span{margin-right:1em}
.swatch{display:inline-block;width:.8em;height:.8em;margin-right:.3em;vertical-align:-1px}
.error{color:#b00020}nav a{margin-right:.6em}form{margin:.6em 0}
"""


def _bar(states: Mapping[str, int], title: str) -> str:
    """A stacked horizontal bar of the states' counts, as inline SVG."""
    total = sum(states.get(key, 0) for key, _, _ in STATES)
    parts = []
    x = 0.0
    for key, label, colour in STATES:
        count = states.get(key, 0)
        if not count or not total:
            continue
        width = BAR_WIDTH * count / total
        parts.append(
            f'<rect x="{x:.1f}" width="{width:.1f}" height="{BAR_HEIGHT}" fill="{colour}">'
            f"<title>{escape(title)}: {count} {label}</title></rect>"
        )
        x += width
    return (
        f'<svg width="{BAR_WIDTH}" height="{BAR_HEIGHT}" role="img" aria-label="{escape(title)}">'
        f'<rect width="{BAR_WIDTH}" height="{BAR_HEIGHT}" fill="#eee"/>{"".join(parts)}</svg>'
    )


def _histogram(device_class: str, nodes_by_free: Mapping[str, int]) -> str:
    """Nodes by how many devices of the class they have free: a bar per count."""
    if not nodes_by_free:
        return "<p>no node has a device of this class</p>"
    width, height, gap = 28, 80, 6
    most = max(nodes_by_free.values())
    bars = []
    for i, (free, nodes) in enumerate(nodes_by_free.items()):
        h = max(1.0, height * nodes / most)
        x = i * (width + gap)
        bars.append(
            f'<g data-free="{escape(free)}" data-nodes="{nodes}">'
            f'<rect x="{x}" y="{height - h + 14:.1f}" width="{width}" height="{h:.1f}" fill="#009e73">'
            f"<title>{nodes} node(s) with {escape(free)} free</title></rect>"
            f'<text x="{x + width / 2}" y="{height - h + 11:.1f}" font-size="10" text-anchor="middle">'
            f"{nodes}</text>"
            f'<text x="{x + width / 2}" y="{height + 28}" font-size="10" text-anchor="middle">'
            f"{escape(free)}</text></g>"
        )
    total_width = len(nodes_by_free) * (width + gap)
    return (
        f'<svg class="histogram" data-class="{escape(device_class)}" width="{total_width}" '
        f'height="{height + 32}" role="img" aria-label="nodes by free devices of {escape(device_class)}">'
        f"{''.join(bars)}</svg>"
    )


def _cells(states: Mapping[str, int]) -> str:
    return "".join(f'<td class="n" data-state="{key}">{states.get(key, 0)}</td>' for key, _, _ in STATES)


def _query(**params: object) -> str:
    return "?" + urlencode({k: v for k, v in params.items() if v not in (None, "")})


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return _dt.datetime.fromtimestamp(seconds, _dt.UTC).strftime("%H:%M:%S")


def render(data: Mapping[str, Any], now: float) -> str:
    """The page for :func:`extender.service.debug.page_view`'s ``data`` (``now``: wall time)."""
    figures = data["capacity"]
    device_class = data["deviceClass"]
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>dra-extender: device capacity</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>Device capacity</h1>",
        f'<p class="meta">as the extender sees it at {_when(now)} UTC; {data["nodeCount"]} node(s)'
        + (f" with devices of class <b>{escape(device_class)}</b>" if device_class else "")
        + '. The same figures as JSON: <a href="capacity">capacity</a>, '
        '<a href="inflight">inflight</a>, <a href="decisions">decisions</a>.</p>',
        '<p class="legend">'
        + "".join(
            f'<span><i class="swatch" style="background:{c}"></i>{label}</span>' for _, label, c in STATES
        )
        + "</p>",
        '<form method="get"><label>class <select name="class"><option value="">every class</option>'
        + "".join(
            f'<option value="{escape(c)}"{" selected" if c == device_class else ""}>{escape(c)}</option>'
            for c in figures["devicesByClass"]
        )
        + '</select></label> <button type="submit">show</button></form>',
    ]
    # Classes: devices by state, summed over nodes.
    out.append('<h2 id="classes">Devices by class</h2><table id="class-table"><tr><th>class')
    out.append("".join(f'<th class="n">{label}' for _, label, _ in STATES) + "<th></tr>")
    for cls, states in figures["devicesByClass"].items():
        out.append(f'<tr data-class="{escape(cls)}"><td>{escape(cls)}</td>{_cells(states)}')
        out.append(f"<td>{_bar(states, cls)}</td></tr>")
    out.append("</table>")
    for cls, error in figures["classErrors"].items():
        out.append(
            f'<p class="error" data-class-error="{escape(cls)}">class {escape(cls)}: {escape(error)}</p>'
        )
    # Pods that fit and fragmentation.
    counts = list(next(iter(figures["podsThatFit"].values()), {}))
    out.append('<h2 id="fit">Pods that still fit, and free devices stranded</h2>')
    out.append('<table id="fit-table"><tr><th>class')
    out.append("".join(f'<th class="n">pods of {n}' for n in counts))
    out.append("".join(f'<th class="n">stranded for {n}' for n in counts[1:]) + "</tr>")
    for cls, fits in figures["podsThatFit"].items():
        stranded = figures["strandedFor"][cls]
        out.append(f'<tr data-class="{escape(cls)}"><td>{escape(cls)}</td>')
        out.append("".join(f'<td class="n" data-fit="{n}">{fits[n]}</td>' for n in counts))
        out.append("".join(f'<td class="n" data-stranded="{n}">{stranded[n]}</td>' for n in counts[1:]))
        out.append("</tr>")
    out.append(
        '</table><p class="meta">Pods that fit: the sum over nodes of free // N. Stranded: free '
        "devices no pod asking for N can use (each node's remainder). Constraints, counters and "
        "capacity are not considered.</p>"
    )
    out.append(
        '<h2 id="histograms">Nodes by free devices</h2><p class="meta">Under each bar: how many '
        "devices of the class a node has free; above it: how many nodes have that many.</p>"
    )
    for cls in data["classes"]:
        out.append(f"<h3>{escape(cls)}</h3>{_histogram(cls, data['nodesByFree'].get(cls, {}))}")
    # Nodes, a page at a time.
    page, pages = data["page"], data["pages"]
    out.append(f'<h2 id="nodes">Nodes (page {page} of {pages})</h2>')
    out.append(_pages(page, pages, device_class))
    out.append('<table id="node-table"><tr><th>node')
    for cls in data["classes"]:
        out.append(f"<th>{escape(cls)}</th>{''.join(f'<th class=n>{label}' for _, label, _ in STATES)}")
    out.append("</tr>")
    for node in data["nodes"]:
        out.append(f'<tr data-node="{escape(node["node"])}"><td>{escape(node["node"])}</td>')
        for cls in data["classes"]:
            states = node["classes"].get(cls)
            if states is None:
                out.append(f"<td>-</td>{'<td></td>' * len(STATES)}")
            else:
                title = f"{node['node']} {cls}"
                out.append(f'<td data-class="{escape(cls)}">{_bar(states, title)}</td>')
                out.append(_cells(states))
        out.append("</tr>")
    out.append("</table>")
    # Pending pods and recent decisions.
    out.append(
        f'<h2 id="pending">Pending pods asking for devices ({len(data["pending"]) + data["more"]})</h2>'
    )
    out.append('<table id="pending-table"><tr><th>pod<th>last filter<th>fits on<th>why not</tr>')
    for row in data["pending"]:
        if not row["filtered"]:
            why, passed = "not filtered yet", "-"
        elif row["error"]:
            why, passed = f"error: {row['error']}", "0"
        else:
            why = "; ".join(f"{node}: {reason}" for node, reason in list(row["reasons"].items())[:3])
            passed = str(row["passed"])
        out.append(
            f'<tr data-pod="{escape(row["pod"])}"><td>{escape(row["pod"])}</td><td>{_when(row["time"])}</td>'
            f'<td class="n">{passed}</td><td>{escape(why) or "-"}</td></tr>'
        )
    out.append("</table>")
    if data["more"]:
        out.append(f'<p class="meta">and {data["more"]} more</p>')
    out.append('<h2 id="decisions">Recent decisions</h2><table id="decision-table">')
    out.append('<tr><th>time<th>verb<th>pod<th class="n">ms<th>outcome</tr>')
    for entry in reversed(data["decisions"]):
        outcome = entry.get("error") or entry.get("note") or _outcome(entry)
        out.append(
            f"<tr><td>{_when(entry['time'])}</td><td>{escape(entry['verb'])}</td>"
            f'<td>{escape(entry.get("pod") or "-")}</td><td class="n">{entry["durationMs"]}</td>'
            f"<td>{escape(str(outcome))}</td></tr>"
        )
    out.append("</table></body></html>")
    return "".join(out)


def _outcome(entry: Mapping[str, Any]) -> str:
    keys = ("passed", "failed", "unresolvable", "node", "best", "kept", "outcome")
    return ", ".join(f"{k} {entry[k]}" for k in keys if k in entry) or "-"


def _pages(page: int, pages: int, device_class: str | None) -> str:
    if pages <= 1:
        return ""
    links = []
    if page > 1:
        links.append(f'<a href="{_query(page=page - 1, **{"class": device_class})}" rel="prev">previous</a>')
    if page < pages:
        links.append(f'<a href="{_query(page=page + 1, **{"class": device_class})}" rel="next">next</a>')
    return f"<nav>{''.join(links)}</nav>"
