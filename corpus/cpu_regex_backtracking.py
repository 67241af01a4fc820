# category: cpu
# attack: catastrophic regex backtracking inside the C regex engine
# expect: stopped
# limit: cpu
import re
print(re.match(r"(a|aa)*c", "a" * 60))
