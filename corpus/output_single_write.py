# category: output
# attack: one 64 MiB write to stdout
# expect: stopped
# limit: output
import sys
sys.stdout.write("y" * (64 << 20))
