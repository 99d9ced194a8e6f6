"""A worker's heartbeat stops listing a step whose message its consumer dropped.

Celery's consumer, on losing its broker connection, drops the messages it had received but not
started (`Consumer.on_close`) and cannot put them back while the broker is down. The step each
one held since its receipt must leave the heartbeat then, so the sweeper re-publishes it within
a heartbeat period instead of after `max_hold` (the task time limit): a job whose Redis was
killed while a prefork worker waited for a free pool process once hung on that.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from celery.worker import state as celery_state

from core.stores.sqlite.state import SQLiteStateStore
from workers import tasks
from workers.heartbeat import Heartbeat, running_steps


@pytest.fixture
def beat(tmp_path: Path) -> Heartbeat:
    state = SQLiteStateStore(tmp_path / "state.sqlite")
    return Heartbeat(state, ttl=30, max_hold=3600, dropped=tasks._dropped_receipts)


def listed(beat: Heartbeat) -> set[str]:
    beat.beat()
    return running_steps(beat.state, [beat.worker])[beat.worker]


def test_a_dropped_message_leaves_the_beat_and_a_kept_one_stays(
    beat: Heartbeat, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks, "RECEIPT_GRACE_S", 0.0)
    came = time.monotonic() - 1
    for request_id, step in (("kept", "job:a:0:chunk"), ("dropped", "job:a:1:chunk")):
        beat.hold(step)
        tasks._received[request_id] = (step, came)
    monkeypatch.setitem(celery_state.requests, "kept", object())  # still reserved or active
    assert listed(beat) == {"job:a:0:chunk"}
    assert "dropped" not in tasks._received and "kept" in tasks._received

    celery_state.requests.pop("kept")  # it ended: its receipt hold goes too
    assert listed(beat) == set()
    assert tasks._received == {}


def test_a_message_just_received_is_kept_until_celery_registers_it(beat: Heartbeat) -> None:
    beat.hold("job:b:0:chunk")
    tasks._received["new"] = ("job:b:0:chunk", time.monotonic())
    try:
        assert listed(beat) == {"job:b:0:chunk"}
    finally:
        tasks._received.pop("new", None)
    assert json.loads(beat.state.get(f"worker:{beat.worker}:alive") or "[]") == ["job:b:0:chunk"]
