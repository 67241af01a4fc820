# category: source
# attack: a 2.5 MB source file (one line repeated 100000 times)
# expect: harmless
# repeat-body: 100000
x = 123456789012345678901
