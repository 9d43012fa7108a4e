"""The report in a real browser: headless Chromium opens report.html (self-contained, no other
file), every embedded figure decodes (naturalWidth > 0) and the screenshot shows each one.

Skips when no Chromium is installed (.ci/run installs Debian's ``chromium`` before the tests).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from adaptlab import results
from adaptlab.analysis import build_report

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (.ci/run installs Debian's chromium)")

WIDTH = 1280
PROBE = """<script>
function adaptlabProbe() {
  const imgs = Array.from(document.images);
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
  const boxes = imgs.map(i => { const r = i.getBoundingClientRect();
    return [r.left + scrollX, r.top + scrollY, r.width, r.height]; });
  document.body.setAttribute('data-figures', ok + '/' + imgs.length);
  document.body.setAttribute('data-boxes', JSON.stringify(boxes));
  document.body.setAttribute('data-height', String(document.documentElement.scrollHeight));
}
window.addEventListener('load', adaptlabProbe);
</script>"""


@pytest.fixture(scope="module")
def report_html(tmp_path_factory, make_records) -> Path:
    """report.html of a small store: two systems, their CIs and one Holm-adjusted comparison."""
    root = tmp_path_factory.mktemp("browser-store")
    runs, metrics, recs = [], [], []
    for s, noise in (("base", 1.6), ("ft", 0.8)):
        rec = make_records(s, noise=noise, n_queries=30, k=10, seed=4)
        run = results.run_record(
            s, "synth", model_id=s, model_revision=None, dataset_fingerprint="fp", seed=0, config={"k": 10}
        )
        runs.append(run)
        recs.append(rec)
        v = float(((rec.gold_rank > 0) & (rec.gold_rank <= 5)).mean())
        metrics.append(
            {
                "run_id": run["run_id"],
                "system": s,
                "dataset": "synth",
                "measure": "acc@5",
                "value": v,
                "boot_mean": v,
                "ci_low": v - 0.1,
                "ci_high": min(1.0, v + 0.1),
                "n_queries": 30,
                "n_resamples": 50,
                "sample_size": 30,
                "seed": 0,
            }
        )
    metrics.append(
        {
            "run_id": runs[1]["run_id"],
            "system": "ft",
            "dataset": "synth",
            "measure": "acc@5",
            "value": 0.2,
            "boot_mean": 0.2,
            "ci_low": 0.05,
            "ci_high": 0.35,
            "compared_to": "base",
            "p_value": 0.02,
            "p_adjusted": 0.02,
            "adjustment": "holm",
            "family_size": 1,
            "n_resamples": 50,
        }
    )
    results.open(root, create=True).commit(runs, metrics, recs)
    out = tmp_path_factory.mktemp("browser-report")
    build_report(root, out, n_resamples=20, compute_missing=False, dpi=100)
    return out / "report.html"


def _chromium(tmp: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--user-data-dir={tmp / 'profile'}",
        *args,
        url,
    ]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"chromium did not finish within 120 s: {' '.join(cmd)}")


def _probe(tmp: Path, url: str) -> tuple[str, list[list[float]], int]:
    """The images loaded / present, their page boxes and the page height, from the dumped DOM."""
    dom = _chromium(tmp, url, "--virtual-time-budget=10000", "--dump-dom")
    body = re.search(r"<body([^>]*)>", dom.stdout)
    assert body is not None, f"no DOM dumped; chromium said: {dom.stderr[-2000:]}"
    attrs = dict(re.findall(r"data-(figures|boxes|height)=\"([^\"]*)\"", body.group(1)))
    assert "figures" in attrs, f"the probe did not run: {body.group(0)[:300]}"
    return attrs["figures"], json.loads(attrs["boxes"].replace("&quot;", '"')), int(attrs["height"])


def test_report_renders_every_figure_in_headless_chromium(report_html, tmp_path):
    from matplotlib.image import imread

    html = report_html.read_text()
    assert "src='figures/" not in html and "http://" not in html and "https://" not in html  # self-contained
    n_figures = html.count("<img ")
    assert n_figures >= 4  # forest, paired differences, densities, nDCG@k curves
    page = tmp_path / "page.html"  # the report alone, moved away from its figures/ folder, plus the probe
    page.write_text(html.replace("</body>", PROBE + "</body>"))
    loaded, boxes, height = _probe(tmp_path, page.as_uri())
    assert loaded == f"{n_figures}/{n_figures}"
    shot = tmp_path / "shot.png"
    run = _chromium(tmp_path, page.as_uri(), f"--screenshot={shot}", f"--window-size={WIDTH},{min(height, 16000)}")
    assert shot.exists(), f"no screenshot; chromium said: {run.stderr[-2000:]}"
    pixels = imread(shot)[..., :3].mean(axis=2)
    assert pixels.shape[1] == WIDTH and pixels.std() > 0.05  # not a blank page
    for left, top, w, h in boxes:
        assert w > 300 and h > 150 and top + h <= pixels.shape[0]
        region = pixels[int(top) : int(top + h), int(left) : int(left + w)]
        assert region.std() > 0.05 and (region < 0.9).mean() > 0.01  # a drawn figure, not white space
