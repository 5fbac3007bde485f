#!/usr/bin/env python3
"""Renders a holmes-train page (plan, run report, lab bench) in headless Chromium and checks it
from the DOM after layout: the islands, stages and curves it must hold, and that no element
lies outside the page (left of it, above it, past the window's width, or outside the SVG that
draws it). The page itself has no script: a copy of it gets one inline script that measures
the layout and writes the result into the DOM, which `chromium --dump-dom` prints.

  page_check.py PAGE [--screenshot OUT.png] [--islands N] [--stages N] [--nodes N]
                [--curve SERIES=POINTS]... [--cases N] [--stragglers "rank 3,replica 1"] [--time]

Exit 0 when every check holds, 1 when one fails, 77 (and a HOLMES_SKIP line) without Chromium.
--time prints how long the page took from navigation to its first frame after load, and
Chromium's wall time for the page against an empty one (a benchmark, not a check)."""
import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

WIDTH = 1280
PROBE = r"""
<script>
window.addEventListener('load', () => setTimeout(() => {
  const out = {islands: [], stages: [], nodes: 0, ranks: 0, cases: 0, curves: {}, outside: [], checked: 0};
  out.render_ms = performance.now();
  try {
  document.querySelectorAll('.island').forEach(e => out.islands.push(e.getAttribute('data-island')));
  document.querySelectorAll('tr.stage').forEach(e => out.stages.push(e.getAttribute('data-stage')));
  out.nodes = document.querySelectorAll('.node').length;
  out.ranks = document.querySelectorAll('.rank').length;
  out.cases = document.querySelectorAll('g.case').length;
  out.stragglers = Array.from(document.querySelectorAll('tr.straggler')).map(
      e => e.getAttribute('data-kind') + ' ' + e.getAttribute('data-id'));
  document.querySelectorAll('polyline.curve').forEach(e => {
    const pts = (e.getAttribute('points') || '').trim();
    const n = pts ? pts.split(/\s+/).length : 0;
    const k = e.getAttribute('data-series');
    (out.curves[k] = out.curves[k] || []).push(n);
  });
  const W = document.documentElement.clientWidth;
  const sx = window.scrollX, sy = window.scrollY;
  const name = e => e.tagName.toLowerCase() + (e.getAttribute('class') ? '.' + e.getAttribute('class') : '') +
      (e.id ? '#' + e.id : '');
  for (const e of document.body.querySelectorAll('*')) {
    if (e.id === 'holmes-check' || e.tagName === 'SCRIPT' || e.tagName === 'title' || e.closest('title')) continue;
    const r = e.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    out.checked++;
    const left = r.left + sx, top = r.top + sy, right = r.right + sx;
    let bad = left < -1 || top < -1 || right > W + 1;
    const svg = e.ownerSVGElement;
    if (!bad && svg) {
      const s = svg.getBoundingClientRect();
      bad = r.left < s.left - 1 || r.top < s.top - 1 || r.right > s.right + 1 || r.bottom > s.bottom + 1;
    }
    if (bad && out.outside.length < 20)
      out.outside.push(name(e) + ' at ' + [r.left, r.top, r.right, r.bottom].map(Math.round).join(',') +
                       (svg ? ' (svg ' + [svg.getBoundingClientRect().left, svg.getBoundingClientRect().top,
                        svg.getBoundingClientRect().right, svg.getBoundingClientRect().bottom].map(Math.round).join(',') + ')' : '') +
                       ': ' + (e.textContent || '').slice(0, 40));
  }
  out.height = Math.ceil((document.querySelector('main') || document.body).getBoundingClientRect().bottom + sy + 12);
  out.scroll_width = document.documentElement.scrollWidth;
  out.width = W;
  } catch (err) { out.error = String(err); }
  const pre = document.createElement('pre');
  pre.id = 'holmes-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 0));
</script>
"""


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_browser(exe, args, timeout=120):
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           "--disable-extensions", "--disable-dev-shm-usage", "--user-data-dir=" + args[0]] + args[1:]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def measure(exe, page, profile):
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.html")
        with open(page, encoding="utf-8") as f:
            text = f.read()
        at = text.rfind("</body>")
        text = text[:at] + PROBE + text[at:] if at >= 0 else text + PROBE
        with open(probe, "w", encoding="utf-8") as f:
            f.write(text)
        r = run_browser(exe, [profile, f"--window-size={WIDTH},900", "--virtual-time-budget=10000", "--dump-dom",
                              "file://" + probe])
        m = re.search(r'<pre id="holmes-check">(.*?)</pre>', r.stdout, re.S)
        if not m:
            raise SystemExit(f"page_check: {page}: Chromium printed no check result (exit {r.returncode}):\n"
                             f"{r.stderr[-2000:]}")
        got = json.loads(html.unescape(m.group(1)))
        if got.get("error"):
            raise SystemExit(f"page_check: {page}: the layout probe failed: {got['error']}")
        return got


def screenshot(exe, page, out, height, profile):
    height = max(300, min(int(height) + 20, 8000))
    r = run_browser(exe, [profile, f"--window-size={WIDTH},{height}", "--screenshot=" + os.path.abspath(out),
                          "file://" + os.path.abspath(page)])
    if r.returncode != 0 or not os.path.exists(out):
        raise SystemExit(f"page_check: screenshot of {page} failed ({r.returncode}): {r.stderr[-1000:]}")


def wall(exe, page, profile):
    t = time.monotonic()
    run_browser(exe, [profile, f"--window-size={WIDTH},900", "--screenshot=/dev/null", "file://" + page])
    return time.monotonic() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--screenshot")
    ap.add_argument("--islands", type=int)
    ap.add_argument("--stages", type=int)
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--cases", type=int)
    ap.add_argument("--stragglers", help="the straggler table's rows, 'KIND ID' comma-separated ('' for none)")
    ap.add_argument("--curve", action="append", default=[], help="SERIES=POINTS: every curve of SERIES has POINTS")
    ap.add_argument("--time", action="store_true")
    a = ap.parse_args()
    exe = chromium()
    if not exe:
        print("HOLMES_SKIP: no Chromium (scripts/setup.sh installs Debian's chromium): the pages are not rendered")
        return 77
    page = os.path.abspath(a.page)
    failures = []
    with tempfile.TemporaryDirectory() as profile:
        got = measure(exe, page, profile)
        def want(what, expected, seen):
            if expected is not None and expected != seen:
                failures.append(f"{what}: {seen}, expected {expected}")
        want("islands", a.islands, len(got["islands"]))
        want("distinct islands", a.islands, len(set(got["islands"])))
        want("stages", a.stages, len(got["stages"]))
        if a.stages is not None:
            want("stage numbers", [str(s) for s in range(a.stages)], got["stages"])
        want("nodes", a.nodes, got["nodes"])
        want("lab cases", a.cases, got["cases"])
        if a.stragglers is not None:
            want("straggler rows", sorted(x.strip() for x in a.stragglers.split(",") if x.strip()),
                 sorted(got["stragglers"]))
        for c in a.curve:
            series, n = c.rsplit("=", 1)
            seen = got["curves"].get(series)
            if not seen:
                failures.append(f"curve '{series}': not on the page (curves: {sorted(got['curves'])})")
            elif any(k != int(n) for k in seen):
                failures.append(f"curve '{series}': {seen} points, expected {n}")
        if got["outside"]:
            failures.append(f"{len(got['outside'])}+ element(s) outside the page: " + "; ".join(got["outside"]))
        if got["scroll_width"] > got["width"] + 1:
            failures.append(f"the page scrolls sideways: {got['scroll_width']} px wide in a {got['width']} px window")
        if a.screenshot:
            screenshot(exe, page, a.screenshot, got["height"], profile)
        print(f"page_check: {a.page}: {got['checked']} elements laid out inside the page, islands {len(got['islands'])}, "
              f"stages {len(got['stages'])}, stragglers {got['stragglers']}, nodes {got['nodes']}, ranks {got['ranks']}, curves "
              + ", ".join(f"{k}={v}" for k, v in sorted(got["curves"].items())) + f", height {got['height']} px")
        if a.time:
            with tempfile.TemporaryDirectory() as tmp:
                empty = os.path.join(tmp, "empty.html")
                with open(empty, "w") as f:
                    f.write("<!DOCTYPE html><html><body></body></html>")
                base = min(wall(exe, empty, profile) for _ in range(3))
                full = min(wall(exe, page, profile) for _ in range(3))
            print(f"page_check: {a.page}: {os.path.getsize(page)} bytes; navigation to the first frame after load "
                  f"{got['render_ms']:.0f} ms (in the page); Chromium screenshot {full:.2f} s against {base:.2f} s for "
                  f"an empty page (+{full - base:.2f} s)")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
