"""The report's pass viewer: step through every pass of one compile, before → after.

Phase 7 (debug). In: a `CompiledGraph` whose `PassRecord`s hold the stage's object printed
before and after each pass (option `pass_snapshots`, which `miniinductor.explain` and the
report's commands turn on), plus the capture's own records (the `capture` and `joint_graph`
stages run in AOTAutograd's Context, before the graph is split off; capture/aot.py leaves
them in Dynamo's graph's `meta["capture_passes"]`). Out: an HTML fragment for the report
(report.py puts it in each graph's "Passes" section) with its CSS and JS:

  * the pass list, in pipeline order: every pass, marked changed, "no change", "off"
    (not run: its extension or option is off) or "no snapshot" (its object is a callable,
    or the compile kept no snapshots); the last three are dimmed;
  * for the pass shown, the unified diff of its before and after (difflib, computed here, so
    the page needs no library), lines added and removed highlighted, with context lines;
    and the full before or after on demand (kept once per distinct text, in a JSON block);
  * keys: j / → next pass, k / ← previous, n / p next / previous pass that changed
    something, d / b / a the diff / before / after; "skip" makes j and k skip what is dimmed.

Mirrors tinygrad's `VIZ=1` rewrite viewer (each graph rewrite listed, the graph before and
after it, the difference highlighted) and the per-pass dumps of Inductor's debug dir
(`TORCH_COMPILE_DEBUG=1`: fx_graph_readable.py, ir_pre_fusion.txt, ir_post_fusion.txt,
output_code.py). Simplified: text, not drawn graphs; a snapshot is what `passes.snapshot`
printed at compile time, cut at MAX_LINES lines, and a diff at MAX_DIFF_LINES (both say so).
"""
from __future__ import annotations

import difflib
import html
import itertools
import json

_esc = html.escape
MAX_LINES = 3000        # of one snapshot kept on the page
MAX_DIFF_LINES = 1500   # of one diff
CONTEXT = 3             # unchanged lines shown around each change
STATES = {"changed": "changed", "same": "no change", "off": "off", "unseen": "no snapshot"}


def pass_records(cg) -> list:
    """The capture's passes (shared by every graph of one capture), then this graph's own."""
    meta = getattr(getattr(cg, "fx_graph_module", None), "meta", None) or {}
    return list(meta.get("capture_passes") or []) + list(getattr(cg, "passes", None) or [])


def state_of(record) -> str:
    """changed / same / off / unseen (ran, but nothing was printed around it)."""
    if not record.ran:
        return "off"
    if record.before is None and record.after is None:
        return "unseen"
    return "same" if record.before == record.after else "changed"


def cap(text: str, limit: int = MAX_LINES) -> str:
    """`text`, cut after `limit` lines with a line that says how many were left out."""
    lines = text.splitlines()
    if len(lines) <= limit:
        return text
    return "\n".join(lines[:limit] + [f"... {len(lines) - limit} more lines not kept (the page keeps "
                                      f"{limit} lines of a snapshot)"])


def diff_lines(before: str, after: str, context: int = CONTEXT) -> list[tuple[str, str]]:
    """The unified diff as (kind, line): kind is "hunk", "ctx", "add" or "del"; [] if equal."""
    kinds = {"@": "hunk", "+": "add", "-": "del", " ": "ctx"}
    diff = difflib.unified_diff((before or "").splitlines(), (after or "").splitlines(), n=context, lineterm="")
    return [(kinds.get(line[:1], "ctx"), line) for line in itertools.islice(diff, 2, None)]   # past ---/+++


def is_conversion(before: str, after: str) -> bool:
    """Did the pass make a new kind of object (ATen graph → loop IR, kernels → wrapper)?
    Then hardly a line is shared, and the diff is every line of both."""
    a = {line.strip() for line in (before or "").splitlines() if line.strip()}
    b = {line.strip() for line in (after or "").splitlines() if line.strip()}
    return bool(a and b) and len(a & b) < 0.1 * min(len(a), len(b))


def render_diff(before: str, after: str, limit: int = MAX_DIFF_LINES) -> str:
    """The diff as a <pre> of one span per line (class pv-add, pv-del, pv-ctx or pv-hunk)."""
    lines = diff_lines(before, after)
    spans = [f'<span class="pv-{kind}">{_esc(line)}</span>' for kind, line in lines[:limit]]
    if len(lines) > limit:
        spans.append(f'<span class="pv-cut">... {len(lines) - limit} more diff lines not shown (the page keeps '
                     f"{limit}); see before and after</span>")
    if not lines:
        spans.append('<span class="pv-none">(no difference)</span>')
    return f'<pre class="pv-diff">{"".join(spans)}</pre>'


class TextStore:
    """Each distinct snapshot once (most passes change nothing: their before is their after)."""

    def __init__(self):
        self.texts: list[str] = []
        self.index: dict[str, int] = {}

    def add(self, text) -> str:
        if text is None:
            return ""
        if text not in self.index:
            self.index[text] = len(self.texts)
            self.texts.append(cap(text))
        return str(self.index[text])

    def script(self, element_id: str) -> str:
        data = json.dumps(self.texts).replace("<", "\\u003c")   # nothing can close the <script>
        return f'<script type="application/json" class="pv-store" id="{element_id}">{data}</script>'


def _panel(i: int, record, state: str, store: TextStore) -> str:
    head = (f'<h4><span class="pv-stage">{_esc(record.stage)}</span> {_esc(record.name)} '
            f'<span class="muted">({_esc(record.extension)})</span>: {_esc(STATES[state])}'
            + (f" · {_esc(record.change)}" if record.change else "") + "</h4>")
    if state in ("off", "unseen"):
        why = ("It did not run: its extension or option is off for this compile." if state == "off" else
               "It ran, but no snapshot was kept: its stage's object is a callable, or the compile ran "
               "without <code>pass_snapshots=True</code>.")
        return f'<div class="pv-panel" data-i="{i}" data-state="{state}" hidden>{head}<p class="muted">{why}</p></div>'
    before, after = store.add(record.before), store.add(record.after)
    conversion = state == "changed" and is_conversion(record.before, record.after)
    note = ('<p class="muted">A new kind of object: hardly a line is shared, so the diff lists every line; '
            "<b>after</b> shows what it made.</p>" if conversion else "")
    body = render_diff(record.before, record.after) if state == "changed" else (
        '<pre class="pv-diff"><span class="pv-none">(no difference: before and after are the same text)</span></pre>')
    buttons = "".join(f'<button data-view="{v}">{v}</button>' for v in ("diff", "before", "after"))
    return (f'<div class="pv-panel" data-i="{i}" data-state="{state}" data-before="{before}" data-after="{after}" '
            f'data-first-view="{"after" if conversion else "diff"}" hidden>{head}{note}'
            f'<div class="pv-tabs">{buttons}</div>{body}<pre class="pv-full" hidden></pre></div>')


def section(cg, prefix: str) -> str:
    """The pass viewer of one compiled graph (`prefix`: its anchor prefix in the report, g0...)."""
    records, store = pass_records(cg), TextStore()
    states = [state_of(r) for r in records]
    items, panels = [], []
    for i, (record, state) in enumerate(zip(records, states)):
        badge = record.change if state == "changed" and record.change else STATES[state]
        items.append(f'<li class="pv-item {state}" data-i="{i}" id="{prefix}-pass-{i}" title="{_esc(record.name)}">'
                     f'<span class="pv-stage">{_esc(record.stage)}</span> {_esc(record.name)} '
                     f'<span class="pv-badge">{_esc(badge)}</span></li>')
        panels.append(_panel(i, record, state, store))
    notes = []
    if records and all(s in ("off", "unseen") for s in states):
        notes.append("This compile kept no snapshots: compile with <code>pass_snapshots=True</code> "
                     "(<code>miniinductor.explain</code> does) to see each pass's before and after.")
    if not any(r.stage in ("capture", "joint_graph") for r in records):
        notes.append("The capture's passes (stages capture and joint_graph) were not recorded for this graph.")
    notes = "".join(f'<p class="note">{n}</p>' for n in notes)
    help_line = ('<p class="muted pv-keys">Click a pass, or press <kbd>j</kbd>/<kbd>→</kbd> next, <kbd>k</kbd>/<kbd>←'
                 '</kbd> previous, <kbd>n</kbd>/<kbd>p</kbd> next/previous change, <kbd>d</kbd>/<kbd>b</kbd>/<kbd>a'
                 '</kbd> diff/before/after. <label><input type="checkbox" class="pv-skip"> j/k skip passes that '
                 "changed nothing</label></p>")
    return (f'{notes}<div class="pv" id="{prefix}-pv" tabindex="0">{help_line}<div class="pv-body">'
            f'<ol class="pv-list">{"".join(items)}</ol><div class="pv-panels">{"".join(panels)}</div></div>'
            f"{store.script(f'{prefix}-pv-store')}</div>")


CSS = """
.mi-report .pv{outline:none}
.mi-report .pv:focus-within .pv-list,.mi-report .pv:focus .pv-list{border-color:#1565c0}
.mi-report .pv-body{display:grid;grid-template-columns:minmax(340px,26%) 1fr;gap:8px}
.mi-report .pv-list{list-style:none;margin:0;padding:0;border:1px solid #cfd8dc;border-radius:6px;
  max-height:min(80vh,900px);overflow:auto;font-size:12px}
.mi-report .pv-item{padding:2px 6px;cursor:pointer;border-bottom:1px solid #eee;white-space:nowrap}
.mi-report .pv-item:hover{background:#f5f7fa}
.mi-report .pv-item.on{background:#1565c0;color:#fff}
.mi-report .pv-item.off,.mi-report .pv-item.same,.mi-report .pv-item.unseen{color:#999}
.mi-report .pv-item.on.off,.mi-report .pv-item.on.same,.mi-report .pv-item.on.unseen{color:#e3f2fd}
.mi-report .pv-stage{display:inline-block;min-width:78px;color:#607d8b;font-size:11px}
.mi-report .pv-item.on .pv-stage{color:#bbdefb}
.mi-report .pv-badge{font-size:11px;background:#fff59d;color:#333;border-radius:3px;padding:0 3px}
.mi-report .pv-item.off .pv-badge,.mi-report .pv-item.same .pv-badge,.mi-report .pv-item.unseen .pv-badge{
  background:#eee;color:#888}
.mi-report .pv-panels{min-width:0}
.mi-report .pv-panel h4{margin:0 0 4px;font-size:14px}
.mi-report .pv-tabs button.on{background:#1565c0;color:#fff}
.mi-report .pv-diff,.mi-report .pv-full{border:1px solid #eee;max-height:min(75vh,900px);overflow:auto;
  padding:4px;margin-top:4px}
.mi-report .pv-diff span{display:block}
.mi-report .pv-add{background:#e6ffed;color:#1b5e20}
.mi-report .pv-del{background:#ffeef0;color:#b71c1c}
.mi-report .pv-hunk{color:#6a1b9a;background:#f3e5f5}
.mi-report .pv-cut,.mi-report .pv-none{color:#777;font-style:italic}
.mi-report kbd{font:11px ui-monospace,monospace;border:1px solid #bbb;border-radius:3px;padding:0 3px}
"""

JS = r"""
(function () {
  var root = document.getElementById('__RID__');
  if (!root) { return; }
  var viewers = root.querySelectorAll('.pv');
  var DIM = {off: 1, same: 1, unseen: 1};
  function panels(v) { return v.querySelectorAll('.pv-panel'); }
  function current(v) { return parseInt(v.getAttribute('data-current') || '0', 10); }
  function view(panel, which) {
    var diff = panel.querySelector('.pv-diff'), full = panel.querySelector('.pv-full');
    if (!diff) { return; }
    if (which !== 'diff') {
      var v = panel.closest('.pv'), store = v._store || (v._store = JSON.parse(v.querySelector('.pv-store').textContent));
      full.textContent = store[parseInt(panel.getAttribute('data-' + which), 10)];
    }
    diff.hidden = which !== 'diff';
    full.hidden = which === 'diff';
    panel.setAttribute('data-view', which);
    var buttons = panel.querySelectorAll('.pv-tabs button');
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].classList.toggle('on', buttons[i].getAttribute('data-view') === which);
    }
  }
  function show(v, i) {
    var ps = panels(v), items = v.querySelectorAll('.pv-item');
    if (i < 0 || i >= ps.length) { return; }
    for (var k = 0; k < ps.length; k++) { ps[k].hidden = k !== i; items[k].classList.toggle('on', k === i); }
    v.setAttribute('data-current', String(i));
    if (!ps[i].getAttribute('data-view')) { view(ps[i], ps[i].getAttribute('data-first-view') || 'diff'); }
    var list = v.querySelector('.pv-list'), item = items[i];
    if (item.offsetTop < list.scrollTop || item.offsetTop + item.offsetHeight > list.scrollTop + list.clientHeight) {
      list.scrollTop = item.offsetTop - list.offsetTop - list.clientHeight / 2;
    }
  }
  function step(v, by, changedOnly) {
    var ps = panels(v), skip = changedOnly || v.querySelector('.pv-skip').checked;
    for (var i = current(v) + by; i >= 0 && i < ps.length; i += by) {
      var state = ps[i].getAttribute('data-state');
      if (changedOnly ? state === 'changed' : !(skip && DIM[state])) { show(v, i); return; }
    }
  }
  var active = viewers[0] || null;
  for (var n = 0; n < viewers.length; n++) {
    var first = viewers[n].querySelector('.pv-panel[data-state="changed"]');
    show(viewers[n], first ? parseInt(first.getAttribute('data-i'), 10) : 0);
  }
  root.addEventListener('click', function (ev) {
    var v = ev.target.closest('.pv');
    if (!v || !root.contains(v)) { return; }
    active = v;
    window.__miPassViewer = root;
    var item = ev.target.closest('.pv-item'), button = ev.target.closest('.pv-tabs button');
    if (item) { show(v, parseInt(item.getAttribute('data-i'), 10)); }
    if (button) { view(button.closest('.pv-panel'), button.getAttribute('data-view')); }
  });
  var KEYS = {ArrowRight: [1, false], j: [1, false], ArrowLeft: [-1, false], k: [-1, false],
              n: [1, true], p: [-1, true]};
  var VIEWS = {d: 'diff', b: 'before', a: 'after'};
  document.addEventListener('keydown', function (ev) {
    if (!active || ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    // with several reports on a page (a notebook), the keys go to the one clicked last
    var owner = window.__miPassViewer || document.querySelector('.mi-report .pv').closest('.mi-report');
    if (owner !== root) { return; }
    var t = ev.target, tag = t && t.tagName;
    if ((tag === 'INPUT' && t.type !== 'checkbox') || tag === 'TEXTAREA' || tag === 'SELECT' || (t && t.isContentEditable)) {
      return;
    }
    if (KEYS[ev.key]) {
      step(active, KEYS[ev.key][0], KEYS[ev.key][1]);
    } else if (VIEWS[ev.key]) {
      view(panels(active)[current(active)], VIEWS[ev.key]);
    } else { return; }
    ev.preventDefault();
  });
  root.setAttribute('data-pv-ready', String(viewers.length));
})();
"""
