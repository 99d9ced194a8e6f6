"""The StateStore contract; each adapter's test module inherits it and provides `state_store`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from core.ports import StateStore


def _run_threads(count: int, target: Callable[[int], None]) -> None:
    """Run `target(worker_index)` on `count` threads released together; re-raise their errors."""
    start = threading.Barrier(count)

    def run(index: int) -> None:
        start.wait()
        target(index)

    with ThreadPoolExecutor(count) as pool:
        futures = [pool.submit(run, index) for index in range(count)]
    for future in futures:
        future.result()


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Poll `condition` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(0.05)


class StateStoreContract:
    """Behaviour every StateStore adapter must show."""

    def test_is_a_state_store(self, state_store: StateStore) -> None:
        assert isinstance(state_store, StateStore)

    def test_put_get_overwrite_delete(self, state_store: StateStore) -> None:
        assert state_store.get("job:1") is None
        state_store.put("job:1", "queued")
        assert state_store.get("job:1") == "queued"
        state_store.put("job:1", "running")
        assert state_store.get("job:1") == "running"
        state_store.delete("job:1")
        assert state_store.get("job:1") is None
        state_store.delete("job:1")  # missing: no error

    def test_values_round_trip_unchanged(self, state_store: StateStore) -> None:
        value = '{"name": "Zoë", "text": "line\\nbreak"}\n  '
        state_store.put("doc", value)
        assert state_store.get("doc") == value

    def test_get_many_reads_each_key_in_order(self, state_store: StateStore) -> None:
        assert state_store.get_many([]) == []
        state_store.put("r:1", "one")
        state_store.put("r:2", "two")
        state_store.put("r:gone", "soon", ttl=0.2)
        time.sleep(0.4)
        keys = ["r:2", "r:missing", "r:1", "r:gone", "r:2"]
        assert state_store.get_many(keys) == ["two", None, "one", None, "two"]
        many = [f"many:{i}" for i in range(1200)]  # more than one query's worth of keys
        for key in many[::7]:
            state_store.put(key, key.upper())
        assert state_store.get_many(many) == [
            k.upper() if i % 7 == 0 else None for i, k in enumerate(many)
        ]

    @pytest.mark.slow
    def test_ttl_expires(self, state_store: StateStore) -> None:
        # 2 s: the read right after the write is well inside it even on a loaded machine.
        state_store.put("artifact", "chunks", ttl=2)
        state_store.put("artifact-kept", "chunks")
        assert state_store.get("artifact") == "chunks"
        # keys() first: a get() may purge the expired key and hide a keys() that ignores expiry.
        wait_for(lambda: state_store.keys("artifact") == ["artifact-kept"], "artifact expired")
        assert state_store.get("artifact") is None

    def test_put_without_ttl_clears_an_earlier_ttl(self, state_store: StateStore) -> None:
        state_store.put("k", "short", ttl=0.2)
        state_store.put("k", "forever")
        time.sleep(0.4)
        assert state_store.get("k") == "forever"

    def test_non_positive_ttl_is_rejected(self, state_store: StateStore) -> None:
        with pytest.raises(ValueError):
            state_store.put("k", "v", ttl=0)

    def test_keys_by_prefix_sorted(self, state_store: StateStore) -> None:
        for key in ["job:b", "job:a", "job:c", "jobs", "other:a"]:
            state_store.put(key, "x")
        state_store.add_member("job:set", "m")
        state_store.append_event("job:events", "e")
        assert state_store.keys("job:") == ["job:a", "job:b", "job:c", "job:events", "job:set"]
        assert state_store.keys("nothing:") == []
        assert state_store.keys("") == sorted(
            ["job:a", "job:b", "job:c", "job:events", "job:set", "jobs", "other:a"]
        )

    @pytest.mark.parametrize(
        ("prefix", "decoy"),
        [("50%", "50x"), ("a_b", "aXb"), ("x*", "xy"), ("y?", "yz"), ("z[a]", "za"), ("b\\", "bc")],
    )
    def test_keys_prefix_is_literal(self, state_store: StateStore, prefix: str, decoy: str) -> None:
        state_store.put(prefix + ":1", "x")
        state_store.put(decoy + ":1", "x")
        assert state_store.keys(prefix) == [prefix + ":1"]

    def test_incr_from_missing(self, state_store: StateStore) -> None:
        assert state_store.incr("done") == 1
        assert state_store.incr("done", 5) == 6
        assert state_store.incr("done", -2) == 4
        assert state_store.get("done") == "4"

    def test_incr_of_a_non_integer_is_rejected(self, state_store: StateStore) -> None:
        state_store.put("word", "abc")
        with pytest.raises(ValueError):
            state_store.incr("word")
        assert state_store.get("word") == "abc"

    def test_incr_is_atomic_across_threads(self, state_store: StateStore) -> None:
        def work(_: int) -> None:
            for _ in range(200):
                state_store.incr("hits")

        _run_threads(8, work)
        assert state_store.get("hits") == "1600"

    def test_reserve_adds_only_within_the_limit_and_release_gives_back(
        self, state_store: StateStore
    ) -> None:
        assert state_store.reserve("held", 40, 100, ttl=60) == 40
        assert state_store.reserve("held", 60, 100, ttl=60) == 100
        assert state_store.reserve("held", 1, 100, ttl=60) is None  # nothing added
        assert state_store.get("held") == "100"
        state_store.release("held", 60)
        assert state_store.reserve("held", 50, 100, ttl=60) == 90
        state_store.release("held", 90)
        assert state_store.keys("held") == []  # gone at zero
        state_store.release("held", 5)  # after it expired, say: never below zero
        assert state_store.get("held") is None
        state_store.put("word", "abc")
        with pytest.raises(ValueError):
            state_store.reserve("word", 1, 100, ttl=60)
        with pytest.raises(ValueError):
            state_store.reserve("held", 1, 100, ttl=0)

    @pytest.mark.slow
    def test_a_reservation_never_released_expires(self, state_store: StateStore) -> None:
        assert state_store.reserve("leaked", 70, 100, ttl=1) == 70
        assert state_store.reserve("leaked", 70, 100, ttl=1) is None
        wait_for(lambda: state_store.reserve("leaked", 70, 100, ttl=60) == 70, "it expired")

    def test_concurrent_reservations_never_pass_the_limit(self, state_store: StateStore) -> None:
        granted: list[int] = []

        def work(_: int) -> None:
            for _ in range(25):
                if state_store.reserve("quota", 7, 1000, ttl=60) is not None:
                    granted.append(7)

        _run_threads(8, work)  # 1,400 bytes asked for, 1,000 allowed
        assert sum(granted) == 994 and state_store.get("quota") == "994"

    def test_incr_many_adds_to_each_counter(self, state_store: StateStore) -> None:
        state_store.incr("a", 5)
        state_store.put("text", "x")
        state_store.incr_many({"a": 2, "b": -3})
        assert state_store.get_many(["a", "b"]) == ["7", "-3"]
        with pytest.raises(ValueError, match="'text'"):
            state_store.incr_many({"text": 1, "a": 1})
        assert state_store.get_many(["a", "text"]) == ["8", "x"]  # the others are added
        state_store.incr_many({})

    def test_add_member_reports_new_members(self, state_store: StateStore) -> None:
        assert state_store.count_members("batches") == 0
        assert state_store.add_member("batches", "b1") is True
        assert state_store.add_member("batches", "b1") is False
        assert state_store.add_member("batches", "b2") is True
        assert state_store.count_members("batches") == 2
        assert state_store.count_members("other") == 0

    def test_a_set_added_to_with_a_ttl_expires_whole(self, state_store: StateStore) -> None:
        assert state_store.add_member("idx:s1", "note:1", ttl=0.4) is True
        state_store.add_member("idx:s1", "note:2", ttl=0.4)
        state_store.add_member("idx:s2", "note:9", ttl=30)
        assert state_store.count_members("idx:s1") == 2
        assert state_store.keys("idx:") == ["idx:s1", "idx:s2"]
        time.sleep(0.3)
        state_store.add_member("idx:s1", "note:3", ttl=0.4)  # pushes the whole set out
        time.sleep(0.2)
        assert state_store.add_members({"idx:s1": []}) == {"idx:s1": {"note:1", "note:2", "note:3"}}
        time.sleep(0.4)
        assert state_store.count_members("idx:s1") == 0
        assert state_store.add_members({"idx:s1": []}) == {"idx:s1": set()}
        assert state_store.keys("idx:") == ["idx:s2"]
        assert state_store.add_member("idx:s1", "note:4") is True  # a new set, nothing old in it
        assert state_store.add_members({"idx:s1": []}) == {"idx:s1": {"note:4"}}
        with pytest.raises(ValueError, match="positive"):
            state_store.add_member("idx:s3", "x", ttl=0)

    def test_remove_member_reports_whether_it_was_there(self, state_store: StateStore) -> None:
        state_store.add_member("running", "a")
        state_store.add_member("running", "b")
        assert state_store.remove_member("running", "a") is True
        assert state_store.remove_member("running", "a") is False
        assert state_store.remove_member("missing", "a") is False
        assert state_store.add_members({"running": []}) == {"running": {"b"}}

    def test_add_member_counts_each_member_once_across_threads(
        self, state_store: StateStore
    ) -> None:
        new: list[bool] = []

        def work(_: int) -> None:
            new.extend(state_store.add_member("done", f"batch-{i}") for i in range(50))

        _run_threads(4, work)
        assert new.count(True) == 50
        assert state_store.count_members("done") == 50

    def test_add_members_adds_then_returns_each_set_whole(self, state_store: StateStore) -> None:
        assert state_store.add_members({}) == {}
        state_store.add_member("k:a", "x")
        found = state_store.add_members({"k:a": ["y", "x"], "k:b": ["z"], "k:c": []})
        assert found == {"k:a": {"x", "y"}, "k:b": {"z"}, "k:c": set()}
        assert state_store.count_members("k:a") == 2
        assert state_store.keys("k:") == ["k:a", "k:b"]
        # A set given no members is only read.
        assert state_store.add_members({"k:a": [], "k:b": ["w"]}) == {
            "k:a": {"x", "y"},
            "k:b": {"w", "z"},
        }

    def test_add_members_takes_thousands_of_members_and_keys_at_once(
        self, state_store: StateStore
    ) -> None:
        many = [f"m{i}" for i in range(10_000)]  # more than Lua unpacks into one SADD
        keys = {f"s:{i}": [f"x{i}", "shared"] if i % 2 else [] for i in range(1_500)}
        found = state_store.add_members({"s:big": many, **keys})
        assert found["s:big"] == set(many) and state_store.count_members("s:big") == 10_000
        assert all(found[k] == ({f"x{k[2:]}", "shared"} if v else set()) for k, v in keys.items())

    def test_of_two_concurrent_add_members_the_later_sees_both(
        self, state_store: StateStore
    ) -> None:
        seen: dict[int, list[set[str]]] = {r: [] for r in range(30)}

        def work(i: int) -> None:
            for r in seen:
                seen[r].append(state_store.add_members({f"r{r}": [f"w{i}"]})[f"r{r}"])

        _run_threads(2, work)
        # Whatever the interleaving, the second of each round's two calls saw both members.
        assert all({"w0", "w1"} in results for results in seen.values())

    def test_events_numbered_from_one_and_read_in_windows(self, state_store: StateStore) -> None:
        assert state_store.read_events("job:1:events") == []
        seqs = [state_store.append_event("job:1:events", f"e{i}") for i in range(1, 6)]
        assert seqs == [1, 2, 3, 4, 5]
        assert state_store.append_event("job:2:events", "other") == 1
        assert state_store.read_events("job:1:events") == [(i, f"e{i}") for i in range(1, 6)]
        assert state_store.read_events("job:1:events", after=2, limit=2) == [(3, "e3"), (4, "e4")]
        assert state_store.read_events("job:1:events", after=4, limit=10) == [(5, "e5")]
        assert state_store.read_events("job:1:events", after=5) == []

    def test_bad_event_window_is_rejected(self, state_store: StateStore) -> None:
        with pytest.raises(ValueError):
            state_store.read_events("s", limit=0)
        with pytest.raises(ValueError):
            state_store.read_events("s", after=-1)

    def test_concurrent_appends_get_unique_consecutive_numbers(
        self, state_store: StateStore
    ) -> None:
        appended: list[tuple[int, str]] = []

        def work(worker: int) -> None:
            for i in range(50):
                event = f"w{worker}-{i}"
                appended.append((state_store.append_event("progress", event), event))

        _run_threads(4, work)
        assert sorted(seq for seq, _ in appended) == list(range(1, 201))
        assert state_store.read_events("progress") == sorted(appended)

    def test_delete_removes_sets_and_streams(self, state_store: StateStore) -> None:
        state_store.add_member("members", "a")
        state_store.append_event("stream", "e1")
        state_store.append_event("stream", "e2")
        state_store.delete("members")
        state_store.delete("stream")
        assert state_store.count_members("members") == 0
        assert state_store.add_member("members", "a") is True
        assert state_store.read_events("stream") == []
        assert state_store.append_event("stream", "again") == 1
        assert state_store.keys("stream") == ["stream"]

    def test_delete_takes_many_keys_of_every_kind_at_once(self, state_store: StateStore) -> None:
        keys = [f"many:{i:04d}" for i in range(2500)]  # more than one DEL's worth on Redis
        for key in keys[:-3]:
            state_store.put(key, "v")
        state_store.incr(keys[-3])
        state_store.add_member(keys[-2], "m", ttl=60)
        state_store.append_event(keys[-1], "e")
        state_store.put("many-kept", "v")
        state_store.delete(*keys, "many:missing")
        assert state_store.keys("many") == ["many-kept"]
        assert state_store.count_members(keys[-2]) == 0
        state_store.delete()  # nothing to delete is no error
