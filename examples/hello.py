import sys
print(f"Hello from CPython {sys.version.split()[0]} on {sys.platform}")
print(sum(i * i for i in range(10)))
