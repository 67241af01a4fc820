# category: output
# attack: prints without end
# expect: stopped
# limit: output
line = "x" * 1000
while True:
    print(line)
