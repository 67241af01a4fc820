# category: output
# attack: writes to stderr without end, swallowing errors
# expect: stopped
# limit: output
import sys
line = "e" * 1000 + "\n"
while True:
    try:
        sys.stderr.write(line)
    except BaseException:
        pass
