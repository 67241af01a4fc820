# category: exit
# attack: sys.exit(2**100), an exit code no process can carry
# expect: failed
import sys
sys.exit(2 ** 100)
