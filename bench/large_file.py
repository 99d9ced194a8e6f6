"""Peak memory of each pipeline step on one large generated plain-text document.

    .venv/bin/python bench/large_file.py --mb 200                      # classify and chunk
    .venv/bin/python bench/large_file.py --mb 200 --steps all --full-batches 2

Runs the planner, then every batch's steps one after the other in this process exactly as the
Celery task shells do (input artifact JSON in, step, output JSON out), with the embedded
stores. Before each step the kernel's peak-RSS mark is reset (/proc/self/clear_refs), so the
peak printed for a step is that step's own. `--full-batches` limits the steps after chunk
(the extractor and the embedder take minutes per 4 MiB) to the first batches; those steps
only ever see one batch, so their peak does not depend on how many batches there are.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.catalog import AddReport  # noqa: E402
from core.settings import Settings  # noqa: E402
from pipelines.base import step_types  # noqa: E402
from pipelines.classify import check_supported  # noqa: E402
from pipelines.definitions import get_pipeline  # noqa: E402
from runtime import Runtime  # noqa: E402
from workers.orchestration import plan_batches  # noqa: E402

_PROSE = (
    "the river city council mayor report bridge harbour station museum railway company "
    "engineer winter summer north south market festival library school garden tower road "
    "Alice Berlin Porto Nairobi Lima Oslo Kyoto Quebec Acme Initech Globex Ada Lovelace "
    "opened built announced visited founded moved signed elected described measured"
)
WORDS = _PROSE.split(" ")


def write_text(path: Path, megabytes: float, seed: int = 4) -> int:
    """A deterministic text file of about `megabytes` MB: sentences in blank-line paragraphs."""
    rng = random.Random(seed)
    target = int(megabytes * 1_000_000)
    written = 0
    with path.open("w", encoding="utf-8") as out:
        while written < target:
            sentences = []
            for _ in range(rng.randint(2, 8)):
                words = rng.choices(WORDS, k=rng.randint(6, 20))
                sentences.append(" ".join(words).capitalize() + ".")
            paragraph = " ".join(sentences) + "\n\n"
            out.write(paragraph)
            written += len(paragraph)
    return path.stat().st_size


def rss_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def reset_peak() -> None:
    """Set the peak-RSS mark (VmHWM) back to the current RSS (Linux 4.0+)."""
    Path("/proc/self/clear_refs").write_text("5")


def run(args: argparse.Namespace) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="cogmill-large-") as home:
        return measure(args, Path(home))


def measure(args: argparse.Namespace, home: Path) -> dict[str, object]:
    settings = Settings(home=home, max_file_bytes=max(200 * 1024 * 1024, int(args.mb * 2e6)))
    runtime = Runtime(settings)
    path = home / "large.txt"
    size = write_text(path, args.mb)
    runtime.catalog.ensure_dataset("large")
    report = AddReport()
    runtime.catalog.add_file("large", path, path.name, report, check_supported)
    path.unlink()
    pipeline = get_pipeline("default")
    wanted = pipeline.step_names if args.steps == "all" else args.steps.split(",")
    # Models load outside the measured steps: they are the worker's baseline, not the file's.
    if any(step not in ("classify", "chunk") for step in wanted):
        runtime.embedder.embed(["warm up"])
        runtime.extractor.extract(["Alice visited Berlin."])
    batches = plan_batches(runtime, "large", None, "changed")
    baseline = rss_mib("VmRSS")
    peaks: dict[str, float] = {}  # the step's peak RSS above the baseline
    own: dict[str, float] = {}  # the step's peak RSS above the RSS it started with
    seconds: dict[str, float] = {}
    batch_peaks: list[float] = []  # per batch: the highest step peak above the baseline
    for index, batch in enumerate(batches):
        batch_peaks.append(0.0)
        artifact = batch.model_dump_json()
        for step in pipeline.step_names:
            if step not in wanted or (
                step not in ("classify", "chunk") and index >= args.full_batches
            ):
                break
            reset_peak()
            before = rss_mib("VmRSS")
            started = time.perf_counter()
            instance = pipeline.build_step(step, runtime)
            data = step_types(type(instance))[0].model_validate_json(artifact)
            del artifact
            output = instance.run(data)
            del data
            artifact = output.model_dump_json()
            del output
            seconds[step] = seconds.get(step, 0.0) + time.perf_counter() - started
            peak = rss_mib("VmHWM")
            peaks[step] = max(peaks.get(step, 0.0), peak - baseline)
            own[step] = max(own.get(step, 0.0), peak - before)
            batch_peaks[-1] = max(batch_peaks[-1], peak - baseline)
        del artifact
    runtime.close()
    return {
        "file_mb": round(size / 1e6, 1),
        "batches": len(batches),
        "baseline_rss_mib": round(baseline),
        # Peak RSS above the baseline while the step ran (memory earlier steps left to the
        # allocator included), and the step's own growth over the RSS it started with.
        "peak_above_baseline_mib": {step: round(peak) for step, peak in peaks.items()},
        "peak_above_baseline_x_file": {
            step: round(peak * 1024 * 1024 / size, 2) for step, peak in peaks.items()
        },
        "step_growth_mib": {step: round(peak) for step, peak in own.items()},
        "seconds": {step: round(s, 1) for step, s in seconds.items()},
        "batch_peaks_mib": [round(peak) for peak in batch_peaks[: max(args.full_batches, 8)]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=200, help="size of the generated text file")
    parser.add_argument("--steps", default="classify,chunk", help="comma list, or 'all'")
    parser.add_argument(
        "--full-batches", type=int, default=2, help="batches that run the steps after chunk"
    )
    print(json.dumps(run(parser.parse_args())))


if __name__ == "__main__":
    main()
