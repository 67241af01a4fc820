# category: benign
# attack: none: counts primes below 20000 with a sieve
# expect: ok
# stdout: primes below 20000: 2262
n = 20000
sieve = bytearray([1]) * n
sieve[0:2] = b"\0\0"
for i in range(2, int(n ** 0.5) + 1):
    if sieve[i]:
        sieve[i * i :: i] = bytearray(len(range(i * i, n, i)))
print(f"primes below {n}: {sum(sieve)}")
