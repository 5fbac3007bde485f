"""bench.html: a lab bench as one self-contained page (inline SVG, no script): per case, the step
time measured in each round and the planner's prediction as bars on one scale, then the table
of bench.json. Standard library only. Made by `bench.sh` beside bench.json; again from a
bench.json with  python3 scripts/lab/labkit/bench_html.py OUT/bench.json  (docs/pictures.md)."""
import html
import json
import os
import sys

ROUND_COLOURS = ["#1f77b4", "#4a90c8", "#7aaad8", "#a5c4e6", "#c9dcf0"]
PREDICTED = "#999999"
STYLE = """
body{font:14px/1.4 system-ui,sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1240px;margin:0 auto;padding:12px 20px 40px}
h1{font-size:20px;margin:10px 0 4px}h2{font-size:16px;margin:22px 0 6px;border-bottom:1px solid #ddd}
svg{max-width:100%;height:auto;display:block;background:#fff}
svg text{font:11px system-ui,sans-serif;fill:#333}
table{border-collapse:collapse;margin:6px 0;max-width:100%}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;overflow-wrap:anywhere}
th{background:#f0f0f0}td.n{text-align:right}
.legend{display:flex;flex-wrap:wrap;gap:2px 14px;margin:4px 0;font-size:12px}
.sw{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
.bad{color:#a33;font-weight:600}
"""


def esc(text):
    return html.escape(str(text), quote=True)


def num(v):
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def bars_svg(cases, rounds_ms, predicted_ms, width=1000):
    """One group of bars per case: round 1..N measured, then predicted; shared scale in ms."""
    label_w, row_h, top = 110, 15, 20
    values = [v for c in cases for v in rounds_ms.get(c, [])] + [v for v in predicted_ms.values()]
    scale = max(values, default=1.0) or 1.0
    bar_w = width - label_w - 150
    y = top
    out = []
    for case in cases:
        rows = [(f"round {i + 1}", ROUND_COLOURS[i % len(ROUND_COLOURS)], v, "measured")
                for i, v in enumerate(rounds_ms.get(case, []))]
        if case in predicted_ms:
            rows.append(("predicted", PREDICTED, predicted_ms[case], "predicted"))
        group_h = row_h * max(1, len(rows))
        out.append(f'<g class="case" data-case="{esc(case)}" data-rounds="{len(rounds_ms.get(case, []))}">'
                   f'<text x="{label_w - 8}" y="{num(y + group_h / 2 + 4)}" text-anchor="end" '
                   f'style="font-weight:600">{esc(case)}</text>')
        for name, colour, v, kind in rows:
            w = max(0.0, v) / scale * bar_w
            out.append(f'<rect class="bar" data-kind="{kind}" x="{label_w}" y="{num(y + 1)}" width="{num(w)}" '
                       f'height="{row_h - 3}" fill="{colour}"><title>{esc(case)} {name}: {v:.1f} ms</title></rect>'
                       f'<text x="{num(label_w + w + 4)}" y="{num(y + row_h - 4)}">{name} {v:.1f} ms</text>')
            y += row_h
        out.append("</g>")
        y += 10
    # Axis: ms ticks along the top.
    ticks = []
    step = 10 ** len(str(int(scale))) / 10 if scale >= 1 else 0.1
    while scale / step > 8:
        step *= 2
    t = 0.0
    while t <= scale * 1.0001:
        x = label_w + t / scale * bar_w
        ticks.append(f'<line x1="{num(x)}" x2="{num(x)}" y1="{top - 4}" y2="{num(y - 10)}" stroke="#eee"/>'
                     f'<text x="{num(x)}" y="{top - 8}" text-anchor="middle">{num(t)} ms</text>')
        t += step
    height = y
    return (f'<svg class="bench" viewBox="0 0 {width} {num(height)}" width="{width}" height="{num(height)}" '
            f'xmlns="http://www.w3.org/2000/svg">' + "".join(ticks) + "".join(out) + "</svg>")


def render(bench, title="holmes-train lab bench"):
    """The page for a bench.json dict (measured_s, predicted_s, errors, losses_identical,
    rounds_s, and the optional scenario / placements / summary)."""
    measured = bench.get("measured_s", {})
    predicted = bench.get("predicted_s", {})
    errors = bench.get("errors", {})
    own = bench.get("own_errors") or {}  # each round priced with its own calibration (bench.own_errors)
    rounds = bench.get("rounds_s") or {c: [v] for c, v in measured.items()}
    cases = list(rounds) or list(measured)
    rounds_ms = {c: [v * 1e3 for v in rounds.get(c, [])] for c in cases}
    predicted_ms = {c: v * 1e3 for c, v in predicted.items()}
    body = [f"<h1>{esc(title)}</h1>"]
    if bench.get("scenario"):
        body.append(f"<p>{esc(bench['scenario'])}</p>")
    identical = bench.get("losses_identical")
    if identical is not None:
        body.append("<p>losses: bit-identical in every run</p>" if identical
                    else '<p class="bad">losses DIFFER between runs (see the bench log)</p>')
    body.append("<h2>Step time per case: measured in each round, and predicted</h2>")
    legend = [(f"round {i + 1} (measured)", ROUND_COLOURS[i % len(ROUND_COLOURS)])
              for i in range(max((len(v) for v in rounds_ms.values()), default=0))]
    legend.append(("predicted (planner, calibrated on the other cases)", PREDICTED))
    body.append('<div class="legend">' + "".join(f'<span><i class="sw" style="background:{c}"></i>{esc(n)}</span>'
                                                 for n, c in legend) + "</div>")
    body.append(bars_svg(cases, rounds_ms, predicted_ms))
    body.append("<h2>Table</h2><table><tr><th>case</th><th>placement</th><th>measured ms (median)</th>"
                "<th>predicted ms</th><th>error</th><th>error with its own calibration</th><th>per-round ms</th></tr>")
    placements = bench.get("placements", {})
    for c in cases:
        pred = f"{predicted_ms[c]:.1f}" if c in predicted_ms else "-"
        err = f"{errors[c] * 100:+.1f}%" if c in errors else "-"
        mine = f"{own[c] * 100:+.1f}%" if c in own else "-"
        per = " ".join(f"{v:.0f}" for v in rounds_ms.get(c, []))
        m = f"{measured[c] * 1e3:.1f}" if c in measured else "-"
        body.append(f'<tr class="case-row" data-case="{esc(c)}"><td>{esc(c)}</td><td>{esc(placements.get(c, ""))}</td>'
                    f'<td class="n">{m}</td><td class="n">{pred}</td><td class="n">{err}</td><td class="n">{mine}</td>'
                    f'<td>{per}</td></tr>')
    body.append("</table>")
    if bench.get("summary"):
        body.append(f"<p>{esc(bench['summary'])}</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{STYLE}</style></head><body><main>\n"
            + "\n".join(body) + "\n</main></body></html>\n")


def write(bench_json_path, out_path=None):
    with open(bench_json_path) as f:
        bench = json.load(f)
    out_path = out_path or os.path.join(os.path.dirname(bench_json_path) or ".", "bench.html")
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(render(bench))
    os.replace(tmp, out_path)
    return out_path


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print("usage: bench_html.py BENCH_JSON [OUT_HTML]", file=sys.stderr)
        sys.exit(2)
    try:
        print(f"lab: wrote {write(*sys.argv[1:])}")
    except (OSError, ValueError) as e:
        print(f"bench_html: {sys.argv[1]}: {e}", file=sys.stderr)
        sys.exit(2)
