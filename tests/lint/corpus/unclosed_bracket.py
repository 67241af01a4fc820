scores = [10, 20, 30
print(max(scores))
