"""Schedules without a beat: intervals and cron expressions and their bounds, run times, the
per-tenant limit, and the claims that keep two beats from firing a run twice."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.stores.sqlite.state import SQLiteStateStore
from workers.beat import Leadership
from workers.schedules import (
    Schedule,
    ScheduleError,
    ScheduleNotFoundError,
    Schedules,
    check_cron,
    new_id,
    next_cron,
    parse_cron,
    parse_interval,
)

pytestmark = pytest.mark.unit


def at(text: str) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()


def test_intervals_below_the_minimum_or_malformed_are_refused() -> None:
    assert parse_interval("15m", 60) == 900 and parse_interval("1.5h", 60) == 5400
    with pytest.raises(ScheduleError, match="COGMILL_SCHEDULE_MIN_SECONDS"):
        parse_interval("30s", 60)
    for bad in ("15", "m", "-5m", "1w", "15 minutes"):
        with pytest.raises(ScheduleError, match="invalid interval"):
            parse_interval(bad, 60)


def test_cron_expressions_name_utc_minutes_and_respect_the_minimum() -> None:
    assert next_cron(parse_cron("0 3 * * *"), at("2026-03-01T03:00:00")) == at("2026-03-02T03:00")
    assert next_cron(parse_cron("*/15 * * * *"), at("2026-03-01T10:07:30")) == at(
        "2026-03-01T10:15"
    )
    # Both day fields must match (as Celery reads them): the first Monday of the month.
    assert next_cron(parse_cron("0 9 1-7 * 1"), at("2026-03-01T00:00")) == at("2026-03-02T09:00")
    assert check_cron(" */5  * * * * ", 300) == "*/5 * * * *"
    with pytest.raises(ScheduleError, match="COGMILL_SCHEDULE_MIN_SECONDS"):
        check_cron("* * * * *", 120)
    for bad in ("* * * *", "61 * * * *", "* * * * * *", "0 0 31 2 *"):
        with pytest.raises(ScheduleError):
            check_cron(bad, 60)


def test_interval_runs_fall_on_whole_periods_from_the_anchor() -> None:
    schedule = Schedule(id=new_id(), dataset="d", action="cognify", every=60, anchor=1000)
    assert schedule.following(1000) == 1060
    assert schedule.following(1059.9) == 1060 and schedule.following(1060) == 1120
    assert schedule.following(500) == 1000


def test_a_tenant_has_at_most_its_schedules_and_sees_only_its_own(tmp_path: Path) -> None:
    store = Schedules(SQLiteStateStore(tmp_path / "state.sqlite"))

    def new(tenant: str | None) -> Schedule:
        return Schedule(id=new_id(), tenant=tenant, dataset="d", action="cognify", every=60)

    mine = [store.add(new("acme"), 2) for _ in range(2)]
    with pytest.raises(ScheduleError, match="COGMILL_SCHEDULES_PER_TENANT"):
        store.add(new("acme"), 2)
    store.add(new("beta"), 2)
    assert {s.id for s in store.of_tenant("acme")} == {s.id for s in mine}
    with pytest.raises(ScheduleNotFoundError):
        store.get(mine[0].id, "beta")
    with pytest.raises(ScheduleNotFoundError):
        store.get("sch_../../etc", "acme")
    store.remove(mine[0])
    store.add(new("acme"), 2)  # room again


def test_a_run_time_is_claimed_once_and_one_beat_leads(tmp_path: Path) -> None:
    state = SQLiteStateStore(tmp_path / "state.sqlite")
    store = Schedules(state)
    schedule = store.add(Schedule(id=new_id(), dataset="d", action="cognify", every=60), 5)
    assert store.claim(schedule, 1060.0) and not store.claim(schedule, 1060.0)
    assert store.claim(schedule, 1120.0)
    runtime = SimpleNamespace(state=state)
    first, second = Leadership(10), Leadership(10)
    assert first.leads(runtime, 100) and not second.leads(runtime, 101)  # type: ignore[arg-type]
    assert first.leads(runtime, 108)  # type: ignore[arg-type]  # claims the next window early
    assert not second.leads(runtime, 111)  # type: ignore[arg-type]
    # The first beat stops; the second takes the first window nobody claimed.
    assert second.leads(runtime, 121)  # type: ignore[arg-type]
    assert not first.leads(runtime, 122)  # type: ignore[arg-type]
