"""The reliability diagram as a self-contained SVG (:func:`reliability_svg`)."""

from __future__ import annotations

from xml.sax.saxutils import escape

from halucheck.verifiers.calibration.metrics import ECE_BINS, as_arrays, expected_calibration_error, reliability_table
from halucheck.verifiers.calibration.record import finite_or_none, format_score

COLORS = ("#d95f02", "#1b9e77")  # colour-blind-safe pair (ColorBrewer Dark2)


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if abs(v - round(v, 1)) < 1e-9 else f"{v:.2f}"


def reliability_svg(
    scores,
    labels,
    bins: int = ECE_BINS,
    title: str = "",
    calibrated=None,
    names: tuple[str, str] = ("raw", "calibrated"),
) -> str:
    """A self-contained SVG reliability diagram (no script, no external font or link).

    Per equal-width bin of P(hallucinated), a bar up to the observed share of hallucinated items, a
    dark tick at the bin's mean predicted P, and the bin's item count under the axis; the dashed
    diagonal is perfect calibration. With ``calibrated`` (the same items' calibrated scores) the two
    series are drawn side by side in two colours with a legend (``names``). The caption gives each
    series' ECE over the same ``bins``. Bars carry ``data-series``, ``data-bin``, ``data-n`` and
    ``data-observed``; count labels ``data-series`` and ``data-bin``.

    Each bar also has a consistency bar (Bröcker & Smith 2007): the range, 5th to 95th percentile, in
    which the observed share of its ``n`` items falls nine times in ten when the predicted P is right
    (``Binomial(n, mean predicted P) / n``). A bar top outside it is a miscalibration the sample shows;
    inside, the gap to the diagonal may be chance. Whiskers carry ``data-series``, ``data-bin``,
    ``data-lo`` and ``data-hi``.
    """
    from scipy.stats import binom

    series = [(names[0], scores)] + ([(names[1], calibrated)] if calibrated is not None else [])
    tables, eces = [], []
    n_items = None
    for _, sc in series:
        s, y = as_arrays(sc, labels)
        if n_items is not None and s.size != n_items:
            raise ValueError("calibrated scores must be as many as the raw ones")
        n_items = s.size
        tables.append(reliability_table(s, y, bins))
        eces.append(expected_calibration_error(s, y, bins))
    rows = len(series)

    # layout, top to bottom: title, plot, tick labels, one count row per series, axis title, legend, caption
    left, pw, ph = 64, 420, 300
    top = 44 if title else 20
    # the legend's run of swatches and words (about 7 px a character at 11 px) may widen the picture
    legend_end = (left + sum(14 + 7 * len(name) + 16 for name, _ in series) + (16 + 7 * 16 + 16) + (12 + 7 * 13 + 16)
                  + 18 + 7 * 19)
    width = max(left + pw + 24, legend_end + 8)
    tick_y = top + ph + 14
    count_y = [tick_y + 16 + 14 * r for r in range(rows)]
    axis_y = count_y[-1] + 18
    legend_y = axis_y + 20
    caption_y = legend_y + 22
    height = caption_y + 14
    X = lambda v: left + v * pw  # noqa: E731
    Y = lambda v: top + (1 - v) * ph  # noqa: E731
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" font-family="sans-serif" font-size="11">',
        f"<title>{escape(title or 'Reliability diagram')}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    if title:
        out.append(f'<text x="{width / 2:.1f}" y="26" text-anchor="middle" font-size="14" '
                   f'font-weight="bold">{escape(title)}</text>')
    for i in range(6):  # grid and tick labels every 0.2
        v = i / 5
        out.append(f'<line x1="{X(0):.1f}" y1="{Y(v):.1f}" x2="{X(1):.1f}" y2="{Y(v):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{X(0) - 6:.1f}" y="{Y(v) + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
        out.append(f'<text x="{X(v):.1f}" y="{tick_y:.1f}" text-anchor="middle">{_fmt(v)}</text>')
    gap = 0.08 / bins
    bw = (1 / bins - 2 * gap) / rows
    for r, table in enumerate(tables):
        color = COLORS[r % len(COLORS)]
        for row in table:
            x0 = row["lo"] + gap + r * bw
            if row["n"]:
                obs, mean = row["observed"], row["mean_score"]
                out.append(
                    f'<rect class="bar" data-series="{r}" data-bin="{row["bin"]}" data-n="{row["n"]}" '
                    f'data-observed="{obs:.4f}" x="{X(x0):.2f}" y="{Y(obs):.2f}" width="{bw * pw:.2f}" '
                    f'height="{(Y(0) - Y(obs)):.2f}" fill="{color}" fill-opacity="0.8"/>')
                out.append(f'<line x1="{X(x0):.2f}" y1="{Y(mean):.2f}" x2="{X(x0 + bw):.2f}" y2="{Y(mean):.2f}" '
                           f'stroke="#222222" stroke-width="2"/>')
                lo, hi = (binom.ppf(q, row["n"], mean) / row["n"] for q in (0.05, 0.95))
                xc = X(x0 + bw / 2)
                out.append(f'<line class="consistency" data-series="{r}" data-bin="{row["bin"]}" '
                           f'data-lo="{lo:.4f}" data-hi="{hi:.4f}" x1="{xc:.2f}" y1="{Y(lo):.2f}" x2="{xc:.2f}" '
                           f'y2="{Y(hi):.2f}" stroke="#222222" stroke-width="1"/>')
            out.append(f'<text class="count" data-series="{r}" data-bin="{row["bin"]}" '
                       f'x="{X(row["lo"] + 0.5 / bins):.1f}" y="{count_y[r]:.1f}" text-anchor="middle" '
                       f'font-size="10" fill="{color}">{row["n"]}</text>')
        out.append(f'<text x="{X(0) - 6:.1f}" y="{count_y[r]:.1f}" text-anchor="end" font-size="10" '
                   f'fill="{color}">n</text>')
    out.append(f'<line x1="{X(0):.1f}" y1="{Y(0):.1f}" x2="{X(1):.1f}" y2="{Y(1):.1f}" stroke="#555555" '
               'stroke-dasharray="5,4"/>')
    out.append(f'<rect x="{X(0):.1f}" y="{Y(1):.1f}" width="{pw}" height="{ph}" fill="none" stroke="#333333"/>')
    out.append(f'<text x="{X(0.5):.1f}" y="{axis_y:.1f}" text-anchor="middle" fill="#444444">'
               'predicted P(hallucinated), binned</text>')
    out.append(f'<text transform="translate(18 {Y(0.5):.1f}) rotate(-90)" text-anchor="middle" fill="#444444">'
               'observed share hallucinated</text>')
    # legend: one swatch per series, the mean tick, the diagonal
    x = X(0)
    for r, (name, _) in enumerate(series):
        out.append(f'<rect class="legend" x="{x:.1f}" y="{legend_y - 9:.1f}" width="10" height="10" '
                   f'fill="{COLORS[r % len(COLORS)]}"/>')
        out.append(f'<text x="{x + 14:.1f}" y="{legend_y:.1f}">{escape(name)}</text>')
        x += 14 + 7 * len(name) + 16
    out.append(f'<line x1="{x:.1f}" y1="{legend_y - 4:.1f}" x2="{x + 12:.1f}" y2="{legend_y - 4:.1f}" '
               'stroke="#222222" stroke-width="2"/>')
    out.append(f'<text x="{x + 16:.1f}" y="{legend_y:.1f}">mean predicted P</text>')
    x += 16 + 7 * 16 + 16
    out.append(f'<line x1="{x + 5:.1f}" y1="{legend_y - 10:.1f}" x2="{x + 5:.1f}" y2="{legend_y + 1:.1f}" '
               'stroke="#222222" stroke-width="1"/>')
    out.append(f'<text x="{x + 12:.1f}" y="{legend_y:.1f}">90 % if right</text>')
    x += 12 + 7 * 13 + 16
    out.append(f'<line x1="{x:.1f}" y1="{legend_y - 4:.1f}" x2="{x + 14:.1f}" y2="{legend_y - 4:.1f}" '
               'stroke="#555555" stroke-dasharray="5,4"/>')
    out.append(f'<text x="{x + 18:.1f}" y="{legend_y:.1f}">perfect calibration</text>')
    caption = f"ECE ({bins} bins, {n_items} items): " + " · ".join(
        f"{name} {format_score(finite_or_none(e))}" for (name, _), e in zip(series, eces))
    out.append(f'<text class="caption" x="{width / 2:.1f}" y="{caption_y:.1f}" text-anchor="middle">'
               f'{escape(caption)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
