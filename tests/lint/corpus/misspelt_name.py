age = int(input("How old are you? "))
name = input("Your name? ")
greeting = "Hello"
print("Hi", nmae)
def double(number):
    result = number * 2
    return numbr
print(double(age))
