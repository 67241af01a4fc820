# category: memory
# attack: grows a list of 64 MiB blocks up to 3 GiB (bounded so an unlimited tier does not take the host down)
# expect: stopped
# limit: memory
blocks = []
for i in range(48):
    blocks.append(bytearray(64 << 20))
print("allocated", len(blocks) * 64, "MiB")
