"""vLLM's lora_requests_info gauge read from a /metrics page: the latest label set's running and
waiting adapters, per engine core joined; None when the page has no such gauge."""

from __future__ import annotations

import pytest

from placement.errors import InputError
from serving.lora_info import lora_adapters

PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="llama"} 3.0
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters="a",waiting_lora_adapters=""} 1.7e9
vllm:lora_requests_info{max_lora="2",running_lora_adapters="a,b",waiting_lora_adapters="c,d"} 1.70000002e9
vllm:lora_requests_info{max_lora="2",running_lora_adapters="b",waiting_lora_adapters="c"} 1.70000001e9
"""


def test_the_latest_label_set_holds_the_current_lists_in_queue_order() -> None:
    assert lora_adapters(PAGE) == (("a", "b"), ("c", "d"))


def test_engine_cores_are_joined_and_an_adapter_running_on_one_is_running() -> None:
    page = """\
vllm:lora_requests_info{engine="0",running_lora_adapters="a",waiting_lora_adapters="b"} 2.0
vllm:lora_requests_info{engine="1",running_lora_adapters="b",waiting_lora_adapters="c, a"} 3.0
vllm:lora_requests_info{engine="1",running_lora_adapters="",waiting_lora_adapters=""} 1.0
"""
    assert lora_adapters(page) == (("a", "b"), ("c",))


def test_a_page_without_the_gauge_says_nothing_and_a_broken_one_names_its_source() -> None:
    assert lora_adapters("vllm:num_requests_running 1.0\n") is None
    assert lora_adapters('vllm:lora_requests_info{running_lora_adapters=""} 1.0\n') == ((), ())
    with pytest.raises(InputError, match="lora_requests_info") as info:
        lora_adapters("vllm:lora_requests_info{running_lora_adapters=} x\n", "http://r0/metrics")
    assert "http://r0/metrics" in str(info.value)
