"""The report's pass viewer (tools/debug/pass_viewer.py): its diff rendering, then the real
page in headless Chromium, driven with real key presses and mouse clicks.

Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: it reads
commands on fd 3 and writes answers on fd 4, each a JSON text ended by a NUL byte), so no
websocket or browser-automation library is needed. The browser is found as in
test_report_browser.py.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import select
import subprocess
import time

import pytest
import torch
from test_report_browser import FLAGS, find_chromium

import miniinductor
from miniinductor.compile_fx import collect_compiled
from miniinductor.passes import PassRecord
from miniinductor.tools.debug import pass_viewer
from miniinductor.tools.debug.report import write_report


# --------------------------------------------------------------------------- without a browser
def test_diff_lines_mark_added_removed_and_context():
    before = "a\nb\nc\nd\ne\nf\ng\nh\n"
    after = "a\nb\nc\nD\ne\nf\ng\nh\ni\n"
    kinds = pass_viewer.diff_lines(before, after, context=1)
    assert kinds == [("hunk", "@@ -3,3 +3,3 @@"), ("ctx", " c"), ("del", "-d"), ("add", "+D"), ("ctx", " e"),
                     ("hunk", "@@ -8 +8,2 @@"), ("ctx", " h"), ("add", "+i")]
    assert pass_viewer.diff_lines(before, before) == []


def test_render_diff_escapes_and_highlights():
    page = pass_viewer.render_diff("x = 1\n<b>\n", "x = 2\n<b>\n")
    assert '<span class="pv-del">-x = 1</span>' in page and '<span class="pv-add">+x = 2</span>' in page
    assert '<span class="pv-ctx"> &lt;b&gt;</span>' in page and "<b>" not in page
    assert "(no difference)" in pass_viewer.render_diff("same", "same")
    long = pass_viewer.render_diff("", "\n".join(map(str, range(50))), limit=10)
    assert long.count('class="pv-add"') == 9 and "41 more diff lines not shown (the page keeps 10)" in long


def test_states_caps_and_the_store():
    assert pass_viewer.state_of(PassRecord("s", "p", "core", False)) == "off"
    assert pass_viewer.state_of(PassRecord("s", "p", "core", True)) == "unseen"
    assert pass_viewer.state_of(PassRecord("s", "p", "core", True, "", "a", "a")) == "same"
    assert pass_viewer.state_of(PassRecord("s", "p", "core", True, "", "a", "b")) == "changed"
    capped = pass_viewer.cap("\n".join(map(str, range(10))), limit=4)
    assert capped.splitlines()[:4] == ["0", "1", "2", "3"] and "6 more lines not kept" in capped
    store = pass_viewer.TextStore()
    assert [store.add("x"), store.add("y"), store.add("x"), store.add(None)] == ["0", "1", "0", ""]
    store.add("</script><!--")
    script = store.script("s")   # nothing inside can end the <script> element
    assert script.count("</script>") == 1 and "<!--" not in script
    assert json.loads(script[script.index(">") + 1:-len("</script>")]) == ["x", "y", "</script><!--"]
    assert pass_viewer.is_conversion("def f():\n  return 1\n", "buf0 = x\nbuf1 = y\n")
    assert not pass_viewer.is_conversion("a\nb\nc\n", "a\nb\nd\n")


def test_section_shows_each_state():
    class Graph:   # what section() reads of a CompiledGraph
        fx_graph_module = None
        passes = [PassRecord("aten_graph", "rewrite", "core", True, "1 rewritten", "x = a\ny = b\n", "x = a\ny = c\n"),
                  PassRecord("schedule", "idle", "core", True, "", "g\n", "g\n"),
                  PassRecord("loop_ir", "split", "triton", False),
                  PassRecord("runtime", "call", "core", True)]
    page = pass_viewer.section(Graph(), "g0")
    assert [m for m in re.findall(r'class="pv-item (\w+)"', page)] == ["changed", "same", "off", "unseen"]
    assert '<span class="pv-del">-y = b</span><span class="pv-add">+y = c</span>' in page
    assert "(no difference: before and after are the same text)" in page
    assert "capture and joint_graph) were not recorded" in page
    store = json.loads(re.search(r'<script type="application/json"[^>]*>(.*?)</script>', page).group(1))
    assert store == ["x = a\ny = b\n", "x = a\ny = c\n", "g\n"]


# --------------------------------------------------------------------------- Chromium, by DevTools
class Browser:
    """One headless Chromium with one page, commanded over the DevTools pipe."""

    def __init__(self, tmp_path):
        self.ours, theirs = os.pipe(), os.pipe()   # (we read, it writes on fd 4), (it reads fd 3, we write)
        to_it, self.to_it = theirs
        self.from_it, from_it_write = self.ours

        def fds():   # in the child: fd 3 reads our commands, fd 4 writes its answers
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_it, from_it_write)]   # either may be 3 or 4
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)
        profile = tmp_path / "profile"
        profile.mkdir()
        self.log = open(tmp_path / "chromium.log", "w")
        self.proc = subprocess.Popen([find_chromium(), *FLAGS, "--remote-debugging-pipe", "--window-size=1400,1000",
                                      f"--user-data-dir={profile}", "about:blank"],
                                     preexec_fn=fds, close_fds=False, stdout=self.log, stderr=self.log)
        os.close(to_it)
        os.close(from_it_write)
        self.buffer, self.next_id, self.events = b"", 0, []
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime"):
            self.send(f"{domain}.enable", session=True)

    def _read(self, timeout=60.0) -> dict:
        while b"\0" not in self.buffer:
            ready, _, _ = select.select([self.from_it], [], [], timeout)
            chunk = os.read(self.from_it, 1 << 20) if ready else b""
            assert chunk, f"chromium stopped answering (exit code {self.proc.poll()})"
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, session=False, **params) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self.to_it, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self.next_id:
                assert "error" not in answer, f"{method}: {answer['error']}"
                return answer.get("result", {})
            self.events.append(answer)

    def open(self, url: str):
        self.send("Page.navigate", session=True, url=url)
        deadline = time.time() + 60
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            assert time.time() < deadline, "the page did not load"
            self.events.append(self._read())

    def js(self, expression: str):
        result = self.send("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def key(self, key: str):
        arrow = key.startswith("Arrow")
        common = {"key": key, "code": key if arrow else f"Key{key.upper()}",
                  "windowsVirtualKeyCode": {"ArrowRight": 39, "ArrowLeft": 37}.get(key) or ord(key.upper())}
        self.send("Input.dispatchKeyEvent", session=True, type="keyDown", **common, **({} if arrow else {"text": key}))
        self.send("Input.dispatchKeyEvent", session=True, type="keyUp", **common)

    def click(self, selector: str):
        box = self.js(f"(function () {{ var el = document.querySelector({json.dumps(selector)});"
                      "el.scrollIntoView({block: 'center'}); var r = el.getBoundingClientRect();"
                      "return [r.left + Math.min(r.width / 2, 40), r.top + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", session=True, type=kind, x=box[0], y=box[1], button="left",
                      clickCount=1)

    def errors(self) -> list:
        return [e for e in self.events if e.get("method") == "Runtime.exceptionThrown"
                or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))]

    def close(self):
        self.proc.kill()
        self.proc.wait()
        os.close(self.to_it)
        os.close(self.from_it)
        self.log.close()


class Small(torch.nn.Module):
    """A fusion (bias add, GELU and a softmax in few kernels) and a value nothing reads."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x):
        unused = x.exp()   # noqa: F841  (dead: gone before the scheduler)
        return torch.nn.functional.gelu(self.linear(x)).softmax(-1) * 2


@pytest.fixture(scope="module")
def compiled():
    """The forward and backward graphs of a training step (the joint graph's passes run too)."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    x = torch.randn(4, 16, requires_grad=True)
    with collect_compiled() as graphs:
        miniinductor.compile(Small(), pass_snapshots=True)(x).sum().backward()
    return graphs


@pytest.fixture(scope="module")
def report(compiled, tmp_path_factory):
    return write_report(compiled, tmp_path_factory.mktemp("pv") / "report.html")


@pytest.fixture
def browser(tmp_path):
    b = Browser(tmp_path)
    yield b
    b.close()


STATE = """(function () {
  var v = document.getElementById('%s-pv'), i = v.getAttribute('data-current');
  var panel = v.querySelector('.pv-panel[data-i="' + i + '"]'), on = v.querySelectorAll('.pv-item.on');
  var full = panel.querySelector('.pv-full'), diff = panel.querySelector('.pv-diff');
  return {i: +i, on: on.length === 1 ? on[0].getAttribute('data-i') : null, hidden: panel.hidden,
          view: panel.getAttribute('data-view'), state: panel.getAttribute('data-state'),
          marked: diff ? diff.querySelectorAll('.pv-add, .pv-del').length : null,
          diffShown: diff ? !diff.hidden : false, full: full && !full.hidden ? full.textContent : null};
})()"""


def check(browser, g: int, i: int, record):
    """Pass `i` of graph `g` is the one shown; its before and after are on the page; its diff
    marks lines exactly when its record's before and after differ."""
    state = browser.js(STATE % f"g{g}")
    assert (state["i"], state["on"], state["hidden"]) == (i, str(i), False), (record.name, state)
    assert state["state"] == pass_viewer.state_of(record), (record.name, state)
    if state["state"] in ("off", "unseen"):
        assert state["marked"] is None and record.before is None and record.after is None
        return
    assert (state["marked"] > 0) == (record.before != record.after), (record.name, state)
    for key, text in (("b", record.before), ("a", record.after)):
        browser.key(key)
        shown = browser.js(STATE % f"g{g}")
        assert shown["full"] == pass_viewer.cap(text) and not shown["diffShown"], (record.name, key)
    browser.key("d")
    assert browser.js(STATE % f"g{g}")["diffShown"]


def test_keys_step_through_every_pass(compiled, report, browser):
    browser.open(report.as_uri())
    assert browser.js("document.querySelector('.mi-report').getAttribute('data-pv-ready')") == str(len(compiled))
    assert [cg.graph.name for cg in compiled] == ["forward", "backward"]
    for g, cg in enumerate(compiled):
        records = pass_viewer.pass_records(cg)
        stages = {"aten_graph", "lowering", "schedule", "codegen", "wrapper"} | {"joint_graph"}
        assert stages <= {r.stage for r in records}
        browser.click(f"#g{g}-pass-0")
        for i, record in enumerate(records):
            if i:
                browser.key("j" if i % 2 else "ArrowRight")
            check(browser, g, i, record)
        browser.key("ArrowRight")   # past the last pass: stays
        assert browser.js(STATE % f"g{g}")["i"] == len(records) - 1
        browser.key("k")
        browser.key("ArrowLeft")
        assert browser.js(STATE % f"g{g}")["i"] == len(records) - 3
    assert browser.errors() == []


def test_clicks_and_skipping(compiled, report, browser):
    browser.open(report.as_uri())
    records = pass_viewer.pass_records(compiled[0])
    assert any(pass_viewer.state_of(r) == "changed" for r in records if r.name == "fuse")
    changed = [i for i, r in enumerate(records) if pass_viewer.state_of(r) == "changed"]
    for i in changed:
        browser.click(f"#g0-pass-{i}")
        for view, text in (("before", records[i].before), ("after", records[i].after)):
            browser.click(f'#g0-pv .pv-panel[data-i="{i}"] button[data-view="{view}"]')
            assert browser.js(STATE % "g0")["full"] == pass_viewer.cap(text)
        browser.click(f'#g0-pv .pv-panel[data-i="{i}"] button[data-view="diff"]')
        state = browser.js(STATE % "g0")
        assert state["diffShown"] and state["marked"] > 0 and state["i"] == i
    browser.click("#g0-pass-0")   # n / p: the next and previous pass that changed something
    for i in changed[changed[0] == 0:]:
        browser.key("n")
        assert browser.js(STATE % "g0")["i"] == i
    browser.key("p")
    assert browser.js(STATE % "g0")["i"] == changed[-2]
    browser.click("#g0-pv .pv-skip")   # j skips what is dimmed: off, no change, no snapshot
    browser.click("#g0-pass-0")
    browser.key("j")
    assert browser.js(STATE % "g0")["i"] == changed[changed[0] == 0]
    assert browser.errors() == []
