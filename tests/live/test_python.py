"""Under Python: the same switches on the same runtime (a prof.zone around
a request handler gets its latency quantiles scraped), and prof.live
imported from the package reads another process. Skips where the
extension is not built (meson -Dpython=false)."""

import glob
import os
import subprocess
import sys
import urllib.request

import pytest

from conftest import free_port, wait_for

BUILD = os.environ.get("PROF_TEST_BUILD_DIR", "")
PKG = os.path.join(BUILD, "python")

SERVER = r"""
import sys, time, prof
print("up", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    with prof.zone("handle_request"):
        with prof.zone("render"):
            time.sleep(0.0005)
    prof.step()
"""


def need_extension():
    if not glob.glob(os.path.join(PKG, "prof", "_prof*.so")):
        pytest.skip("the Python extension is not built in %s (meson -Dpython=true)" % PKG)


def test_metrics_and_live_under_python(env, tmp_path):
    need_extension()
    port = free_port()
    e = dict(env, PYTHONPATH=PKG, PROF_METRICS="127.0.0.1:%d" % port)
    p = subprocess.Popen([sys.executable, "-c", SERVER, "60"], env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "up"

        def scrape():
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
                return r.read().decode()

        line = 'prof_stage_latency_seconds{stage="handle_request/render",rank="0",quantile="0.99"} '
        text = wait_for(lambda: (lambda t: t if line in t else None)(scrape()), 20,
                        "the Python stage in /metrics")
        assert float(text.split(line)[1].split()[0]) > 0
        # prof.live from the installed package, in another interpreter.
        code = ("import prof.live, json, sys; s = prof.live.snapshot(int(sys.argv[1])); "
                "print(json.dumps([r['path'] for r in s['rows']]))")
        r = subprocess.run([sys.executable, "-c", code, str(p.pid)], env=e, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "handle_request/render" in r.stdout
    finally:
        p.kill()
        p.wait()
