def quiz():
    while True:
        answer = input("Number? ")
        if answer == "q":
            exit()
    print("bye")  # never: the loop has no break, exit() raises SystemExit


def words():
    while (True):
        for word in ["a", "b"]:
            if word == "b":
                break  # leaves the for, not the while
        else:
            break  # a for's else: this one leaves the while
    print("reached")


def inner_break_only():
    while True:
        def stop():
            while True:
                break
        try:
            stop()
        finally:
            pass
        continue
    print("never either")
    stop = None


def until_empty():
    while True:
        if input() == "":
            break
    print("reached too")


def ask():
    while True:
        text = input()
        if text:
            return text
    return ""  # never


while 1:
    break
x = 1
while x := 0:
    pass
print(ask(), quiz(), words(), inner_break_only(), until_empty())
