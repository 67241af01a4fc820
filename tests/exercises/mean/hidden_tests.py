SECRET_MARKER = "zebra-quartz-hidden-77"


def test_secret_values():
    assert mean([2, 4, 9]) == 5  # zebra-quartz-hidden-77
