def AddNumbers(a, b):
    Total = a + b; return Total
l = AddNumbers(1, 2);
if l > 2: print("big")   
print("this line is deliberately much too long for the style notes, which ask for at most one hundred chars")
