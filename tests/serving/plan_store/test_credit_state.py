"""A damaged credit state (``credits.json``, the Redis hash) is refused naming where and what."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from placement.errors import InputError
from serving.plan_store import DirectoryPlanStore
from serving.plan_store.base import credit_counters
from serving.plan_store.redis import RedisPlanStore


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "holds a list, not the credit counters"),
        ('"acme"', "holds a str"),
        ('{"acme": "lots"}', "field 'acme': 'lots' is not a counter"),
        ('{"acme": true}', "field 'acme': True is not a counter"),
        ('{"acme": NaN}', "field 'acme': nan is not a counter"),
        ('{"acme": ', "credits.json:1: the credit state is not JSON"),
    ],
)
def test_a_damaged_credits_file_names_the_file_and_tenant(
    tmp_path: Path, text: str, message: str
) -> None:
    store = DirectoryPlanStore(tmp_path)
    (tmp_path / "credits.json").write_text(text)
    with pytest.raises(InputError, match="credit") as err:
        store.load_credits()
    assert message in str(err.value)
    assert str(tmp_path / "credits.json") in str(err.value)


def test_a_binary_credits_file_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "credits.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InputError, match="not JSON"):
        DirectoryPlanStore(tmp_path).load_credits()


def test_a_damaged_redis_hash_names_the_key_and_tenant(redis_url: str) -> None:
    store = RedisPlanStore(redis_url, prefix="damaged-credits")
    client = redis.Redis.from_url(redis_url)
    try:
        client.hset("damaged-credits:credits", mapping={"acme": "1.5", "globex": "lots"})
        with pytest.raises(InputError) as err:
            store.load_credits()
    finally:
        client.delete("damaged-credits:credits")
        client.close()
    assert "redis key damaged-credits:credits" in str(err.value)
    assert "field 'globex'" in str(err.value)


def test_counters_of_numbers_and_numeric_strings_are_read() -> None:
    assert credit_counters({"a": 1, b"b": b"2.5"}, source="x") == {"a": 1.0, "b": 2.5}
