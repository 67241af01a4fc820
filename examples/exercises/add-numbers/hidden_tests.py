def test_negative():
    assert add(-2, -3) == -5


def test_floats():
    assert abs(add(0.1, 0.2) - 0.3) < 1e-9
