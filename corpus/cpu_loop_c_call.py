# category: cpu
# attack: one C call that runs for seconds without returning to the interpreter (sum over a 2**31-item iterator)
# expect: stopped
# limit: cpu
import itertools
print(sum(itertools.repeat(1, 2 ** 31 - 2)))
