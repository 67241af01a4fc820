# category: exit
# attack: prints a success message, then dies of an uncaught exception
# expect: failed
print("all good")
raise RuntimeError("not so good after all")
