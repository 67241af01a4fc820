# WR101 after a compound statement whose every branch leaves (if/elif/else, try/except/else)
def sign(n):
    if n > 0:
        return 1
    elif n < 0:
        return -1
    else:
        return 0
    print("never")  # marked: every branch returns
    n = 0


def no_else(n):
    if n > 0:
        return 1
    elif n < 0:
        return -1
    print("zero")  # not marked: no else, so n == 0 gets here


def one_branch_goes_on(n):
    if n > 0:
        return 1
    else:
        n = -n
    return n  # not marked


def one_liners(n):
    if n: return "yes"
    else: raise ValueError("no")
    n += 1  # marked


def nested(n):
    if n > 0:
        if n > 10:
            return "big"
        else:
            return "small"
    else:
        raise ValueError(n)
    return "never"  # marked: the inner if/else leaves too


def in_a_loop(items):
    for item in items:
        if item:
            continue
        else:
            break
        print(item)  # marked
    while True:
        if items:
            break
        else:
            continue
    print("reached")  # not marked: the while True has a break of its own
    return items


def forever(n):
    if n:
        while True:
            n += 1
    else:
        return n
    print("never")  # marked


def tried(text):
    try:
        return int(text)
    except ValueError:
        return None
    print("never")  # marked: the try returns, its except too


def tried_else(text):
    try:
        number = int(text)
    except ValueError:
        raise
    else:
        return number
    print("never")  # marked: the else returns, the except raises


def tried_but_caught(text):
    try:
        return int(text)
    except ValueError:
        pass
    return 0  # not marked: the except goes on


def finally_returns():
    try:
        print("work")
    finally:
        return 1
    print("never")  # marked: finally always returns


def finally_goes_on(text):
    try:
        return int(text)
    finally:
        print("done")
    print("never")  # marked: the try returns and there is no except


def groups(fn):
    try:
        return fn()
    except* ValueError:
        return 1
    except* TypeError:
        return 2
    print("never")  # marked


def matched(command):
    match command:
        case "a":
            return 1
        case _:
            return 2
    print("not marked: match is not one of the statements this rule follows")


if __name__ == "__main__":
    if len(__name__) > 3:
        raise SystemExit(0)
    else:
        raise SystemExit(1)
    print("never"); print("twice")
