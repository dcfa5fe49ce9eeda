import torch

from calyrex.core.mask import rows_with_keys, span_causal_mask, span_indices


def test_span_indices_compacts_each_row_in_order():
    mask = torch.tensor([[0, 1, 1, 1, 0, 0], [0, 0, 1, 0, 1, 0], [0, 0, 0, 0, 0, 0]]).bool()
    idx, valid = span_indices(mask)
    assert idx.tolist() == [[1, 2, 3], [2, 4, 0], [0, 0, 0]]
    assert valid.tolist() == [[True] * 3, [True, True, False], [False] * 3]


def test_span_causal_mask_matches_the_drawn_matrix():
    system = torch.tensor([[0, 0, 1, 1, 1, 0, 0]]).bool()
    idx, valid = span_indices(system)
    visible = span_causal_mask(torch.arange(7)[None], idx, valid)[0].int()
    assert visible.tolist() == [
        [0, 0, 0],
        [0, 0, 0],
        [1, 0, 0],
        [1, 1, 0],
        [1, 1, 1],
        [1, 1, 1],
        [1, 1, 1],
    ]
    assert rows_with_keys(visible[None].bool())[0].tolist() == [False, False] + [True] * 5


def test_padding_is_never_a_key():
    idx = torch.tensor([[3, 0]])
    valid = torch.tensor([[True, False]])
    visible = span_causal_mask(torch.arange(5)[None], idx, valid)
    assert not visible[..., 1].any()
