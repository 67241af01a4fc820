# category: wall
# attack: sleeps for an hour, far past any deadline, using no CPU
# expect: stopped
# limit: wall
import time
time.sleep(3600)
print("woke up")
