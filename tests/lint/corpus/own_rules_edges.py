a = b = c = [1]
(a)
((a + 1))
(a, 1)
()
(a[0])
(yield)
-a ** 2
-a * 2
~a + 1
a ** -1
not a + 1
a[0] if a else b
[1, 2][0]
"abc"[0]
a.b[0]
a[0].b
a[0]()
f"{a}" + "x"
"x" "y"
a @ b
lambda x=1: x + 1
a + (b := 2)
x = (
    a
    + b
)
a \
  [0]
a = 1
while a:
    a - 1
    if a: break
    else: continue; a * 2
try:
    raise ValueError
except ValueError as err:
    raise
    a + 1
else:
    pass
finally:
    a % 2
for i in range(3):
    pass
else:
    a[i]
with open("f") as fh:
    return
    fh.read()[0]
class A:
    def m(self):
        return self.x
        self.x + 1
    y = 1
    y * 2
async def g():
    await a + 1
    await a
    async for z in a:
        continue
        z + 1
    async with a as b:
        b[0]
print("x"); print("é" + "ü") ; b[0]
