# category: exit
# attack: os._exit(256), which wraps to 0 on POSIX
# expect: failed
import os
import sys
sys.stdout.flush()
os._exit(256)
