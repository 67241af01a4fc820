answer = input("Continue? ")
if answer == None:
    print("no answer")
done = answer == "y"
if done == True:
    print("done")
if answer is "y":
    print("yes")
