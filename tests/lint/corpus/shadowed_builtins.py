list = [3, 1, 2]
sum = 0
for value in list:
    sum = sum + value
def show(str, max=10):
    print(str[:max])
show("hello")
print(sum)
