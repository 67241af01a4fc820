x = 5
x == 6
x
x = x
def area(w, h):
    return w * h
def area(side):
    return side * side
print(area(3))
count = 0
def add_one():
    count += 1
    print(count)
