# category: network
# attack: listens on a TCP port and waits for a connection from the host
# expect: harmless
import socket
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", @@LISTEN_PORT@@))
    s.listen(1)
    s.settimeout(2)
    conn, peer = s.accept()
    print("accepted a connection from", peer[0])
except Exception as exc:
    print("listen refused or no one came:", type(exc).__name__)
