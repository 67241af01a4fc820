# category: memory
# attack: unbounded recursion after raising the recursion limit (overflows the C stack)
# expect: failed
import sys
sys.setrecursionlimit(10 ** 8)
def down(n):
    return down(n + 1) + 1
print(down(0))
