def test_small():
    assert add(2, 3) == 5


def test_zero():
    assert add(0, 0) == 0
    assert add(7, 0) == 7
