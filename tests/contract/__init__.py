"""Contract tests: one suite, run against every registered store and queue backend."""
