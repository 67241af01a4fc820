# category: disk
# attack: writes 256 MiB into its working directory in 8 MiB files (bounded)
# expect: stopped
# limit: disk
chunk = b"\0" * (1 << 20)
written = 0
for i in range(32):
    with open(f"fill-{i}.bin", "wb") as f:
        for _ in range(8):
            f.write(chunk)
            written += len(chunk)
print("wrote", written >> 20, "MiB")
