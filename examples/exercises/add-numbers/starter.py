def add(a, b):
    # your code here
    pass


a = int(input())
b = int(input())
print(add(a, b))
