numbers = [3, 1, 2]
numbers[0]
sorted(numbers)
numbers == [1, 2, 3]
