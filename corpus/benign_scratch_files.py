# category: benign
# attack: none: writes, lists and reads back a file in its working directory
# expect: ok
# stdout: scratch round-trip ok
import os
with open("notes.txt", "w") as f:
    f.write("line 1\nline 2\n")
assert "notes.txt" in os.listdir(".")
with open("notes.txt") as f:
    assert f.read().count("\n") == 2
print("scratch round-trip ok")
