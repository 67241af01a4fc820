"""A docstring is not thrown away."""
n = 1
total = 3
scores = [1, 2, 3]
name = "Ada"
n + 1
total * 2
scores[0]
n == 5
print
name.upper
(n - 1)
-n
...
f"{n}"
n + \
    1  # a continuation line
text = "n + 1"  # n + 1 in a string or a comment is not code
print(n + 1); n * 2
if n: n % 2
for score in scores:
    score ** 2
    scores[0] + 1
def get(): return scores[1:]
get()[0]
print(get()[0])
n += 1
scores[0] = n + 1
total // 2 + len(scores)
total
