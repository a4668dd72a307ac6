"""The remembered payload readers of the legacy driver: the decoders' answers, parsed once."""

from __future__ import annotations

import pytest

from zk_registry.layout import (
    PayloadError,
    decode_consumer_registration,
    decode_topic_assignment,
    encode_consumer_registration,
    encode_topic_assignment,
    read_consumer_registration,
    topic_partitions,
)


def test_topic_partitions_are_the_decoded_partitions_in_order_parsed_once() -> None:
    data = encode_topic_assignment({p: [p % 3, (p + 1) % 3] for p in range(40)})
    got = topic_partitions(data)
    assert got == tuple(sorted(decode_topic_assignment(data))) == tuple(range(40))
    assert topic_partitions(bytes(data)) is got  # an equal payload is not parsed again
    assert topic_partitions(data.decode()) == got  # text: parsed, as the decoder takes it


def test_a_registration_is_the_decoded_one_shared_between_equal_payloads() -> None:
    data = encode_consumer_registration({"t": 2}, 1_767_225_600_000)
    got = read_consumer_registration(data)
    assert got == decode_consumer_registration(data)
    assert got.subscription == {"t": 2} and got.timestamp_ms == 1_767_225_600_000
    assert read_consumer_registration(bytes(data)) is got
    other = encode_consumer_registration({"t": 2}, 1_767_225_600_001)
    assert read_consumer_registration(other) is not got


@pytest.mark.parametrize("data", [b"{", b'{"version":1,"partitions":{"x":[0]}}', b"[]"])
def test_a_bad_topic_payload_fails_every_time(data: bytes) -> None:
    for _ in range(2):
        with pytest.raises(PayloadError):
            topic_partitions(data)


def test_a_bad_registration_fails_every_time() -> None:
    for _ in range(2):
        with pytest.raises(PayloadError):
            read_consumer_registration(b'{"version":1,"subscription":{"t":"x"},"pattern":"static"}')
