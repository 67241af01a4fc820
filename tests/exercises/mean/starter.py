def mean(values):
    return 0


if __name__ == "__main__":
    print(mean([float(x) for x in input().split()]))
