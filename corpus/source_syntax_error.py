# category: source
# attack: source that does not parse
# expect: failed
def broken(:
    return
