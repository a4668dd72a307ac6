"""The delivery guarantee each generation's commit settings give (emulator.delivery)."""

from __future__ import annotations

import pytest

from emulator.delivery import DeliveryMode


@pytest.mark.parametrize(
    ("mode", "key", "loss"),
    [
        (DeliveryMode("zookeeper"), "auto", True),
        (DeliveryMode("zookeeper", auto_commit=False), "none", False),
        (DeliveryMode("zookeeper", auto_commit=False, manual_commit="sync"), "manual-sync", True),
        # The 0.8 consumer has no rebalance listener: the key ignores it.
        (DeliveryMode("zookeeper", rebalance_listener="commit-on-revoke"), "auto", True),
        (DeliveryMode("classic-eager"), "auto", False),
        (DeliveryMode("classic-cooperative", rebalance_listener="commit-on-revoke"),
         "auto+listener", False),
        (DeliveryMode("consumer", kafka_version="3.9"), "auto", True),
        (DeliveryMode("consumer", kafka_version="4.0"), "auto", False),
        (DeliveryMode("consumer", kafka_version="4.3"), "auto", False),
        (DeliveryMode("consumer", auto_commit=False, manual_commit="async", kafka_version="3.9"),
         "manual-async", False),
    ],
)
def test_modes(mode: DeliveryMode, key: str, loss: bool) -> None:
    assert (mode.key, mode.allows_loss) == (key, loss)
    assert mode.guarantee


def test_guarantees_name_what_differs() -> None:
    coop = DeliveryMode("classic-cooperative").guarantee
    assert "processed again" in coop
    assert "processed again" not in DeliveryMode("classic-eager").guarantee
    assert "KAFKA-18641" in DeliveryMode("consumer", kafka_version="4.0").guarantee
    assert "can lose" in DeliveryMode("consumer", kafka_version="3.9").guarantee
    assert "lose" not in DeliveryMode("consumer", kafka_version="4.0").guarantee
    manual = DeliveryMode("consumer", auto_commit=False, manual_commit="sync")
    assert "again" in manual.guarantee
