"""The trend page (specgate.history.trend) rendered in a real headless browser: Chromium draws
every chart (a screenshot that is not blank, with the charts' blue and the step's amber in it),
and its console logs no error. Skips, saying why, where no Chromium is installed (.ci/run
installs Debian's `chromium`)."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from specgate.deployment import HistorySpec
from specgate.history import records as rec
from specgate.history.trend import analyse, write_page

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")


def _browser() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def _console(log: str) -> list[str]:
    """The page's console messages, as Chromium logs them with --enable-logging=stderr."""
    return [line for line in log.splitlines() if ":CONSOLE" in line]


def _history() -> dict[str, list[rec.ResultRecord]]:
    noise = random.Random(7)
    rows = []
    for config, figure, level in (("eagle3-decode", "speedup", 1.6), ("baseline", "decode_tps", 500.0)):
        for k in range(30):
            value = level * (0.94 if config == "eagle3-decode" and k >= 18 else 1.0) * (1 + noise.gauss(0, 0.005))
            rows.append(
                rec.ResultRecord(
                    schema_version=1, deployment="sim", fingerprint="slug", config=config, concurrency=1,
                    figure=figure, commit=f"c{k:03d}".ljust(40, "0"), date=f"2026-12-{1 + k:02d}T00:00:00+00:00",
                    host_id="h", sglang="s", deployment_digest="d", args_digest="a",
                    verdict="FAIL" if k == 20 else "PASS", run_verdict="PASS", level=value, low=value * 0.98,
                    high=value * 1.02, confidence=0.95,
                )
            )  # fmt: skip
    return {"slug": rows}


def test_the_trend_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = _browser()
    if browser is None:
        pytest.skip(f"no headless browser found ({', '.join(BROWSERS)} on PATH): apt-get install -y chromium")
    page, _ = write_page(tmp_path, "sim", analyse(_history(), HistorySpec()))
    shot = tmp_path / "shot.png"
    flags = [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=800,1400",
    ]  # fmt: skip
    done = subprocess.run(
        [browser, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert shot.is_file(), done.stderr[-2000:]
    # The page has no script: any console line at all (an error, a refused load) is one too many.
    console = _console(done.stderr)
    assert not console, console
    # The check sees what it is for: a page whose script logs and throws is caught by it.
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom"); undefined_function();</script></body></html>')
    caught = subprocess.run(
        [browser, *flags, f"--screenshot={tmp_path / 'bad.png'}", bad.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert len(_console(caught.stderr)) == 2, caught.stderr[-2000:]
    dom = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.stdout.count("<svg") == 2 and dom.stdout.count("<circle") == 60

    from matplotlib import image

    pixels = image.imread(shot)[..., :3]
    blue = (
        (abs(pixels[..., 0] - 0x09 / 255) < 0.08)
        & (abs(pixels[..., 1] - 0x69 / 255) < 0.08)
        & (abs(pixels[..., 2] - 0xDA / 255) < 0.08)
    ).sum()
    amber = (
        (abs(pixels[..., 0] - 0xBF / 255) < 0.08) & (abs(pixels[..., 1] - 0x87 / 255) < 0.08) & (pixels[..., 2] < 0.1)
    ).sum()
    assert blue > 500, "no chart drawn: the screenshot holds none of the levels' blue"
    assert amber > 50, "no step drawn: the screenshot holds none of the step's amber"
