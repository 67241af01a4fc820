def add(a, b):
    return a + b


if __name__ == "__main__":
    a = int(input())
    b = int(input())
    print(add(a, b))
