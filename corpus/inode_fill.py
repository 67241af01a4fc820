# category: disk
# attack: creates 20000 empty files in its working directory (bounded)
# expect: stopped
# limit: disk
for i in range(20000):
    open(f"f{i}", "w").close()
print("created 20000 files")
