# category: cpu
# attack: a pure-Python infinite loop
# expect: stopped
# limit: cpu
while True:
    pass
