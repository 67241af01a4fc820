def grade(score):
    if score >= 50: return "pass"
    else:
        return "fail"
    print("never")  # after if/else whose branches both return: marked


def first_even(numbers):
    for n in numbers:
        if n % 2 == 0:
            return n
            print("found", n)
            n = n + 1
        else:
            continue
            print("odd")
    message = "return here is only text"  # return
    return None
    print(message)


def check(age):
    if age < 0:
        raise ValueError("age cannot be negative, " +
                         "we return nothing")
        age = 0
    try:
        return age * 2
        print("unreachable in try")
    except TypeError:
        pass
    finally:
        print("finally runs")
    return age


while True:
    line = input()
    if line == "stop": break; print("after break")
    if line == "": continue
    x = \
        1
    break
    print(
        "never printed"
    )
    if x:
        print("nested, unreachable: marked once with the if")
        return_value = 1


def nested():
    def inner():
        return 1
        return 2
    return inner; inner()


def decorated():
    return 1

    @staticmethod
    def later():
        pass

    class Later:
        pass


def matcher(command):
    match command:
        case "go":
            return 1
            command = "gone"
        case _:
            pass


print(grade(70), first_even([1, 2]), check(3), nested(), decorated(), matcher("go"))
