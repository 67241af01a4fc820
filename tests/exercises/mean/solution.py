def mean(values):
    return sum(values) / len(values)


if __name__ == "__main__":
    print(mean([float(x) for x in input().split()]))
