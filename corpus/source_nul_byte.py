# category: source
# attack: source containing a NUL character
# expect: failed
print("before")@@NUL@@print("after")
