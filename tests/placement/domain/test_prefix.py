from hypothesis import given
from hypothesis import strategies as st

from placement.domain.prefix import chain_block_ids, hash_text, hash_tokens, shared_prefix_blocks


@given(st.lists(st.integers(0, 1000), max_size=20), st.lists(st.integers(0, 1000), max_size=20))
def test_hashes_shared_exactly_as_long_as_blocks_are(a, b):
    ha, hb = chain_block_ids(a), chain_block_ids(b)
    assert shared_prefix_blocks(ha, hb) == shared_prefix_blocks(a, b)


def test_same_block_after_different_prefixes_hashes_differently():
    assert chain_block_ids([1, 7])[1] != chain_block_ids([2, 7])[1]


def test_tokens_and_text_hash_only_full_blocks():
    assert len(hash_tokens(list(range(100)), 16)) == 6
    assert len(hash_text("x" * 99, 10)) == 9
    assert hash_text("abcdefgh", 4)[0] == hash_text("abcdzzzz", 4)[0]
