# category: benign
# attack: none: prints a greeting (a tier that refuses everything fails here)
# expect: ok
# stdout: hello from the corpus
print("hello from the corpus")
