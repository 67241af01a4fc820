# category: benign
# attack: none: json, re, collections, statistics and a caught exception
# expect: ok
# stdout: stdlib ok 3.5
import collections
import json
import re
import statistics

words = re.findall(r"\w+", "the cat and the hat and the bat")
counts = collections.Counter(words)
assert json.loads(json.dumps(counts))["the"] == 3
try:
    1 / 0
except ZeroDivisionError:
    pass
print("stdlib ok", statistics.median([1, 2, 5, 6]))
