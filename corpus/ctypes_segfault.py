# category: ctypes
# attack: reads a non-canonical address through ctypes (a certain segfault)
# expect: failed
import ctypes
print(ctypes.string_at(1 << 63, 16))
