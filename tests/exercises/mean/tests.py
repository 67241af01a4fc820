def test_mean_of_two():
    assert mean([1, 3]) == 2


def test_mean_of_one():
    """A list with one value."""
    assert mean([5]) == 5.0, "the mean of one value is that value"


def test_empty_list_raises():
    try:
        mean([])
    except ZeroDivisionError:
        pass
    else:
        assert False, "mean([]) should raise ZeroDivisionError"
