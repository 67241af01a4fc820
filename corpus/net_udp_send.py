# category: network
# attack: sends UDP datagrams to a listener on the host's loopback
# expect: harmless
import socket
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(3):
        s.sendto(b"datagram from the sandbox", ("127.0.0.1", @@UDP_PORT@@))
    print("sent")
except Exception as exc:
    print("refused:", type(exc).__name__)
