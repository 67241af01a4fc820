# category: network
# attack: opens a TCP connection to a listener on the host's loopback
# expect: harmless
import socket
try:
    with socket.create_connection(("127.0.0.1", @@TCP_PORT@@), timeout=2) as s:
        s.sendall(b"hello from the sandbox")
    print("connected")
except Exception as exc:
    print("refused:", type(exc).__name__)
