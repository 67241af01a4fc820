# wasm-runner's network shim: what the guest's HTTP clients reach, on the server tier.
#
# The guest has no sockets (WASI). When the run's key or profile has a network rule, each HTTP
# request of ``http.client`` (and so of ``urllib.request``, ``pandas.read_csv(url)``, and of
# ``urllib3`` 2.x and ``requests`` where they are installed) is one host call: ``{"op": "net", "method", "url", "headers", "body"}`` written on fd 0 like the
# ``host`` module's calls (``wasi/control.py``); the host checks the destination against the
# operator's rules, resolves the name itself, connects to the address it checked and answers
# with the status, headers and body (``network/calls.py``), or with the refusal as an
# ``OSError`` naming the rule. Redirects come back as they are: ``urllib`` follows them, each
# one a new request the host checks again. Without a rule every request, and every name
# lookup (``socket.getaddrinfo``), raises the refusal sentence the host wrote for the run.
#
# Shipped as source with each run (``host_functions/program.py``), compiled under the wrapper's
# own file name, installed as the module ``_wr_network``. The browser tier has this same file in
# its guest package (``_wasm_runner_guest.network``, ``wasm_runner/guest/browser.py``), set up
# before each run with a ``transport`` that sends the request to the runner's
# ``POST /api/network/fetch`` (a synchronous XMLHttpRequest of the worker). Standard library only. Nothing here is
# trusted by the host: it checks every request again whatever this file did.

import os as _os
import sys as _sys

__all__ = []
_CALL_MAGIC = b"WRHC"
_read, _write = _os.read, _os.write  # the program may replace os.read / os.write: not for us
_state = {"on": False, "refusal": "network access is off for this run", "transport": None}
_PATCHED = {}


class NetworkRefused(ConnectionRefusedError):
    """A request the run's network rules refuse (the message names the rule), or the host's
    failure to get an answer within them."""


def _refuse(*args, **kwargs):
    raise NetworkRefused(_state["refusal"])


def _read_exactly(n):
    data = b""
    while len(data) < n:
        chunk = _read(0, n - len(data))
        if not chunk:
            raise NetworkRefused("the host did not answer the network request")
        data += chunk
    return data


def _host_call(request):
    import json as _json  # here, not at the run's start: most runs never make a request
    data = _json.dumps(request, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    transport = _state["transport"]
    if transport is not None:  # another tier's channel
        return _json.loads(transport(data))
    try:
        _sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass
    try:
        _write(0, _CALL_MAGIC + data)
    except OSError:
        raise NetworkRefused("the host refused the network request (the run is ending)") from None
    n = int.from_bytes(_read_exactly(4), "little")
    return _json.loads(_read_exactly(n))


def fetch(method, url, headers, body):
    """The host's answer to one request: (status, reason, [(name, value)], body bytes);
    ``NetworkRefused`` (or the ``OSError`` subclass the host named) when it is refused."""
    if not _state["on"]:
        _refuse()
    import base64 as _base64
    answer = _host_call({"op": "net", "method": method, "url": url, "headers": headers,
                         "body": _base64.b64encode(body).decode("ascii")})
    if type(answer) is dict and type(answer.get("value")) is dict:
        v = answer["value"]
        return v["status"], v["reason"], [tuple(h) for h in v["headers"]], _base64.b64decode(v["body"])
    error = answer.get("error") if type(answer) is dict else None
    message = error.get("message") if type(error) is dict else None
    kind = {"TimeoutError": TimeoutError}.get(error.get("type") if type(error) is dict else None)
    if kind is not None:
        raise kind(message or "the request timed out")
    raise NetworkRefused(message if type(message) is str else "the host refused the network request")


class _Answer:
    """What ``http.client.HTTPResponse`` reads the host's answer from (``makefile``); the
    "socket" of a connection (``urllib3`` sets its timeout)."""

    def __init__(self, raw):
        import io
        self._file = io.BytesIO(raw)

    def makefile(self, mode="rb", *args, **kwargs):
        return self._file

    def settimeout(self, timeout):
        pass

    def close(self):
        pass


def _patch_http_client(client):
    """``HTTPConnection`` (and an ``HTTPSConnection`` where there is no ``ssl``) sending each
    request to the host: ``send`` keeps the request's bytes, ``getresponse`` hands them over."""
    if "http.client" in _PATCHED:
        return
    _PATCHED["http.client"] = True
    base = client.HTTPConnection

    def connect(self):
        self.sock = _Answer(b"")  # nothing to connect: the host does it, per request

    def send(self, data):
        out = self.__dict__.setdefault("_wr_out", [])
        if hasattr(data, "read"):
            while True:
                chunk = data.read(65536)
                if not chunk:
                    break
                out.append(chunk.encode("iso-8859-1") if isinstance(chunk, str) else bytes(chunk))
        elif isinstance(data, (bytes, bytearray, memoryview)):
            out.append(bytes(data))
        elif isinstance(data, str):
            out.append(data.encode("iso-8859-1"))
        else:
            for chunk in data:
                out.append(chunk.encode("iso-8859-1") if isinstance(chunk, str) else bytes(chunk))

    def getresponse(self):
        raw = b"".join(self.__dict__.pop("_wr_out", []))
        self._HTTPConnection__state = client._CS_IDLE
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = head.decode("iso-8859-1").split("\r\n")
        method, target = (lines[0].split(" ") + ["", ""])[:2]
        headers = []
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.lower() not in ("host", "connection", "content-length", "transfer-encoding"):
                headers.append([name.strip(), value.strip()])
        if any(line.lower().startswith("transfer-encoding:") for line in lines[1:]):
            body = _dechunk(body)
        scheme = getattr(self, "_wr_scheme", "http")
        default = 443 if scheme == "https" else 80
        host = self.host if ":" not in self.host else "[" + self.host + "]"
        port = "" if self.port == default else ":%d" % self.port
        url = target if "://" in target else "%s://%s%s%s" % (scheme, host, port, target)
        status, reason, answer_headers, content = fetch(method, url, headers, body)
        lines = ["HTTP/1.1 %d %s" % (status, reason)]
        for name, value in answer_headers:
            if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                lines.append("%s: %s" % (name, value))
        lines.append("Content-Length: %d" % len(content))
        lines.append("Connection: close")
        raw_answer = ("\r\n".join(lines) + "\r\n\r\n").encode("iso-8859-1") + content
        response = self.response_class(_Answer(raw_answer), method=method, url=url)
        response.begin()
        return response

    base.connect = connect
    base.send = send
    base.getresponse = getresponse
    if not hasattr(client, "HTTPSConnection"):
        class HTTPSConnection(base):
            default_port = 443
            _wr_scheme = "https"

            def __init__(self, host, port=None, *args, context=None, **kwargs):
                base.__init__(self, host, port, *args, **kwargs)

        HTTPSConnection.__module__ = "http.client"
        _PATCHED["https"] = True
        client.HTTPSConnection = HTTPSConnection
        if "HTTPSConnection" not in client.__all__:
            client.__all__.append("HTTPSConnection")


def _dechunk(body):
    out, rest = [], body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out.append(rest[:size])
        rest = rest[size + 2:]
    return b"".join(out)


def _patch_urllib_request(request):
    """An ``HTTPSHandler`` that needs no ``ssl`` (the guest has none), so that https:// URLs go
    to the host too (which does TLS)."""
    if "urllib.request" in _PATCHED:
        return
    _PATCHED["urllib.request"] = True
    import http.client as client
    _patch_http_client(client)
    if _PATCHED.get("https") or not hasattr(request, "HTTPSHandler"):  # no ssl: the host does TLS
        class HTTPSHandler(request.AbstractHTTPHandler):
            def __init__(self, debuglevel=None, context=None, check_hostname=None):
                request.AbstractHTTPHandler.__init__(self, debuglevel)

            def https_open(self, req):
                return self.do_open(client.HTTPSConnection, req)

            https_request = request.AbstractHTTPHandler.do_request_

        HTTPSHandler.__module__ = "urllib.request"
        request.HTTPSHandler = HTTPSHandler
        if "HTTPSHandler" not in request.__all__:
            request.__all__.append("HTTPSHandler")


_URLLIB3_KEEPS = ("timeout", "source_address", "blocksize", "socket_options", "proxy", "proxy_config")


def _patch_urllib3(connection):
    """``urllib3`` 2.x (``requests``' transport): its ``HTTPConnection`` subclasses
    ``http.client``'s (patched above) but connects a socket itself; here it connects nothing, is
    never reused (each request is its own host call), and https:// URLs go to the host too (which
    does TLS and verifies the certificate): ``HTTPSConnection`` needs no ``ssl``. A refusal is an
    ``OSError``: ``requests`` raises its ``ConnectionError`` with the sentence in it."""
    if "urllib3.connection" in _PATCHED:
        return
    _PATCHED["urllib3.connection"] = True
    import http.client as client
    _patch_http_client(client)
    base = connection.HTTPConnection

    request = base.request

    def connect(self):
        self.sock = _Answer(b"")

    def request_through_host(self, *args, **kwargs):
        if self.sock is None:  # http.client's send would connect: the patched one does not
            self.connect()
        return request(self, *args, **kwargs)

    base.connect = connect
    base.request = request_through_host
    base.is_connected = property(lambda self: False)

    class HTTPSConnection(base):
        default_port = 443
        _wr_scheme = "https"
        is_verified = True  # by the host
        proxy_is_verified = None

        def __init__(self, host, port=None, **kwargs):  # the TLS settings are the host's
            base.__init__(self, host, port, **{k: v for k, v in kwargs.items() if k in _URLLIB3_KEEPS})

        def set_cert(self, *args, **kwargs):
            pass

    HTTPSConnection.__module__ = "urllib3.connection"
    connection.HTTPSConnection = connection.VerifiedHTTPSConnection = HTTPSConnection


def _patch_urllib3_emscripten(connection):
    """Pyodide's ``urllib3`` (``urllib3.contrib.emscripten``, the browser tier) sends with its own
    ``XMLHttpRequest``, which the frame's policy blocks: here it sends through ``fetch`` above, the
    same channel (and the same rules) as every other client of the run."""
    if "urllib3.contrib.emscripten.connection" in _PATCHED:
        return
    _PATCHED["urllib3.contrib.emscripten.connection"] = True
    from urllib3.contrib.emscripten.response import EmscriptenResponse

    def send_request(request):
        body = request.body
        if body is None:
            body = b""
        elif isinstance(body, str):
            body = body.encode("utf-8")
        elif hasattr(body, "read"):
            body = body.read()
            body = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        elif not isinstance(body, (bytes, bytearray, memoryview)):
            body = b"".join(c.encode("utf-8") if isinstance(c, str) else bytes(c) for c in body)
        headers = [[name, str(value)] for name, value in request.headers.items()]
        status, reason, answer_headers, content = fetch(request.method, request.url, headers, bytes(body))
        return EmscriptenResponse(status_code=status, headers={k.lower(): v for k, v in answer_headers},
                                  body=content, request=request)

    connection.send_request = send_request
    connection.send_streaming_request = lambda request: None  # one answer, read whole


_AFTER_IMPORT = {"http.client": _patch_http_client, "urllib.request": _patch_urllib_request,
                 "urllib3.connection": _patch_urllib3,
                 "urllib3.contrib.emscripten.connection": _patch_urllib3_emscripten}


class _Finder:
    """Patches ``http.client``, ``urllib.request`` and ``urllib3``'s connections once they are imported (nothing is imported
    before the program asks for it)."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        patch = _AFTER_IMPORT.get(name)
        if patch is None or name in _PATCHED:
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader, patch)
        return spec


class _Loader:
    """A module's own loader (which may load other modules too: a zip's), patching the module
    once it has run."""

    def __init__(self, loader, patch):
        self._loader, self._patch = loader, patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._patch(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _wr_setup(on, refusal, transport=None):
    """Install the shim: ``on`` when the run has a network rule; ``refusal`` the sentence every
    request and name lookup raises when it has none."""
    _state["on"], _state["refusal"], _state["transport"] = bool(on), refusal, transport
    try:
        import _socket
        for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr"):
            setattr(_socket, name, _refuse)
    except ImportError:
        pass
    for name, patch in _AFTER_IMPORT.items():
        module = _sys.modules.get(name)
        if module is not None:
            patch(module)
    if not all(name in _PATCHED for name in _AFTER_IMPORT) and _Finder not in _sys.meta_path:
        _sys.meta_path.insert(0, _Finder)  # once (the browser's worker sets the shim up per run)
