"""Shared pytest configuration.

Fixture modules live beside this file and are loaded as plugins; add yours to
``pytest_plugins`` (e.g. ``"tests.ray_fixtures"``) rather than defining fixtures here.
"""

from __future__ import annotations

pytest_plugins = [
    "tests.zk_fixtures",  # zk_server, zk_connect, zk_client, zk_ensemble(_session), ...
    "tests.ray_fixtures",  # ray_local
    "tests.spark_fixtures",  # spark (one local[2] SparkSession per test session)
    "tests.conformance.plugin",  # --record-zk-conformance, zk_conformance_backend
]
