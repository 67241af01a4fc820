# category: benign
# attack: none: writes a warning to stderr and still exits 0
# expect: ok
# stdout: done
import sys
print("warning: this goes to stderr", file=sys.stderr)
print("done")
