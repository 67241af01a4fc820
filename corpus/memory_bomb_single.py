# category: memory
# attack: one 1.5 GiB allocation, touched so it is really committed
# expect: stopped
# limit: memory
data = bytearray(3 << 29)
for i in range(0, len(data), 1 << 16):
    data[i] = 1
print("allocated", len(data) >> 20, "MiB")
