import pytest

from calyrex import PRESETS, placement_layers

TABLE = {
    # preset: (count at L=28, count at L=32, explicit layers where the spec gives them)
    "all": (28, 32),
    "every4": (7, 8),
    "first8th": (5, 5),
    "mid8th": (5, 5),
    "late_half": (14, 16),
    "late_quarter": (8, 9),
    "late8th": (5, 5),
    "last": (1, 1),
}


@pytest.mark.parametrize("preset", sorted(TABLE))
def test_preset_sizes_match_the_spec_table(preset):
    for n, count in zip((28, 32), TABLE[preset], strict=True):
        layers = placement_layers(preset, n)
        assert len(layers) == count
        assert layers == sorted(set(layers)) and all(0 <= i < n for i in layers)


def test_explicit_layers_of_the_table():
    assert placement_layers("late8th", 28) == [23, 24, 25, 26, 27]
    assert placement_layers("late8th", 32) == [27, 28, 29, 30, 31]
    assert placement_layers("first8th", 28) == [0, 1, 2, 3, 4]
    assert placement_layers("mid8th", 28) == [12, 13, 14, 15, 16]
    assert placement_layers("mid8th", 32) == [14, 15, 16, 17, 18]
    assert placement_layers("every4", 28) == [3, 7, 11, 15, 19, 23, 27]
    assert placement_layers("late_half", 32) == list(range(16, 32))
    assert placement_layers("late_quarter", 28) == list(range(20, 28))
    assert placement_layers("last", 32) == [31]
    assert placement_layers("all", 28) == list(range(28))


def test_presets_are_distinct_at_12_layers():
    assert len({tuple(placement_layers(p, 12)) for p in PRESETS}) == len(PRESETS)


def test_explicit_list_and_errors():
    assert placement_layers([5, 3, 3], 8) == [3, 5]
    with pytest.raises(ValueError, match="unknown placement preset 'late9th'"):
        placement_layers("late9th", 28)
    with pytest.raises(ValueError, match="outside 0..27"):
        placement_layers([28], 28)
