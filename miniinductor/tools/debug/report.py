"""The HTML compile report: every phase of one compile, side by side, in one file.

Phase 7 (debug). In: `CompiledGraph`s (and, optionally, Dynamo's FX graph and timings).
Out: one self-contained HTML page (inline CSS, JS and SVG; nothing fetched from the
network) holding

  * the phases side by side: FX graph → ATen graph → loop IR → fused kernels → generated
    code. Every line that belongs to a kernel carries `data-k="<graph>:<kernel>"`: hovering
    a kernel (or a line) lights up its source ops, its IR buffers and its code in every
    column, and clicking pins it. Kernels link to their origins with plain anchors too, so
    the links work with scripts off;
  * the fusion graph (fusion_graph.py) as inline SVG, its nodes linking to the IR;
  * the "why (not) fused" table of every `FusionDecision`;
  * the memory timeline: live bytes after each step of the wrapper against eager's peak;
  * the pass viewer (pass_viewer.py): every pass in order, the stage's object before and
    after it and the difference, stepped through with the keyboard;
  * timings, when given (e.g. from `miniinductor.compare`).

The five phase columns and the links between them are in report_columns.py; the other
sections, the page, its CSS and JS are here.

Real Inductor has no single-page twin: `TORCH_COMPILE_DEBUG=1` writes a folder of text files
(our trace.py) and tlparse turns logs into HTML pages; this is both, in one file.
"""
from __future__ import annotations

import dataclasses
import html
import itertools
import re
from pathlib import Path

from ...logs import plural
from . import pass_viewer
from .fusion_graph import INSTALL_HINT, build_fusion_graph, fusion_graph_svg, human_bytes
from .memory import eager_peak
from .provenance import GraphProvenance
from .report_columns import (  # noqa: F401  (GraphLinks and LANGUAGE_NAMES: importable from here too)
    LANGUAGE_NAMES,
    GraphLinks,
    _aten_column,
    _code_column,
    _fx_column,
    _ir_column,
    _origin_links,
    _schedule_column,
    _source_cell,
    _source_section,
)
from .sizes import describe_sizes

_esc = html.escape
_report_ids = itertools.count()


# --------------------------------------------------------------------------- other sections
def _decisions_table(cg, links: GraphLinks) -> str:
    if not cg.scheduler.decisions:
        return '<p class="muted">No fusion candidates were considered (fusion off, or nothing to fuse).</p>'
    rows = []
    for i, d in enumerate(cg.scheduler.decisions):
        ks = {links.kernel_of[b] for b in (d.node1 + "+" + d.node2).split("+") if b in links.kernel_of}
        verdict = '<span class="yes">fused</span>' if d.fused else '<span class="no">not fused</span>'
        rows.append(f'<tr class="{"fused" if d.fused else "unfused"}"{links.data_k(ks)}><td>{i}</td>'
                    f"<td>{_esc(d.node1)}</td><td>{_esc(d.node2)}</td><td>{verdict}</td>"
                    f"<td>{_esc(d.reason)}</td><td class=num>{human_bytes(d.score)}</td></tr>")
    return ('<div class="filters"><button data-filter="all">all</button> <button data-filter="fused">fused</button> '
            '<button data-filter="unfused">not fused</button></div>'
            '<table class="decisions"><thead><tr><th>#</th><th>first</th><th>second</th><th>verdict</th>'
            "<th>reason</th><th>saves</th></tr></thead><tbody>" + "\n".join(rows) + "</tbody></table>")


def memory_svg(plan, eager_peak: int, width=900, height=280) -> str:
    """An inline SVG step chart of the live bytes after each step, with eager's peak."""
    values = list(plan.timeline)
    if not values:
        return '<p class="muted">No steps.</p>'
    left, right, top, bottom = 70, 20, 20, 90
    w, h = width - left - right, height - top - bottom
    top_value = max(max(values), eager_peak, 1) * 1.1
    n = len(values)

    def x(i):
        return left + w * i / n

    def y(v):
        return top + h - h * v / top_value
    path = [f"M{x(0):.1f},{y(0):.1f}"]
    for i, v in enumerate(values):
        path.append(f"L{x(i):.1f},{y(v):.1f} L{x(i + 1):.1f},{y(v):.1f}")
    path.append(f"L{x(n):.1f},{y(0):.1f} Z")
    parts = [f'<svg class="memchart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="memory timeline">',
             f'<path d="{" ".join(path)}" fill="#bbdefb" stroke="#1565c0" stroke-width="1.5"/>']
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        v = top_value / 1.1 * frac
        parts.append(f'<line x1="{left}" x2="{left + w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>'
                     f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" class="axis">{human_bytes(v)}</text>')
    for i, step in enumerate(plan.steps):
        cx = (x(i) + x(i + 1)) / 2
        parts.append(f'<rect x="{x(i):.1f}" y="{top}" width="{w / n:.1f}" height="{h}" fill="transparent">'
                     f"<title>step {i}: {_esc(step.label)}: {human_bytes(values[i])} live</title></rect>"
                     f'<text transform="translate({cx:.1f},{top + h + 8}) rotate(45)" class="axis">'
                     f"{_esc(step.label)}</text>")
    peak = plan.peak_bytes
    parts.append(f'<line x1="{left}" x2="{left + w}" y1="{y(eager_peak):.1f}" y2="{y(eager_peak):.1f}" '
                 f'stroke="#c62828" stroke-dasharray="6,4" stroke-width="1.5"/>'
                 f'<text x="{left + w - 4}" y="{y(eager_peak) - 5:.1f}" text-anchor="end" class="lbl" fill="#c62828">'
                 f"eager estimate peak {human_bytes(eager_peak)}</text>"
                 f'<line x1="{left}" x2="{left + w}" y1="{y(peak):.1f}" y2="{y(peak):.1f}" '
                 f'stroke="#1565c0" stroke-dasharray="2,3"/>'
                 f'<text x="{left + 4}" y="{y(peak) - 5:.1f}" class="lbl" fill="#1565c0">'
                 f"planned peak {human_bytes(peak)}</text>"
                 f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + h}" stroke="#333"/>'
                 f'<line x1="{left}" x2="{left + w}" y1="{top + h}" y2="{top + h}" stroke="#333"/></svg>')
    return "".join(parts)


def _memory_section(cg) -> str:
    plan = cg.plan
    if plan is None:
        return '<p class="muted">No memory plan.</p>'
    eager = eager_peak(cg)
    saved = (1 - plan.peak_bytes / eager) * 100 if eager else 0
    reuse = "".join(f"<tr><td>{_esc(a)}</td><td>{_esc(b)}</td></tr>" for a, b in plan.reuse.items())
    return (f"<p>planned peak <b>{human_bytes(plan.peak_bytes)}</b> vs eager estimate "
            f"<b>{human_bytes(eager)}</b> ({saved:.0f}% less); {plural(len(plan.reuse), 'buffer')} reuse memory.</p>"
            + '<p class="muted">Live bytes of intermediate buffers after each step of the wrapper\'s '
            "<code>call()</code> (hover a step); the dashed red line is the peak eager PyTorch would reach "
            "running the ATen graph op by op (an estimate).</p>"
            + memory_svg(plan, eager)
            + (f'<table class="small"><thead><tr><th>buffer</th><th>takes the memory of</th></tr></thead>'
               f"<tbody>{reuse}</tbody></table>" if reuse else "")
            + f"<details><summary>the plan as text</summary><pre>{_esc(str(plan))}</pre></details>")


def _fusion_graph_section(cg, links: GraphLinks) -> str:
    svg, dot_source = fusion_graph_svg(build_fusion_graph(cg), anchor_prefix=links.prefix)
    legend = ('<p class="legend"><span class="sw fused"></span> value stays inside a kernel '
              '<span class="sw memory"></span> memory round trip (bytes) <span class="sw input"></span> graph input '
              '&nbsp; dashed box: kept in registers; double border: graph output; 3-D box: extern call. '
              'Click a kernel or buffer to jump to it. <button class="fit">actual size</button></p>')
    if svg is None:
        hint = INSTALL_HINT.format(dot="fusion_graph.dot", svg="fusion_graph.svg")
        return (f'<p class="note">graphviz\'s <code>dot</code> program was not found, so the picture could not be '
                f"drawn: {_esc(hint)}.</p>"
                f"<details><summary>DOT source</summary><pre>{_esc(dot_source)}</pre></details>")
    svg = svg[svg.index("<svg"):]  # drop the XML declaration and DOCTYPE
    svg = re.sub(rf'\bid="(?!{links.prefix}-)', f'id="{links.prefix}-', svg)  # unique ids across graphs
    return legend + f'<div class="fg">{svg}</div>'


def _timings_section(timings) -> str:
    if not timings:
        return ('<p class="muted">No timings were given (pass <code>timings=</code>, e.g. from '
                "<code>miniinductor.compare</code>).</p>")
    if not isinstance(timings, dict):
        rows = [dataclasses.asdict(r) if dataclasses.is_dataclass(r) else dict(r) for r in timings]
        timings = {str(r.pop("name", i)): r for i, r in enumerate(rows)}
    if all(isinstance(v, (int, float)) for v in timings.values()):
        base = next(iter(timings.values()))
        body = "".join(f"<tr><td>{_esc(str(k))}</td><td class=num>{v:.4g}</td>"
                       f"<td class=num>{(base / v if v else 0):.2f}x</td></tr>" for k, v in timings.items())
        return ("<table><thead><tr><th></th><th>time (ms)</th><th>speed-up vs first</th></tr></thead>"
                f"<tbody>{body}</tbody></table>")
    cols = list(dict.fromkeys(c for v in timings.values() for c in v))

    def cell(v):
        return f"<td class=num>{v:.4g}</td>" if isinstance(v, float) else f"<td>{_esc(str(v))}</td>"
    body = "".join(f"<tr><td>{_esc(str(k))}</td>" + "".join(cell(v.get(c, "")) for c in cols) + "</tr>"
                   for k, v in timings.items())
    return ("<table><thead><tr><th></th>" + "".join(f"<th>{_esc(str(c))}</th>" for c in cols)
            + f"</tr></thead><tbody>{body}</tbody></table>")


def _kernels_table(cg, links: GraphLinks, errors=None, prov=None) -> str:
    """errors: {buffer: largest error} (from debug_accuracy) adds a per-buffer error column."""
    rows, prov = [], prov or GraphProvenance(cg)
    for k, group in links.groups.items():
        error_cell = ""
        if errors is not None:
            error_cell = "<td>" + _esc(", ".join(f"{n} {errors[n]:.2g}" if n in errors else f"{n} -"
                                                 for n in group.get_names())) + "</td>"
        rows.append(f'<tr{links.data_k([k])}><td><a href="#{links.anchor("kernel", k)}">{_esc(k)}</a></td>'
                    f'<td>{_esc(", ".join(group.get_names()))}</td>'
                    f'<td>{_origin_links(links, links.kernel_origins(k))}</td><td>{_source_cell(prov, k)}</td>'
                    f"<td class=num>{human_bytes(cg.kernels[k].bytes_moved)}</td>{error_cell}</tr>")
    error_head = "<th>max error per buffer</th>" if errors is not None else ""
    return ("<table><thead><tr><th>kernel</th><th>buffers</th><th>source ops</th><th>user source</th><th>moves</th>"
            f"{error_head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


# --------------------------------------------------------------------------- the page
def _graph_section(cg, index: int, fx_gm, compact: bool, errors=None) -> str:
    p = f"g{index}"
    links = GraphLinks(cg, p)
    n_ext = len(cg.scheduler.schedule) - len(cg.kernels)
    head = (f'<section class="graph" id="{p}"><h2>graph {index}: {_esc(cg.graph.name)}</h2>'
            f'<p class="muted">{plural(len(cg.scheduler.nodes), "node")} before fusion → {plural(len(cg.kernels), "kernel")} + '
            f"{plural(n_ext, 'extern call')}; kernels move {human_bytes(sum(k.bytes_moved for k in cg.kernels.values()))}; "
            f"wrapper <code>{_esc(cg.path)}</code></p>")
    if cg.graph.sizevars.symbolic:   # one compile serves every size: say which symbols and guards
        head += f'<pre class="symbols">{_esc(chr(10).join(describe_sizes(cg.graph.sizevars)))}</pre>'
    fx_title, fx_body = _fx_column(cg, links, fx_gm)
    columns = [(fx_title, fx_body), ("ATen graph", _aten_column(cg, links)), ("Loop IR", _ir_column(cg, links)),
               ("Fused kernels", _schedule_column(cg, links)), ("Generated code", _code_column(cg, links))]
    cols = "".join(f'<div class="col"><h3 title="click to widen">{i + 1}. {_esc(t)}</h3>'
                   f'<div class="colbody">{b}</div></div>'
                   for i, (t, b) in enumerate(columns))
    phases = (f'<section id="{p}-phases"><h3>Phases, side by side</h3><p class="muted">Hover a kernel (or any line) to '
              f'light up where it came from and what it became; click to pin it.</p>'
              f'<div class="phases">{cols}</div></section>')
    if compact:
        phases = (f'<details id="{p}-phases"><summary>Phases, side by side</summary>'
                  f'<div class="phases">{cols}</div></details>')
    prov = GraphProvenance(cg)
    return "".join([
        head, phases,
        f'<section id="{p}-source"><h3>User source lines</h3>{_source_section(cg, links, prov)}</section>',
        f'<section id="{p}-kernels"><h3>Kernels</h3>{_kernels_table(cg, links, errors, prov)}</section>',
        f'<section id="{p}-fusion-graph"><h3>Fusion graph</h3>{_fusion_graph_section(cg, links)}</section>',
        f'<section id="{p}-decisions"><h3>Why (not) fused</h3>{_decisions_table(cg, links)}</section>',
        f'<section id="{p}-memory"><h3>Memory timeline</h3>{_memory_section(cg)}</section>',
        f'<section id="{p}-passes"><h3>Passes</h3>{pass_viewer.section(cg, p)}</section>',
        "</section>"])


def _summary(graphs) -> str:
    rows = "".join(
        f'<tr><td><a href="#g{i}">{i}: {_esc(cg.graph.name)}</a></td><td class=num>{len(cg.scheduler.nodes)}</td>'
        f"<td class=num>{len(cg.kernels)}</td><td class=num>{len(cg.scheduler.schedule) - len(cg.kernels)}</td>"
        f"<td class=num>{human_bytes(sum(k.bytes_moved for k in cg.kernels.values()))}</td>"
        f"<td class=num>{human_bytes(cg.plan.peak_bytes if cg.plan else 0)}</td>"
        f"<td class=num>{human_bytes(eager_peak(cg))}</td></tr>" for i, cg in enumerate(graphs))
    return ("<table><thead><tr><th>graph</th><th>nodes before fusion</th><th>kernels</th><th>extern calls</th>"
            "<th>kernel bytes</th><th>planned peak</th><th>eager peak</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def render_report(graphs, *, title: str = "miniinductor compile report", timings=None,
                  fx_graph_modules=None, compact: bool = False, full_page: bool = True,
                  buffer_errors=None) -> str:
    """The report as HTML text.

    graphs: a CompiledGraph or a list of them (e.g. `explain(...).graphs`).
    timings: {label: milliseconds} or {label: {column: value}} or a list of rows.
    fx_graph_modules: Dynamo's GraphModule per graph (else `cg.fx_graph_module` if set).
    compact: phases collapsed (for notebooks). full_page=False: a <div> fragment.
    buffer_errors: per graph, {buffer: largest error} (`AccuracyReport.buffer_errors()`):
    the kernels tables get a column with each buffer's error.
    """
    graphs = [graphs] if not isinstance(graphs, (list, tuple)) else list(graphs)
    fx_gms = list(fx_graph_modules or []) + [None] * len(graphs)
    errors = list(buffer_errors) if buffer_errors is not None else [None] * len(graphs)
    rid = f"mi-report-{next(_report_ids)}"
    toc = " · ".join(f'<a href="#g{i}">{_esc(cg.graph.name)}</a>' for i, cg in enumerate(graphs))
    body = (f'<div class="mi-report" id="{rid}"><header><h1>{_esc(title)}</h1>'
            f'<nav id="toc">{toc} · <a href="#timings">timings</a></nav></header>'
            f'<section id="summary"><h2>Summary</h2>{_summary(graphs)}</section>'
            + "".join(_graph_section(cg, i, fx_gms[i] or getattr(cg, "fx_graph_module", None), compact, errors[i])
                      for i, cg in enumerate(graphs))
            + f'<section id="timings"><h2>Timings</h2>{_timings_section(timings)}</section>'
            + f"<style>{CSS}{pass_viewer.CSS}</style><script>{JS.replace('__RID__', rid)}"
            + f"{pass_viewer.JS.replace('__RID__', rid)}</script></div>")
    if not full_page:
        return body
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_esc(title)}</title></head><body>{body}</body></html>\n")


def write_report(graphs, path, **kwargs) -> Path:
    """Write `render_report(graphs, **kwargs)` to `path`; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(graphs, **kwargs), encoding="utf-8")
    return path


CSS = """
.mi-report {
  font:14px/1.45 -apple-system,'Segoe UI',Helvetica,Arial,sans-serif; color:#222; margin:0 auto;
  padding:8px 16px; max-width:none; }
.mi-report h1{font-size:22px;margin:4px 0}
.mi-report h2{font-size:18px;border-bottom:2px solid #1565c0;padding-bottom:2px;margin-top:28px}
.mi-report h3{font-size:15px;margin:18px 0 6px}
.mi-report a{color:#1565c0;text-decoration:none}
.mi-report a:hover{text-decoration:underline}
.mi-report pre{font:12px/1.4 ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,monospace;margin:0;white-space:pre}
.mi-report code{font:12px ui-monospace,'DejaVu Sans Mono',monospace;background:#f3f3f3;padding:0 3px}
.mi-report table{border-collapse:collapse;margin:6px 0;font-size:13px}
.mi-report th,.mi-report td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
.mi-report th{background:#f5f7fa}
.mi-report td.num{text-align:right;font-variant-numeric:tabular-nums}
.mi-report .muted{color:#777}
.mi-report .note{background:#fff8e1;border-left:3px solid #f9a825;padding:4px 8px;margin:4px 0}
.mi-report .phases {
  display:grid;
  grid-template-columns:minmax(200px,.8fr) minmax(240px,1.1fr) minmax(260px,1.2fr) minmax(220px,.9fr) minmax(300px,1.4fr);
  gap:8px; overflow-x:auto; }
.mi-report .col {
  border:1px solid #cfd8dc; border-radius:6px; min-width:0; display:flex; flex-direction:column;
  background:#fff; }
.mi-report .col.wide{grid-column:span 2}
.mi-report .col h3 {
  margin:0; padding:5px 8px; background:#eceff1; border-radius:6px 6px 0 0; font-size:13px; cursor:pointer; }
.mi-report .colbody{overflow:auto;max-height:min(75vh,950px);padding:4px 6px}
.mi-report .ln{display:block}
.mi-report .loc{color:#888}
.mi-report table.source td.loc{white-space:nowrap}
.mi-report pre.ir{border-bottom:1px dashed #e0e0e0;padding:2px 0}
.mi-report pre.dead{color:#aaa}
.mi-report .kcard {
  border:1px solid #90caf9; background:#e3f2fd; border-radius:5px; padding:4px 6px; margin:0 0 6px;
  font-size:12px; }
.mi-report .kcard.extern{border-color:#ffb74d;background:#fff3e0}
.mi-report .kname{font-weight:600}
.mi-report .tag{background:#fff59d;border-radius:3px;padding:0 3px;font-size:11px}
.mi-report .code{margin-bottom:8px}
.mi-report .code .kname{background:#f5f5f5;padding:1px 4px}
.mi-report .hl{background:#fff59d !important;outline:1px solid #fbc02d}
.mi-report.pinned .hl{background:#ffe082 !important}
.mi-report .fg{overflow:auto;max-height:90vh;border:1px solid #eee}
.mi-report .fg svg{max-width:100%;height:auto}
.mi-report .fg.actual svg{max-width:none}
.mi-report .legend .sw {
  display:inline-block; width:22px; height:0; border-top:3px solid; vertical-align:middle; margin:0 3px 0 10px; }
.mi-report .sw.fused{border-color:#2e7d32}
.mi-report .sw.memory{border-top-style:dashed;border-color:#c62828}
.mi-report .sw.input{border-color:#9e9e9e;border-top-width:1px}
.mi-report .yes{color:#2e7d32;font-weight:600}
.mi-report .no{color:#c62828;font-weight:600}
.mi-report .memchart{max-width:100%;height:auto}
.mi-report .memchart .axis{font-size:10px;fill:#555}
.mi-report .memchart .lbl{font-size:11px}
.mi-report .memchart rect:hover{fill:rgba(21,101,192,.08)}
.mi-report button{font-size:12px;padding:1px 8px;cursor:pointer}
.mi-report .filters button.on{background:#1565c0;color:#fff}
.mi-report nav{color:#777}
"""

JS = r"""
(function () {
  var root = document.getElementById('__RID__');
  if (!root) { return; }
  var pinned = null;
  function keysOf(el) {
    var k = el.getAttribute('data-k');
    return k ? k.split(' ') : [];
  }
  function clear() {
    var lit = root.querySelectorAll('.hl');
    for (var i = 0; i < lit.length; i++) { lit[i].classList.remove('hl'); }
  }
  function light(keys, scroll) {
    clear();
    var first = {};
    keys.forEach(function (key) {
      var els = root.querySelectorAll('[data-k~="' + key.replace(/"/g, '') + '"]');
      for (var i = 0; i < els.length; i++) {
        els[i].classList.add('hl');
        var body = els[i].closest('.colbody');
        if (scroll && body && !first[body.parentNode.querySelector('h3').textContent]) {
          first[body.parentNode.querySelector('h3').textContent] = true;
          body.scrollTop = els[i].offsetTop - body.offsetTop - 20;
        }
      }
    });
  }
  root.addEventListener('mouseover', function (ev) {
    if (pinned) { return; }
    var el = ev.target.closest ? ev.target.closest('[data-k]') : null;
    if (el && root.contains(el)) { light(keysOf(el), false); } else { clear(); }
  });
  root.addEventListener('click', function (ev) {
    var t = ev.target;
    if (t.matches('.col h3')) { t.parentNode.classList.toggle('wide'); return; }
    if (t.matches('button.fit')) {
      var fg = t.closest('section').querySelector('.fg');
      fg.classList.toggle('actual');
      t.textContent = fg.classList.contains('actual') ? 'fit to width' : 'actual size';
      return;
    }
    if (t.matches('.filters button')) {
      var which = t.getAttribute('data-filter');
      var table = t.closest('section').querySelector('table.decisions');
      var rows = table.querySelectorAll('tbody tr');
      for (var i = 0; i < rows.length; i++) {
        rows[i].style.display = (which === 'all' || rows[i].classList.contains(which)) ? '' : 'none';
      }
      var buttons = t.parentNode.querySelectorAll('button');
      for (var j = 0; j < buttons.length; j++) { buttons[j].classList.toggle('on', buttons[j] === t); }
      return;
    }
    if (t.closest('a')) { return; }
    var el = t.closest('[data-k]');
    if (!el || !root.contains(el)) { pinned = null; root.classList.remove('pinned'); clear(); return; }
    var key = keysOf(el).join(' ');
    if (pinned === key) { pinned = null; root.classList.remove('pinned'); clear(); return; }
    pinned = key;
    root.classList.add('pinned');
    light(keysOf(el), true);
  });
  // a link to report.html#pin=g0:kernel2 opens with that kernel pinned
  var m = /^#pin=(.+)$/.exec(window.location.hash || '');
  if (m) {
    pinned = decodeURIComponent(m[1]);
    root.classList.add('pinned');
    light(pinned.split(' '), true);
  }
  var marker = document.createElement('span');
  marker.id = 'report-js-ok';
  marker.hidden = true;
  root.appendChild(marker);
  root.setAttribute('data-js-ready', '1');
})();
"""
