def mean(values):
    """The average of a list of numbers."""
    if not values:
        return None
    return sum(values) / len(values)


print(mean([1, 2, 3]))
