"""Schedules kept in the state store (SQLite embedded, Redis distributed): a dataset synced
from its source, or re-cognified, every so often or on a cron expression.

An interval schedule's runs fall at its anchor (when it was added) plus whole periods; a cron
schedule's at the times its five fields (minute hour day-of-month month day-of-week, UTC; a
day must match both day fields, as Celery's crontab reads them) name. The beat
(workers/beat.py) fires each due time once, and records what every run did: `last` names the
run's time, its job and its outcome, and counters per schedule (and in all, for /metrics)
count the runs fired and those skipped because the previous one was still going.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
import time
from typing import Literal

from celery.schedules import ParseException, crontab
from pydantic import BaseModel, Field

from core.errors import InvalidInput, NotFound
from core.models.jobs import Budget
from core.ports import StateStore

PREFIX = "schedules:"
ALL = PREFIX + "all"
METRICS = "metrics:schedules:"  # runs by outcome (OUTCOMES), over every schedule
# fired: sent by the beat; started: a job made; skipped: not started (the previous run still
# going, the dataset busy); missed: run times the beat was down for.
OUTCOMES = ("fired", "started", "skipped", "missed")
SCHEDULE_ID = re.compile(r"^sch_[0-9a-f]{12}$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
MAX_INTERVAL = 366 * 86_400
_CRON_SCAN_DAYS = 366 * 8  # a cron day exists within 8 years (29 February on a Monday: 28)


class ScheduleError(InvalidInput):
    """A schedule is malformed, too frequent, or one too many for its tenant."""

    code = "invalid_schedule"


class ScheduleNotFoundError(NotFound):
    """No schedule with that id for this caller."""

    code = "schedule_not_found"


class Schedule(BaseModel):
    """What to run on a dataset, and when."""

    id: str
    tenant: str | None = None
    dataset: str  # the stored (tenant-scoped) name
    action: Literal["sync", "cognify"]
    source: str | None = None  # the source id of a sync (workers/sync.py's SourceRecord)
    source_name: str = ""  # ... as shown (credentials hidden)
    every: float | None = Field(default=None, description="Seconds between runs")
    cron: str | None = None
    everything: bool = False  # cognify: every document (`--all`), not only new and changed
    budget: Budget | None = None
    paused: bool = False
    anchor: float = Field(default_factory=time.time)
    created: float = Field(default_factory=time.time)

    def following(self, after: float) -> float:
        """The first run time strictly after `after`."""
        if self.every is not None:
            periods = max(0, int((after - self.anchor) // self.every) + 1)
            return self.anchor + periods * self.every
        return next_cron(parse_cron(str(self.cron)), after)


class LastRun(BaseModel):
    """A schedule's latest run: its scheduled time, when it was fired, its job (once made)."""

    slot: float
    fired_at: float
    job: str | None = None
    outcome: str = "fired"  # fired, or skipped with the reason in `note`
    note: str = ""


def parse_interval(text: str, minimum: float) -> float:
    """Seconds from `15m`, `1h`, `30s`, `2d`; ScheduleError when malformed or below
    `minimum` (COGMILL_SCHEDULE_MIN_SECONDS)."""
    found = _INTERVAL.match(text)
    if found is None:
        raise ScheduleError(f"invalid interval {text!r}: give a number and a unit, e.g. 15m, 1h")
    seconds = float(found[1]) * _UNITS[found[2]]
    if seconds > MAX_INTERVAL:
        raise ScheduleError(f"interval {text!r} is longer than a year; use a cron expression")
    if seconds < minimum:
        raise ScheduleError(
            f"interval {text!r} is shorter than the minimum of {minimum:g} s "
            "(COGMILL_SCHEDULE_MIN_SECONDS)"
        )
    return seconds


def parse_cron(text: str) -> crontab:
    """A five-field cron expression; ScheduleError saying what is wrong."""
    fields = text.split()
    if len(fields) != 5 or len(text) > 200:
        raise ScheduleError(
            f"invalid cron expression {text!r}: give five fields, minute hour day-of-month "
            "month day-of-week, e.g. '*/15 * * * *' or '0 3 * * 1-5'"
        )
    try:
        return crontab.from_string(" ".join(fields))
    except (ValueError, IndexError, TypeError, ParseException) as err:
        raise ScheduleError(f"invalid cron expression {text!r}: {err}") from None


def next_cron(spec: crontab, after: float) -> float:
    """The first time (UTC, whole minutes) after `after` that the crontab names."""
    start = dt.datetime.fromtimestamp(after, dt.UTC).replace(second=0, microsecond=0)
    start += dt.timedelta(minutes=1)
    day = start.date()
    for _ in range(_CRON_SCAN_DAYS):
        dow = (day.weekday() + 1) % 7  # cron's 0 is Sunday
        if (
            day.month in spec.month_of_year
            and day.day in spec.day_of_month
            and dow in (spec.day_of_week)
        ):
            for hour in sorted(spec.hour):
                for minute in sorted(spec.minute):
                    when = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=dt.UTC)
                    if when >= start:
                        return when.timestamp()
        day += dt.timedelta(days=1)
    raise ScheduleError(f"the cron expression {spec} names no time in the next 8 years")


def check_cron(text: str, minimum: float) -> str:
    """The expression when valid and its runs are at least `minimum` seconds apart."""
    spec = parse_cron(text)
    now = time.time()
    times = [next_cron(spec, now)]
    for _ in range(60):  # the shortest gap shows within a day's first runs
        times.append(next_cron(spec, times[-1]))
    gap = min(b - a for a, b in zip(times, times[1:], strict=False))
    if gap < minimum:
        raise ScheduleError(
            f"cron {text!r} runs every {gap:g} s, more often than the minimum of {minimum:g} s "
            "(COGMILL_SCHEDULE_MIN_SECONDS)"
        )
    return " ".join(text.split())


def _tenant_index(tenant: str | None) -> str:
    return f"{PREFIX}tenant:{tenant or ''}"


class Schedules:
    """The schedules in a state store, indexed in all and by tenant."""

    def __init__(self, state: StateStore) -> None:
        self.state = state

    def add(self, schedule: Schedule, most: int) -> Schedule:
        """Keep a new schedule; ScheduleError when its tenant has `most` already."""
        index = _tenant_index(schedule.tenant)
        if self.state.count_members(index) >= most:
            raise ScheduleError(
                f"this tenant has {most} schedules, the most allowed "
                "(COGMILL_SCHEDULES_PER_TENANT); remove one first"
            )
        self.state.put(PREFIX + schedule.id, schedule.model_dump_json())
        self.state.add_members({index: [schedule.id], ALL: [schedule.id]})
        self.state.put(self._due(schedule.id), str(schedule.following(schedule.anchor)))
        return schedule

    def get(
        self, schedule_id: str, tenant: str | None = None, *, any_tenant: bool = False
    ) -> Schedule:
        """The schedule; ScheduleNotFoundError for an unknown id or another tenant's."""
        raw = self.state.get(PREFIX + schedule_id) if SCHEDULE_ID.match(schedule_id) else None
        found = Schedule.model_validate_json(raw) if raw else None
        if found is None or (not any_tenant and found.tenant != tenant):
            raise ScheduleNotFoundError(
                f"no schedule {schedule_id!r}; `cogmill schedules list` shows them"
            )
        return found

    def save(self, schedule: Schedule) -> None:
        self.state.put(PREFIX + schedule.id, schedule.model_dump_json())

    def of_tenant(self, tenant: str | None) -> list[Schedule]:
        return self._read(_tenant_index(tenant))

    def all(self) -> list[Schedule]:
        return self._read(ALL)

    def _read(self, index: str) -> list[Schedule]:
        ids = sorted(self.state.add_members({index: []})[index])
        raws = self.state.get_many([PREFIX + i for i in ids])
        found = [Schedule.model_validate_json(raw) for raw in raws if raw]
        return sorted(found, key=lambda s: s.created)

    def remove(self, schedule: Schedule) -> None:
        self.state.remove_member(ALL, schedule.id)
        self.state.remove_member(_tenant_index(schedule.tenant), schedule.id)
        parts = ("", ":due", ":last", *(f":{outcome}" for outcome in OUTCOMES))
        self.state.delete(*(PREFIX + schedule.id + part for part in parts))

    # -- runs -------------------------------------------------------------------------------

    @staticmethod
    def _due(schedule_id: str) -> str:
        return f"{PREFIX}{schedule_id}:due"

    def due(self, schedule: Schedule) -> float:
        """When the schedule's next run falls."""
        raw = self.state.get(self._due(schedule.id))
        return float(raw) if raw else schedule.following(schedule.anchor)

    def set_due(self, schedule: Schedule, when: float) -> None:
        self.state.put(self._due(schedule.id), repr(when))

    def claim(self, schedule: Schedule, slot: float) -> bool:
        """True for the one caller (of any beat) that takes this run time of the schedule."""
        key = f"{PREFIX}{schedule.id}:slot:{slot:.3f}"
        won = self.state.incr(key) == 1
        if won:  # the key only has to outlive the beats' look at this time
            self.state.put(key, "1", ttl=max(3600.0, 3 * (schedule.every or 60)))
        return won

    def start(self, schedule: Schedule, slot: float) -> bool:
        """True for the one delivery of a run (it may be sent more than once) that starts it."""
        key = f"{PREFIX}{schedule.id}:start:{slot:.3f}"
        won = self.state.incr(key) == 1
        if won:
            self.state.put(key, "1", ttl=max(3600.0, 3 * (schedule.every or 60)))
        return won

    def last(self, schedule_id: str) -> LastRun | None:
        raw = self.state.get(f"{PREFIX}{schedule_id}:last")
        return LastRun.model_validate_json(raw) if raw else None

    def set_last(self, schedule_id: str, run: LastRun) -> None:
        self.state.put(f"{PREFIX}{schedule_id}:last", run.model_dump_json())

    def count(self, schedule_id: str, outcome: str) -> None:
        self.state.incr_many({f"{PREFIX}{schedule_id}:{outcome}": 1, METRICS + outcome: 1})

    def counts(self, schedule_id: str) -> dict[str, int]:
        keys = [f"{PREFIX}{schedule_id}:{outcome}" for outcome in OUTCOMES]
        values = self.state.get_many(keys)
        return {o: int(v or 0) for o, v in zip(OUTCOMES, values, strict=True)}


def totals(state: StateStore) -> dict[str, int]:
    """Runs by outcome over every schedule (for /metrics)."""
    values = state.get_many([METRICS + outcome for outcome in OUTCOMES])
    return {o: int(v or 0) for o, v in zip(OUTCOMES, values, strict=True)}


def new_id() -> str:
    return "sch_" + secrets.token_hex(6)


def describe(schedule: Schedule) -> str:
    """How often a schedule runs, as given."""
    return f"every {schedule.every:g}s" if schedule.every is not None else f"cron {schedule.cron}"
