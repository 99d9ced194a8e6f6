"""The fault harness: a cognify job disturbed by a fault, compared id by id with an
undisturbed run of the same corpus. `harness.py` runs jobs and injects faults, `stores.py`
reads and compares the stores, `servers.py` owns the Redis and Neo4j instances a test may kill.
"""
