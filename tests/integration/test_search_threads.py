"""The API process embeds queries on one BLAS thread: its requests run on many
threads at once, and a query's small matrices split over spinning BLAS threads cost ~20x
the CPU on a loaded 2-core machine."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

# Run in a process of its own: BLAS's thread count is process-wide, and earlier tests of a
# session set it. The app starts under TestClient, whose lifespan runs on another thread,
# as uvicorn's does not: the limit must hold from there too.
SCRIPT = textwrap.dedent(
    """
    import json, sys, threading
    from pathlib import Path
    import numpy  # BLAS must be loaded for threadpoolctl to find it
    from threadpoolctl import threadpool_info, threadpool_limits
    from fastapi.testclient import TestClient
    from api.http.app import create_app
    from core.settings import Settings
    from runtime import Runtime

    def blas():
        return sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})

    setter = threading.Thread(target=threadpool_limits, kwargs={"limits": 2, "user_api": "blas"})
    setter.start()
    setter.join()
    before = blas()
    # One worker thread: the embedded worker leaves BLAS alone, so only the API limits it.
    runtime = Runtime(Settings(home=Path(sys.argv[1]), worker_threads=1))
    with TestClient(create_app(runtime)) as client:
        status = client.get("/health").status_code
        print(json.dumps({"before": before, "serving": blas(), "status": status}))
    """
)


def test_serving_the_api_uses_one_blas_thread(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "home")],
        cwd=root, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] == [2], "the test needs BLAS on two threads to start from"
    assert seen == {"before": [2], "serving": [1], "status": 200}
